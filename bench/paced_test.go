package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/bench/internal/sample"
)

func TestPacedPoints(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	// 3 rates × 4 sizes × N=1,4 × 3 relays, and N=16 at 1,000/s × 4 sizes × 3.
	pts := pacedPoints(o)
	if len(pts) != 72+12 {
		t.Fatalf("full: %d points", len(pts))
	}
	for _, want := range []pacedPoint{{1000, 512, 16, proxied, logOn.name}, {20000, cacheSize, 4, proxied, logOff.name}, {5000, 128, 1, chained, plain.name}} {
		if !slices.Contains(pts, want) {
			t.Errorf("full points lack %s", want)
		}
	}
	if slices.Contains(pts, pacedPoint{5000, 512, 16, chained, plain.name}) {
		t.Error("N=16 above the lowest rate")
	}
	// The relays of a row run one after another.
	if pts[0].topology != chained || pts[1].variant != logOn.name || pts[2].variant != logOff.name || pts[3].replicas != pts[0].replicas+3 {
		t.Errorf("order: %v", pts[:4])
	}
	if o, err = parseOptions([]string{"-quick"}); err != nil {
		t.Fatal(err)
	}
	if pts := pacedPoints(o); len(pts) != 1*1*3 || o.pacedSeconds != 5 || o.idleSeconds != 5 || o.pacedWideN != nil {
		t.Errorf("quick: %d points, %d s, idle %d s, wide %v", len(pts), o.pacedSeconds, o.idleSeconds, o.pacedWideN)
	}
	if o, err = parseOptions([]string{"-paced-rates", "500", "-paced-sizes", "cache,64", "-paced-wide-replicas", "none", "-paced-conns", "7"}); err != nil {
		t.Fatal(err)
	}
	if pts := pacedPoints(o); len(pts) != 2*2*3 || pts[0].valueSize != cacheSize || o.pacedConns != 7 {
		t.Errorf("-paced-*: %v", pts)
	}
	if l := pacedLoad(o, "", pacedPoint{rate: 500, valueSize: cacheSize}); l.Next == nil || l.Ring != cacheRing {
		t.Errorf("cache-like load: %+v", l)
	}
	if len(idlePoints()) != 3 {
		t.Errorf("idle points %v", idlePoints())
	}
	for _, bad := range [][]string{{"-paced-sizes", "mixed"}, {"-sizes", "cache"}, {"-paced-replicas", "cache"}, {"-paced-conns", "0"}, {"-paced-rates", "0"}} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("parseOptions(%q): no error", bad)
		}
	}
	if !strings.Contains(o.plan(), "idle N=4 proxy, log off, 60 s measured") {
		t.Errorf("plan:\n%s", o.plan())
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 20000: "20,000", 1234567: "1,234,567", -5000: "-5,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCompareSizesCache(t *testing.T) {
	got := []int{cacheSize, 4096, mixedSize, 128}
	slices.SortFunc(got, compareSizes)
	if want := []int{128, 4096, mixedSize, cacheSize}; !slices.Equal(got, want) {
		t.Errorf("sorted %v, want %v", got, want)
	}
	if sizeName(cacheSize) != "cache-like mix" || fileSize(cacheSize) != "cache" {
		t.Errorf("cache size named %q, %q", sizeName(cacheSize), fileSize(cacheSize))
	}
}

// pacedFixture is a paced section with 512 B rows at two rates and N=1
// and 4, and the idle rows: the proxy with its log is at 0.5× the chained
// relay's CPU at every row (met at N=1, missed at N=4) and 1.1× its
// switches, and the log costs it 1.25×.
func pacedFixture() *pacedResult {
	one := func(v float64) sample.Summary { return sample.Of([]float64{v}) }
	x := &pacedResult{seconds: 20, idleSeconds: 60, conns: 20}
	for _, rate := range []int{1000, 20000} {
		for _, n := range []int{1, 4} {
			base := float64(rate) / 1000
			add := func(t topology, v variant, cpuGB, core, switches float64) {
				x.points = append(x.points, pacedSummary{point: pacedPoint{rate, 512, n, t, v.name}, runs: 1,
					held: one(float64(rate)), relayCPUGB: one(cpuGB), relayCore: one(core), switches: one(switches), digestsSame: true})
			}
			add(chained, plain, 20, base, 1000*base)
			add(proxied, logOn, 10, base/2, 1100*base)
			add(proxied, logOff, 8, base/2.5, 900*base)
		}
	}
	x.idle = []pacedSummary{
		{point: pacedPoint{replicas: 4, topology: chained, variant: plain.name}, switches: one(15), relayCore: one(0.2), digestsSame: true},
		{point: pacedPoint{replicas: 4, topology: proxied, variant: logOn.name}, switches: one(24), relayCore: one(0.3), digestsSame: true},
		{point: pacedPoint{replicas: 4, topology: proxied, variant: logOff.name}, switches: one(124), relayCore: one(0.3), digestsSame: true},
	}
	return x
}

func TestPacedGoals(t *testing.T) {
	got := checkGoals(t, pacedFixture().pacedGoals(), map[string]bool{
		"relay CPU ÷ chained 1,000/s, 512 B, N=1":               true,  // 0.5 ≤ 0.5
		"relay CPU ÷ chained 20,000/s, 512 B, N=4":              false, // 0.5 > 0.4
		"context switches/s ÷ chained 1,000/s, 512 B, N=4":      true,  // 1.1
		"the log: relay CPU, log on ÷ off 20,000/s, 512 B, N=1": false, // 1.25
		"idle wake-ups/s, proxy − chained idle, N=4":            true,  // +9
	})
	// Per loaded row: CPU, switches and the log's cost; and the idle row.
	if len(got) != 4*3+1 {
		t.Errorf("%d goal rows", len(got))
	}
}

func TestPacedMarkdown(t *testing.T) {
	r := &results{opts: &options{reps: 3, out: t.TempDir()}, paced: pacedFixture(), started: time.Now(), finished: time.Now()}
	if err := r.write(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.opts.out, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"## Paced: a steady rate from many clients",
		"### 512 B values",
		"| 20,000 | 4 | proxy, log on | 20000 | – | 10.00 | 10.0 | 0.50 | 22000 | 1.10 |",
		"| 1,000 | 1 | chained redis-server | 1000 | – | 20.00 | 1.0 | – | 1000 | – |",
		"| proxy, log off | 124.0 | +109.0 | 0.30 |",
		"| relay CPU ÷ chained | 20,000/s, 512 B, N=4 | 10.00 ÷ 20.00 = 0.50 (s/replica-GB) | ≤ 0.4 | **missed** |",
		"| idle wake-ups/s, proxy − chained | idle, N=4 | 24.0 − 15.0 = +9.0 | ≤ +10 | met |",
		"![relay CPU against rate, 512 B values, N=1](chart-paced-relay-N1.png)",
		"![relay CPU against rate, 512 B values, N=4](chart-paced-relay-N4.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
	for _, f := range []string{"chart-paced-relay-N1.png", "chart-paced-relay-N4.png"} {
		if _, err := os.Stat(filepath.Join(r.opts.out, f)); err != nil {
			t.Error(err)
		}
	}
	if sum := r.summary(); !strings.Contains(sum, "paced and stream log goals: 7 of 13 rows met") || !strings.Contains(sum, "(0.50× CPU/GB)") {
		t.Errorf("summary:\n%s", sum)
	}
}

func TestPacedSummarise(t *testing.T) {
	pt := pacedPoint{1000, 512, 4, proxied, logOn.name}
	runs := []pacedRun{
		{window: 10 * time.Second, commands: 10000, bytes: 5e6, relayCPU: time.Second, primaryCPU: 2 * time.Second,
			switches: 30000, syscalls: 50000, missed: 0.01, digestsSame: true},
		{window: 10 * time.Second, commands: 9990, bytes: 5e6, relayCPU: 2 * time.Second, switches: 10000, digestsSame: false, extraSyncs: 1},
	}
	s := summarisePaced(pt, runs)
	// 1 CPU-s over 5 MB × 4 replicas is 50 s/replica-GB; 2 CPU-s is 100.
	if s.relayCPUGB.Median != 75 || s.relayCore.Median != 15 || s.switches.Median != 2000 || s.held.Min != 999 ||
		s.missed.Max != 1 || s.digestsSame || s.extraSyncs != 1 || s.mbps.Median != 0.5 {
		t.Errorf("summary %+v", s)
	}
	if idle := summarisePaced(pacedPoint{replicas: 4, topology: chained, variant: plain.name}, runs); idle.relayCPUGB.N != 0 {
		t.Errorf("idle rows have no CPU per GB: %+v", idle.relayCPUGB)
	}
}

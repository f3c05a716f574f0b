package main

import (
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/bench/internal/sample"
)

// TestBenchmarkValue checks the value against what redis-benchmark 7.0.15
// stored for `redis-benchmark -t set -d 16`: the harness writes its SETs
// itself, to pace them, and they must be the same bytes.
func TestBenchmarkValue(t *testing.T) {
	if got := string(benchmarkValue(16)); got != "VXKeHogKgJ=[5V9_" {
		t.Errorf("benchmarkValue(16) = %q", got)
	}
	cmd := string(benchmarkKeys(false)(nil))
	want := "*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000000\r\n$512\r\n" + string(benchmarkValue(512)) + "\r\n"
	if cmd != want {
		t.Errorf("first command = %q", cmd)
	}
	a, b := benchmarkKeys(true), benchmarkKeys(true)
	if string(a(nil)) != string(b(nil)) {
		t.Error("random keys differ between generators: not seeded")
	}
}

func TestLinkField(t *testing.T) {
	v := "ip=10.1.0.2,port=7000,compression=zstd,raw_bytes=100,wire_bytes=25,ratio=4.00,cpu_sec=0.125"
	for key, want := range map[string]string{"ip": "10.1.0.2", "compression": "zstd", "cpu_sec": "0.125", "missing": ""} {
		if got := linkField(v, key); got != want {
			t.Errorf("linkField(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestRegionsSkipped(t *testing.T) {
	r := &results{opts: &options{}, regions: &regionsResult{skipped: "netns: not root"}}
	var b strings.Builder
	r.regionsMarkdown(func(format string, args ...any) { b.WriteString(strings.TrimSpace(format) + "\n") })
	if !strings.Contains(b.String(), "Not measured") {
		t.Errorf("a skipped section does not say so:\n%s", b.String())
	}
}

func TestRegionGoals(t *testing.T) {
	stream := func(crossed int64, cpuA, cpuB float64, lagMax float64) regionStream {
		return regionStream{pct: 90, rate: 10e6, bytes: 1e9, crossedAB: crossed, loadTime: 100 * time.Second,
			lag: sample.Of([]float64{lagMax}), catchUp: 100 * time.Millisecond,
			linkA: linkFigures{ok: true, cpu: cpuA}, linkB: linkFigures{ok: true, cpu: cpuB}}
	}
	x := &regionsResult{cells: []regionCell{
		{data: "cache-like", mode: "no", synced: true, sync: regionSync{crossedAB: 1000e6}, streams: []regionStream{stream(1020e6, 0, 0, 50e6)}},
		{data: "cache-like", mode: "zstd", synced: true, sync: regionSync{crossedAB: 250e6}, streams: []regionStream{stream(300e6, 0.5, 0.4, 1e6)}},
	}}
	met := map[string]bool{}
	for _, g := range x.regionsGoals() {
		met[g.goal] = g.met
	}
	want := map[string]bool{
		"bytes across the link, plain ÷ zstd":                  true,  // 4×
		"bytes across the link per GB of stream, plain ÷ zstd": true,  // 3.4×
		"compressing on proxy A, CPU-s per GB of stream":       true,  // 0.5
		"decompressing on proxy B, CPU-s per GB of stream":     false, // 0.4
		"bounded lag, zstd":                                    true,  // 0.1 s of load
	}
	for g, w := range want {
		if got, ok := met[g]; !ok || got != w {
			t.Errorf("%s: met = %v (present %v), want %v", g, got, ok, w)
		}
	}
}

func TestPregenerate(t *testing.T) {
	live, pre := benchmarkKeys(true), pregenerate(benchmarkKeys(true), 2000)
	for i := range 10 { // past the 2000 bytes pregenerated, into next's own
		if a, b := string(live(nil)), string(pre(nil)); a != b {
			t.Fatalf("command %d: %q, pregenerated %q", i, a, b)
		}
	}
}

package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/bench/internal/gobench"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

func TestFmtS(t *testing.T) {
	tests := []struct {
		name string
		in   sample.Summary
		want string
	}{
		{"none", sample.Of(nil), "–"},
		{"one run", sample.Of([]float64{1.234}), "1.23"},
		{"range", sample.Of([]float64{1, 2, 4}), "2.00 (1.00–4.00)"},
		{"all equal", sample.Of([]float64{3, 3}), "3.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fmtS(tt.in, 2); got != tt.want {
				t.Errorf("fmtS = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSizeName(t *testing.T) {
	for in, want := range map[int]string{512: "512 B", 16384: "16 KiB", 65536: "64 KiB", 1500: "1500 B", mixedSize: "mixed 100 B–64 KiB"} {
		if got := sizeName(in); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestMixedSizes(t *testing.T) {
	a, b := mixedValueSizes(), mixedValueSizes()
	if !slices.Equal(a, b) {
		t.Fatal("mixedValueSizes differs between calls: not seeded")
	}
	sum := 0
	for _, n := range a {
		if n < mixedMin || n > mixedMax {
			t.Errorf("size %d outside %d–%d", n, mixedMin, mixedMax)
		}
		sum += n
	}
	if slices.Min(a) > 1000 || slices.Max(a) < 16<<10 {
		t.Errorf("sizes %v do not span the range", a)
	}
	got := []int{65536, mixedSize, 512, 1024}
	slices.SortFunc(got, compareSizes)
	if want := []int{512, 1024, 65536, mixedSize}; !slices.Equal(got, want) {
		t.Errorf("sorted sizes %v, want %v", got, want)
	}
	if fileSize(mixedSize) != "mixed" {
		t.Errorf("fileSize(mixed) = %q", fileSize(mixedSize))
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-note", "busy machine"})
	if err != nil {
		t.Fatal(err)
	}
	if o.streamMB != 64 || len(o.replicas) != 2 || o.benchCount != 1 || o.reps != 1 || o.note != "busy machine" {
		t.Errorf("quick defaults: %+v", o)
	}
	if got := o.makeCommand(); got != "make bench QUICK=1" {
		t.Errorf("makeCommand = %q", got)
	}
	o, err = parseOptions([]string{"-replicas", "2,3", "-sections", "streaming"})
	if err != nil {
		t.Fatal(err)
	}
	if o.reps != 3 || o.streamMB != 512 || o.replicas[1] != 3 || !o.sections["streaming"] || o.sections["engine"] {
		t.Errorf("full defaults with overrides: %+v", o)
	}
	if got := o.makeCommand(); !strings.HasPrefix(got, "make bench BENCH_ARGS='") {
		t.Errorf("makeCommand = %q", got)
	}
	o, err = parseOptions([]string{"-quick", "-proxy-args", " --repl-backlog-size  64mb "})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.proxyArgs, []string{"--repl-backlog-size", "64mb"}) {
		t.Errorf("-proxy-args: proxyArgs = %q", o.proxyArgs)
	}
	if got, want := o.makeCommand(), `make bench QUICK=1 BENCH_ARGS='-proxy-args=" --repl-backlog-size  64mb "'`; got != want {
		t.Errorf("makeCommand = %q, want %q", got, want)
	}
	for _, bad := range [][]string{{"-replicas", "0"}, {"-replicas", "mixed"}, {"-full-log-size", "0"}, {"-sections", "nope"}, {"extra"}} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("parseOptions(%q): no error", bad)
		}
	}
}

func TestEngineFrom(t *testing.T) {
	var rs []gobench.Result
	for _, n := range engineSizes {
		for _, name := range []string{"Fanout", "RawWritev"} {
			m := map[string]float64{"MB/s": 100, "allocs/op": 0, "B/op": 0}
			if name == "Fanout" {
				m["MB/s"], m["blocks/read"] = 90, 15.5
			}
			rs = append(rs, gobench.Result{Name: name + "/replicas=" + strconv.Itoa(n), Metrics: m})
		}
	}
	e, err := engineFrom(rs, "cmd")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.rows) != 3 || math.Abs(e.rows[2].ratio-0.9) > 1e-9 || e.rows[0].fanoutRead.Median != 15.5 {
		t.Errorf("rows = %+v", e.rows)
	}
	if _, err := engineFrom(rs[:2], "cmd"); err == nil {
		t.Error("missing benchmarks: no error")
	}
	var b strings.Builder
	(&results{engine: e}).engineMarkdown(func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }, nil)
	for _, want := range []string{
		"| 8 | 90 | 100 | 0.90 | 0 | 0 | 15.5 |",
		"Goal: engine ≥ 0.95 × raw writev at every replica count, 0 allocs/op.",
		"`FillBuffers`",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the engine section lacks %q:\n%s", want, b.String())
		}
	}
}

func TestGoals(t *testing.T) {
	one := func(v float64) sample.Summary { return sample.Of([]float64{v}) }
	s := &streamingResult{points: []streamSummary{
		{point: streamPoint{direct, plain.name, 4, 512}, primaryCPUGB: one(8)},
		{point: streamPoint{chained, plain.name, 4, 512}, primaryCPUGB: one(4), relayCPUReplicaGB: one(1)},
		{point: streamPoint{proxied, logOn.name, 4, 512}, primaryCPUGB: one(2), relayCPUReplicaGB: one(0.25)},
		{point: streamPoint{proxied, logOff.name, 4, 512}, primaryCPUGB: one(2), relayCPUReplicaGB: one(0.2)},
		{point: streamPoint{proxied, logOn.name, 8, 512}, primaryCPUGB: one(2)},   // no direct or chained: skipped
		{point: streamPoint{proxied, withTLS.name, 4, 512}, primaryCPUGB: one(2)}, // no TLS peers: skipped
	}}
	g := s.goals()
	want := streamGoal{replicas: 4, valueSize: 512, variant: logOn.name, proxyPerReplicaGB: 0.25, proxyVsChained: 0.25,
		primaryVsChained: 0.5, primaryVsDirect: 0.25}
	if len(g) != 2 || g[0] != want || g[1].variant != logOff.name {
		t.Errorf("goals = %+v, want [%+v, log off]", g, want)
	}
	lc := s.logCosts()
	if len(lc) != 1 || math.Abs(lc[0].perReplicaGB-0.05) > 1e-9 || math.Abs(lc[0].perStreamGB-0.2) > 1e-9 {
		t.Errorf("logCosts = %+v", lc)
	}
	tc := s.tlsCosts()
	if len(tc) != 1 || tc[0].topology != proxied || tc[0].relayPlain != 0.25 {
		t.Errorf("tlsCosts = %+v", tc)
	}
}

func TestStreamPoints(t *testing.T) {
	o, err := parseOptions([]string{"-quick"})
	if err != nil {
		t.Fatal(err)
	}
	pts := streamPoints(o)
	// 2 N × 1 size × 3, log off and full at N=4, and the TLS row (three
	// topologies, and proxied with the log off).
	if len(pts) != 6+1+1+4 {
		t.Fatalf("quick points: %d: %+v", len(pts), pts)
	}
	for _, want := range []streamPoint{
		{proxied, logOff.name, 4, 16384}, {proxied, logFull.name, 4, 16384}, {direct, withTLS.name, 4, 16384}, {proxied, withTLS.name, 4, 16384},
		{proxied, tlsLogOff.name, 4, 16384},
	} {
		if !slices.Contains(pts, want) {
			t.Errorf("quick points lack %+v", want)
		}
	}
	if o, err = parseOptions([]string{"-variants", "none"}); err != nil {
		t.Fatal(err)
	}
	// Full: 3 N × 5 sizes (512 B, 1 KiB, 16 KiB, 64 KiB, mixed) × 3.
	if pts := streamPoints(o); len(pts) != 45 || len(restartVariants(o)) != 1 {
		t.Errorf("-variants none: %d points, %d restart variants", len(pts), len(restartVariants(o)))
	}
	if o, err = parseOptions(nil); err != nil {
		t.Fatal(err)
	}
	if pts := streamPoints(o); len(pts) != 45+15+15+4 || len(restartVariants(o)) != 2 {
		t.Errorf("full: %d points, %d restart variants", len(pts), len(restartVariants(o)))
	} else if !slices.Contains(pts, streamPoint{proxied, logFull.name, 8, mixedSize}) || !slices.Contains(pts, streamPoint{chained, plain.name, 1, 1024}) {
		t.Errorf("full points lack the mixed or the 1 KiB row: %+v", pts)
	}
	if _, err := parseOptions([]string{"-variants", "gzip"}); err == nil {
		t.Error("-variants gzip: no error")
	}
}

func TestReportTop(t *testing.T) {
	out := "# Samples: 29K\n#\n# Overhead  Shared Object\n# ........  .............\n#\n    86.48%  replproxy\n    13.52%  [kernel.kallsyms]\n\n#\n# (footer)\n"
	got := reportTop(out, 1)
	want := []string{"# Overhead  Shared Object", "    86.48%  replproxy"}
	if !slices.Equal(got, want) {
		t.Errorf("reportTop = %q, want %q", got, want)
	}
}

// checkGoals checks that gs has every row of want ("goal row"), met or
// missed as want says, and returns gs by those keys.
func checkGoals(t *testing.T, gs []goalRow, want map[string]bool) map[string]goalRow {
	t.Helper()
	got := map[string]goalRow{}
	for _, g := range gs {
		got[g.goal+" "+g.row] = g
	}
	for key, met := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("no goal row %q; have %v", key, slices.Sorted(maps.Keys(got)))
			continue
		}
		if g.met != met {
			t.Errorf("%q: met = %v, want %v (%+v)", key, g.met, met, g)
		}
	}
	return got
}

func TestGoals20(t *testing.T) {
	one := func(v float64) sample.Summary { return sample.Of([]float64{v}) }
	s := &streamingResult{points: []streamSummary{
		{point: streamPoint{direct, plain.name, 4, 512}, primaryCPUGB: one(8)},
		{point: streamPoint{chained, plain.name, 4, 512}, primaryCPUGB: one(4), relayCPUReplicaGB: one(1), sendFloor: one(0.3)},
		// 0.5 ≤ 0.6 × chained: met by the chained clause (the floor, 0.3, is under 0.6 × 1).
		{point: streamPoint{proxied, logOn.name, 4, 512}, primaryCPUGB: one(2), relayCPUReplicaGB: one(0.5), sendFloor: one(0.3),
			relayHWM: one(100), ddFloor: one(0.1), crcFloor: one(0.1), logWindow: one(64 << 20)},
		{point: streamPoint{proxied, logOff.name, 4, 512}, primaryCPUGB: one(5), relayCPUReplicaGB: one(0.45), relayHWM: one(50)},
		{point: streamPoint{chained, plain.name, 4, 16384}, primaryCPUGB: one(4), relayCPUReplicaGB: one(0.5), sendFloor: one(0.4)},
		// 0.42 > 0.6 × 0.5, but the floor 0.4 > 0.6 × 0.5: the floor clause, 0.42 ≤ 1.1 × 0.4, met.
		{point: streamPoint{proxied, logFull.name, 4, 16384}, primaryCPUGB: one(2), relayCPUReplicaGB: one(0.42), sendFloor: one(0.4)},
		{point: streamPoint{chained, plain.name, 1, 512}, primaryCPUGB: one(4), relayCPUReplicaGB: one(2), sendFloor: one(0.3)},
		{point: streamPoint{proxied, logOff.name, 1, 512}, primaryCPUGB: one(2), relayCPUReplicaGB: one(1.5)},
	}}
	r := &results{streaming: s, engine: &engineResult{rows: []engineRow{{replicas: 1, ratio: 0.96, fanoutAllocs: one(0)}, {replicas: 8, ratio: 0.9, fanoutAllocs: one(0)}}}}
	checkGoals(t, r.streamingGoals(), map[string]bool{
		"relay ÷ chained N=4 512 B, log on":                                   true,
		"relay ÷ send floor (floor > 0.6 × chained) N=4 16 KiB, log on, full": true,
		"small values, log off N=1 512 B, log off":                            false,
		"primary: proxied ÷ chained N=4 512 B, log on":                        true,
		"primary: proxied ÷ chained N=4 512 B, log off":                       false,
		"engine ÷ raw writev 1 replicas":                                      true,
		"engine ÷ raw writev 8 replicas":                                      false,
	})
	for _, g := range r.streamingGoals() {
		if strings.Contains(g.goal, "log's cost") || strings.Contains(g.goal, "peak RSS") {
			t.Errorf("the streaming goals have the stream log's %q", g.goal)
		}
	}
	// log cost (0.5 − 0.45) × 4 = 0.2 s/GB ÷ (dd 0.1 + CRC 0.1) = 1.0.
	if lc := s.logCosts(); len(lc) != 1 || math.Abs(lc[0].vsFloor()-1) > 1e-9 {
		t.Errorf("logCosts = %+v", lc)
	}
}

// logGoalsFixture is four log-on rows with their log-off rows: at N=1 and
// N=4, from empty and full, 16 KiB values.
func logGoalsFixture() *streamingResult {
	one := func(v float64) sample.Summary { return sample.Of([]float64{v}) }
	row := func(n int, v variant, cpu, hwm, dd, crc, window float64) streamSummary {
		s := streamSummary{point: streamPoint{proxied, v.name, n, 16384}, relayCPUReplicaGB: one(cpu), relayHWM: one(hwm)}
		if v.log {
			s.ddFloor, s.crcFloor, s.logWindow = sample.Of(nonZero(dd)), sample.Of(nonZero(crc)), one(window)
		}
		return s
	}
	const w = 64 << 20
	return &streamingResult{points: []streamSummary{
		row(1, logOff, 0.3, 40, 0, 0, 0),
		// (0.5 − 0.3) × 1 = 0.2 s/GB ÷ (0.1 + 0.05) = 1.33 ≤ 1.5; RSS +80 MB = 76.3 MiB ≤ 64 + 16.
		row(1, logOn, 0.5, 120, 0.1, 0.05, w),
		// 0.2 s/GB ÷ 0.15 = 1.33 > 1.3; RSS +90 MB = 85.8 MiB > 80 MiB.
		row(1, logFull, 0.5, 130, 0.1, 0.05, w),
		row(4, logOff, 0.3, 40, 0, 0, 0),
		// (0.35 − 0.3) × 4 = 0.2 ÷ (0.12 + 0.04) = 1.25 ≤ 1.3; RSS +100 MB ≤ a window of 128 MiB + 16.
		row(4, logFull, 0.35, 140, 0.12, 0.04, 2*w),
		// No floor measured (a dd that failed): only the RSS goal.
		row(4, logOn, 0.35, 50, 0, 0, w),
	}}
}

// nonZero is v as the samples of a summary: none for 0, as a floor that
// was not measured has none.
func nonZero(v float64) []float64 {
	if v == 0 {
		return nil
	}
	return []float64{v}
}

func TestLogGoals37(t *testing.T) {
	s := logGoalsFixture()
	got := checkGoals(t, s.logGoals(), map[string]bool{
		"log's cost ÷ empty-log floor N=1 16 KiB, log on":      true,
		"peak RSS, log on − off N=1 16 KiB, log on":            true,
		"log's cost ÷ full-log floor N=1 16 KiB, log on, full": false,
		"peak RSS, log on − off N=1 16 KiB, log on, full":      false,
		"log's cost ÷ full-log floor N=4 16 KiB, log on, full": true,
		"peak RSS, log on − off N=4 16 KiB, log on, full":      true,
		"peak RSS, log on − off N=4 16 KiB, log on":            true,
	})
	if len(got) != 7 {
		t.Errorf("%d goal rows, want 7 (no floor goal without a floor)", len(got))
	}
	g := got["log's cost ÷ full-log floor N=4 16 KiB, log on, full"]
	if want := "+0.20 s/GB ÷ (dd 0.12 + CRC 0.04) = 1.25"; g.measured != want || g.target != "≤ 1.3" {
		t.Errorf("full-log floor goal %+v, want measured %q, target ≤ 1.3", g, want)
	}
	if g := got["peak RSS, log on − off N=4 16 KiB, log on, full"]; g.target != "≤ window 128 + 16 MiB" {
		t.Errorf("RSS goal target %q", g.target)
	}
	// The run's count of the paced and stream log goals has the stream log's rows.
	r := &results{opts: &options{out: t.TempDir()}, streaming: s}
	if sum := r.summary(); !strings.Contains(sum, "paced and stream log goals: 5 of 7 rows met") {
		t.Errorf("summary:\n%s", sum)
	}
}

func TestLogCostMarkdown(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-stream-mb", "64"})
	if err != nil {
		t.Fatal(err)
	}
	r := &results{opts: o, streaming: logGoalsFixture()}
	var b strings.Builder
	r.variantsMarkdown(func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }, nil)
	r.streaming.logGoalsMarkdown(func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) })
	md := b.String()
	for _, want := range []string{
		"| 1 | 16 KiB | log on | 0.50 | 0.30 | +0.20 | +0.20 | empty-log | 0.10 | 0.05 | 1.33 | 0.000 | 120 | 40 | 64 |",
		"| 1 | 16 KiB | log on, full | 0.50 | 0.30 | +0.20 | +0.20 | full-log | 0.10 | 0.05 | 1.33 | 0.000 | 130 | 40 | 64 |",
		"| 4 | 16 KiB | log on | 0.35 | 0.30 | +0.05 | +0.20 | empty-log | – | – | – | 0.000 | 50 | 40 | 64 |",
		"over 64 MiB",
		"### Against the stream log's goals",
		"| log's cost ÷ full-log floor | N=1 16 KiB, log on, full | +0.20 s/GB ÷ (dd 0.10 + CRC 0.05) = 1.33 | ≤ 1.3 | **missed** |",
		"| peak RSS, log on − off | N=1 16 KiB, log on | 120 − 40 MB = +76.3 MiB | ≤ window 64 + 16 MiB | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the stream log's tables lack %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "O_DIRECT") {
		t.Error("the stream log's tables still speak of O_DIRECT")
	}
}

package main

import (
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
	for in, want := range map[int]string{512: "512 B", 16384: "16 KiB", 65536: "64 KiB", 1500: "1500 B"} {
		if got := sizeName(in); got != want {
			t.Errorf("sizeName(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-note", "busy machine"})
	if err != nil {
		t.Fatal(err)
	}
	if o.streamMB != 128 || len(o.replicas) != 2 || o.benchCount != 3 || o.note != "busy machine" {
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
	for _, bad := range [][]string{{"-replicas", "0"}, {"-sections", "nope"}, {"extra"}} {
		if _, err := parseOptions(bad); err == nil {
			t.Errorf("parseOptions(%q): no error", bad)
		}
	}
}

func TestEngineFrom(t *testing.T) {
	var rs []gobench.Result
	for _, n := range engineSizes {
		for _, name := range []string{"Fanout", "RawWritev"} {
			mbs := 100.0
			if name == "Fanout" {
				mbs = 90
			}
			rs = append(rs, gobench.Result{
				Name:    name + "/replicas=" + strconv.Itoa(n),
				Metrics: map[string]float64{"MB/s": mbs, "allocs/op": 0, "B/op": 0},
			})
		}
	}
	e, err := engineFrom(rs, "cmd")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.rows) != 3 || math.Abs(e.rows[2].ratio-0.9) > 1e-9 {
		t.Errorf("rows = %+v", e.rows)
	}
	if _, err := engineFrom(rs[:2], "cmd"); err == nil {
		t.Error("missing benchmarks: no error")
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
	// 2 N × 2 sizes × 3, log off at N=4 for both sizes, and the TLS row
	// (three topologies, and proxied with the log off).
	if len(pts) != 12+2+4 {
		t.Fatalf("quick points: %d: %+v", len(pts), pts)
	}
	for _, want := range []streamPoint{
		{proxied, logOff.name, 4, 16384}, {direct, withTLS.name, 4, 16384}, {proxied, withTLS.name, 4, 16384},
		{proxied, tlsLogOff.name, 4, 16384},
	} {
		if !slices.Contains(pts, want) {
			t.Errorf("quick points lack %+v", want)
		}
	}
	if o, err = parseOptions([]string{"-variants", "none"}); err != nil {
		t.Fatal(err)
	}
	if pts := streamPoints(o); len(pts) != 27 || len(restartVariants(o)) != 1 {
		t.Errorf("-variants none: %d points, %d restart variants", len(pts), len(restartVariants(o)))
	}
	if o, err = parseOptions(nil); err != nil {
		t.Fatal(err)
	}
	if pts := streamPoints(o); len(pts) != 27+9+4 || len(restartVariants(o)) != 2 {
		t.Errorf("full: %d points, %d restart variants", len(pts), len(restartVariants(o)))
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

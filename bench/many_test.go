package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/bench/internal/probe"
)

func TestManyOptions(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.manyN != 100 || o.manyDataMB != 256 || o.manyDataSet || o.manySeconds != 20 || o.manyReps != 1 || o.manyRate != 1000 || !o.sections["many"] {
		t.Errorf("full defaults: N=%d data %d (set %v) %d s %d reps rate %d, sections %v",
			o.manyN, o.manyDataMB, o.manyDataSet, o.manySeconds, o.manyReps, o.manyRate, o.sections)
	}
	if o, err = parseOptions([]string{"-quick"}); err != nil {
		t.Fatal(err)
	}
	if o.manyN != 16 || o.manyDataMB != 32 || o.manyDataSet || o.manySeconds != 5 || o.manyReps != 1 {
		t.Errorf("quick defaults: N=%d data %d %d s %d reps", o.manyN, o.manyDataMB, o.manySeconds, o.manyReps)
	}
	o, err = parseOptions([]string{"-sections", "many", "-many-replicas", "8", "-many-data-mb", "16", "-many-rate", "500", "-many-seconds", "3", "-many-reps", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if o.manyN != 8 || o.manyDataMB != 16 || !o.manyDataSet || o.manyRate != 500 || o.manySeconds != 3 || o.manyReps != 2 || o.sections["restart"] {
		t.Errorf("flags: %+v", o)
	}
	if _, err := parseOptions([]string{"-many-rate", "0"}); err == nil {
		t.Error("-many-rate 0: no error")
	}
	plan := o.manyPlan(func() (int64, error) { return 16 << 30, nil })
	for _, want := range []string{"many: N=8 replicas", "2 run(s) each: 16 MiB of data,", "500 SETs/s of 512 B from 20 connections", "3 s measured"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	if !strings.Contains(o.plan(), "many: N=8") {
		t.Errorf("-dry-run lacks the section:\n%s", o.plan())
	}
	if got, want := o.sectionCommand("many"), "go run . -many-data-mb=16 -many-rate=500 -many-replicas=8 -many-reps=2 -many-seconds=3 -sections=many"; got != want {
		t.Errorf("sectionCommand = %q, want %q", got, want)
	}
}

func TestManyData(t *testing.T) {
	const gb = int64(1) << 30
	tests := []struct {
		name      string
		asked     int
		set       bool
		n         int
		available int64
		want      int
		reduced   bool
		fails     bool
	}{
		// 102 copies of 64 MiB at 1.5× and 8 MiB each are about 10.8 GB.
		{"default reduced to fit", 256, false, 100, 24 * gb, 64, true, false},
		{"default fits", 64, false, 100, 24 * gb, 64, false, false},
		{"few replicas", 256, false, 8, 24 * gb, 256, false, false},
		{"little memory", 256, false, 100, 6 * gb, 8, true, false},
		{"asked does not fit", 256, true, 100, 24 * gb, 0, false, true},
		{"nothing fits", 256, false, 1000, gb, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mb, note, err := manyData(tt.asked, tt.set, tt.n, tt.available)
			if (err != nil) != tt.fails {
				t.Fatalf("err = %v", err)
			}
			if mb != tt.want || (note != "") != tt.reduced {
				t.Errorf("manyData = %d MiB, note %q; want %d, reduced %v", mb, note, tt.want, tt.reduced)
			}
			if mb > 0 && manyFootprint(mb, tt.n) > tt.available/2 {
				t.Errorf("%d MiB × %d copies does not fit in half of %d", mb, manyCopies(tt.n), tt.available)
			}
		})
	}
}

func TestParseMemAvailable(t *testing.T) {
	got, err := parseMemAvailable("MemTotal:       24683748 kB\nMemFree:        22483600 kB\nMemAvailable:   24144244 kB\n")
	if err != nil || got != 24144244<<10 {
		t.Errorf("parseMemAvailable = %d, %v", got, err)
	}
	for _, bad := range []string{"", "MemTotal: 1 kB\n", "MemAvailable: x kB\n", "MemAvailable: 12\n"} {
		if _, err := parseMemAvailable(bad); err == nil {
			t.Errorf("parseMemAvailable(%q): no error", bad)
		}
	}
}

func TestSummariseMany(t *testing.T) {
	runs := []manyRun{
		{syncTime: 15 * time.Second, firstSync: time.Second, replicasSync: 50 * time.Second, firstBack: time.Second, forks: 0, primarySyncCPU: time.Second, relaySyncCPU: 4 * time.Second, ownSync: 2 * time.Second, ownForks: 1,
			window: 10 * time.Second, commands: 10000, primaryCPU: 300 * time.Millisecond, relayCPU: time.Second, replicasCPU: 12 * time.Second,
			delays: probe.Delays{First: []float64{100, 200}, Last: []float64{1000, 2000}, Lost: 1}, resyncs: 1,
			restart: 2 * time.Second, proxyPartial: 100, digestsSame: true, dataMB: 90},
		{syncTime: 17 * time.Second, firstSync: 3 * time.Second, replicasSync: 70 * time.Second, firstBack: 2 * time.Second, forks: 0, primarySyncCPU: 3 * time.Second, relaySyncCPU: 6 * time.Second, ownSync: 4 * time.Second, ownForks: 1,
			window: 10 * time.Second, commands: 9900, primaryCPU: 500 * time.Millisecond, relayCPU: 3 * time.Second, replicasCPU: 8 * time.Second,
			delays: probe.Delays{First: []float64{300}, Last: []float64{3000}}, restart: 4 * time.Second, proxyFull: 1, proxyPartial: 99, digestsSame: false, dataMB: 92},
	}
	s := summariseMany(proxied, runs)
	if s.runs != 2 || s.syncTime.Median != 16 || s.firstSync.Median != 2 || s.replicasSync.Min != 50 || s.primarySyncCPU.Max != 3 || s.relaySyncCPU.Median != 5 || s.ownSync.Median != 3 || s.ownForks.Median != 1 {
		t.Errorf("part 1: %+v", s)
	}
	if s.held.Min != 990 || s.primaryCore.Median != 4 || s.relayCore.Median != 20 || s.replicasCore.Median != 100 ||
		s.first.N != 3 || s.last.Max != 3000 || s.last.P50 != 2000 || s.lost != 1 || s.resyncs != 1 {
		t.Errorf("part 2: %+v", s)
	}
	if s.restart.Median != 3 || s.firstBack.Max != 2 || s.proxyFull.Max != 1 || s.proxyPartial.Median != 99.5 || s.digestsSame || s.dataMB != 91 {
		t.Errorf("part 3: %+v", s)
	}
	if d := summariseMany(direct, runs); d.relaySyncCPU.N != 0 || d.relayCore.N != 0 || d.restart.N != 0 || d.firstBack.N != 0 || d.ownSync.N != 0 || d.syncTime.N != 2 {
		t.Errorf("direct has no proxy figures: %+v", d)
	}
}

// manyFixture is a section of one run per topology at N=100.
func manyFixture() *manyResult {
	runs := func(t topology) []manyRun {
		r := manyRun{topology: t, dataMB: 90, syncTime: 16900 * time.Millisecond, firstSync: 1500 * time.Millisecond, replicasSync: 80 * time.Second,
			forks: 3, primarySyncCPU: 2 * time.Second,
			window: 20 * time.Second, commands: 20000, primaryCPU: 3180 * time.Millisecond, replicasCPU: 30 * time.Second,
			harnessCPU: 4 * time.Second, delays: probe.Delays{First: []float64{500}, Last: []float64{9000}}, digestsSame: true}
		if t == proxied {
			r.syncTime, r.forks, r.primarySyncCPU, r.relaySyncCPU = 15300*time.Millisecond, 0, 0, 5*time.Second
			r.ownSync, r.ownForks, r.ownPrimaryCPU = 2*time.Second, 1, time.Second
			r.primaryCPU, r.relayCPU = 540*time.Millisecond, 2*time.Second
			r.restart, r.firstBack, r.proxyPartial = 2600*time.Millisecond, 1100*time.Millisecond, 100
		}
		return []manyRun{r}
	}
	x := &manyResult{replicas: 100, dataMB: 64, dataNote: "256 MiB asked: too much", rate: 1000, conns: 20, seconds: 20, reps: 1, took: 150 * time.Second}
	for _, t := range manyTopologies {
		x.points = append(x.points, summariseMany(t, runs(t)))
	}
	return x
}

func TestManyMarkdown(t *testing.T) {
	o, err := parseOptions([]string{"-sections", "restart,many"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r := &results{opts: o, many: manyFixture()}
	r.manyMarkdown(printTo(&b))
	md := b.String()
	for _, want := range []string{
		"## Many replicas: 100 redis-servers, direct and behind one proxy",
		"**Data:** 256 MiB asked: too much.",
		"    go run . -sections=many",
		"| direct | 1.50 | 16.90 | 3 | 2.00 | – | 80.0 | – | yes |",
		"| proxied | 1.50 | 15.30 | 0 | 0.00 | 5.00 | 80.0 | 2.00, 1, 1.00 | yes |",
		"### 2. A paced load: 1,000 SETs/s of 512 B",
		"| direct | 1000 | 15.9 | – | 150 | 20.0 | 500 / 500 / 500 / 500 | 9000 / 9000 / 9000 / 9000 | 1 | 0 | 0 |",
		"| proxied | 1000 | 2.7 | 10.0 | 150 |",
		"| proxied | 1.10 | 2.60 | 0 | 0 | 100 | yes |",
		"The section took 2m30s.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
	// Direct alone: no part 3.
	r.many.points = r.many.points[:1]
	b.Reset()
	r.manyMarkdown(printTo(&b))
	if strings.Contains(b.String(), "### 3.") {
		t.Errorf("a direct-only section has part 3:\n%s", b.String())
	}
	var sum strings.Builder
	manyFixture().summary(printTo(&sum))
	if !strings.Contains(sum.String(), "proxied synced in 15.30 s, 0 primary forks; primary 2.7% of a core") || strings.Contains(sum.String(), "WARNING") {
		t.Errorf("summary:\n%s", sum.String())
	}
}

func printTo(b *strings.Builder) printer {
	return func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
}

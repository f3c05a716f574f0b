package main

import (
	"strings"
	"testing"

	"github.com/replproxy/replproxy/bench/internal/probe"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// TestDelayGoalsFloor marks a missed goal "below the floor" only where the
// floor misses it too, and the floor's CPU counts only at N=1.
func TestDelayGoalsFloor(t *testing.T) {
	row := func(replicas int, floorP50 float64) delaySummary {
		s := delaySummary{point: delayPoint{rate: 1000, valueSize: 512, replicas: replicas, window: delayDefault}}
		s.delays[pathDirect] = probe.Quantiles{N: 1, P50: 100, P99: 500, P999: 900}
		s.delays[pathFloor] = probe.Quantiles{N: 1, P50: floorP50, P99: 400, P999: 800}
		s.delays[pathChained] = probe.Quantiles{N: 1, P50: 160, P99: 600, P999: 1000}
		s.delays[pathProxy] = probe.Quantiles{N: 1, P50: 150, P99: 550, P999: 950}
		s.core[pathFloor] = sample.Summary{Median: 6, N: 1}
		s.core[pathChained] = sample.Summary{Median: 4, N: 1}
		s.core[pathProxy] = sample.Summary{Median: 5, N: 1}
		for _, p := range delayPaths {
			s.switches[p] = sample.Summary{Median: 1000, N: 1}
		}
		return s
	}
	// Added medians: chained 60, proxy 50, so the target is 30 µs; the
	// floor adds 20 (reachable) or 40 (below the floor).
	for _, c := range []struct {
		replicas          int
		floorP50          float64
		medianFloored     bool
		cpuFlooredAtOneRd bool
	}{
		{1, 120, false, true},
		{1, 140, true, true},
		{4, 140, true, false},
	} {
		gs := (&delayResult{points: []delaySummary{row(c.replicas, c.floorP50)}}).delayGoals()
		var median, cpu *delayGoal
		for i := range gs {
			switch {
			case strings.HasPrefix(gs[i].goal, "added median"):
				median = &gs[i]
			case strings.HasPrefix(gs[i].goal, "relay CPU"):
				cpu = &gs[i]
			}
		}
		if median == nil || cpu == nil {
			t.Fatalf("N=%d: goals %v lack the median or the CPU row", c.replicas, gs)
		}
		if median.met || median.floored != c.medianFloored {
			t.Errorf("N=%d floor p50 %.0f: median goal met %v floored %v, want missed, floored %v", c.replicas, c.floorP50, median.met, median.floored, c.medianFloored)
		}
		if cpu.met || cpu.floored != c.cpuFlooredAtOneRd {
			t.Errorf("N=%d: CPU goal met %v floored %v, want missed, floored %v", c.replicas, cpu.met, cpu.floored, c.cpuFlooredAtOneRd)
		}
	}
}

// TestDelayGoalsBurst holds a burst's median to the chained relay's own
// added delay, and a paced row's to half of it.
func TestDelayGoalsBurst(t *testing.T) {
	for _, c := range []struct {
		rate int
		want string
		met  bool
	}{
		{1000, "≤ 30 µs", false}, // paced: proxy 50 against half of chained's 60
		{0, "≤ 60 µs", true},     // burst: proxy 50 against chained's 60
	} {
		s := delaySummary{point: delayPoint{rate: c.rate, valueSize: 512, replicas: 1, window: delayDefault}}
		s.delays[pathDirect] = probe.Quantiles{N: 1, P50: 100}
		s.delays[pathFloor] = probe.Quantiles{N: 1, P50: 110}
		s.delays[pathChained] = probe.Quantiles{N: 1, P50: 160}
		s.delays[pathProxy] = probe.Quantiles{N: 1, P50: 150}
		for _, p := range delayPaths {
			s.core[p] = sample.Summary{Median: 1, N: 1}
			s.switches[p] = sample.Summary{Median: 1, N: 1}
		}
		gs := (&delayResult{points: []delaySummary{s}}).delayGoals()
		if !strings.HasPrefix(gs[0].goal, "added median") || gs[0].target != c.want || gs[0].met != c.met {
			t.Errorf("rate %d: first goal %q target %q met %v, want the median's, %q, met %v", c.rate, gs[0].goal, gs[0].target, gs[0].met, c.want, c.met)
		}
	}
}

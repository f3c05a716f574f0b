package main

import (
	"fmt"
	"slices"

	"github.com/replproxy/replproxy/bench/internal/probe"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// The delay goals: at the proxy's defaults, at paced rates its median
// delay beyond a direct replica at most half the chained redis-server's;
// in saturating bursts no higher than the chained relay's; its p99 and
// p99.9 no higher than the chained relay's under either load; at paced
// rates its CPU no higher than the chained relay's from delayCPUFrom
// writes a second up and within delayCPULow of it below, and its context
// switches within delaySwitches.
const (
	delayAddedShare = 0.5
	delayCPUFrom    = 5000
	delayCPULow     = 1.10
	delaySwitches   = 1.2
)

// loadLabel is a row's load: a paced rate or the burst.
func (p delayPoint) loadLabel() string {
	if p.rate == 0 {
		return "burst"
	}
	return thousands(p.rate) + "/s"
}

func fmtQ(q probe.Quantiles) string {
	if q.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f / %.0f / %.0f", q.P50, q.P90, q.P99, q.P999, q.Max)
}

// A delayGoal is a goal's row with what the floor made of it: floored
// marks a missed target that the floor (delay.go's byte forwarder) misses
// too in the same run, out of any relay's reach there.
type delayGoal struct {
	goalRow
	floored bool
}

// delayGoals are the goals' rows: every row at the proxy's default window.
func (x *delayResult) delayGoals() []delayGoal {
	var gs []delayGoal
	for _, s := range x.points {
		if s.point.window != delayDefault || s.point.variant != "" {
			continue
		}
		row := fmt.Sprintf("%s, %s, N=%d", s.point.loadLabel(), sizeName(s.point.valueSize), s.point.replicas)
		ch, px, fl := s.added(pathChained), s.added(pathProxy), s.added(pathFloor)
		// A burst's goal is the chained relay's delay itself: no relay
		// paces a saturated stream, and the rule is "no higher".
		goal, share := "added median ≤ half the chained relay's", delayAddedShare
		if s.point.rate == 0 {
			goal, share = "added median ≤ the chained relay's", 1
		}
		want := share * max(ch, 0)
		gs = append(gs, delayGoal{goalRow{goal: goal, row: row,
			measured: fmt.Sprintf("%.0f µs (chained %.0f µs, floor %.0f µs)", px, ch, fl), target: fmt.Sprintf("≤ %.0f µs", want),
			met: px <= want}, fl > want})
		for _, q := range []struct {
			name string
			get  func(probe.Quantiles) float64
		}{{"p99", func(q probe.Quantiles) float64 { return q.P99 }}, {"p99.9", func(q probe.Quantiles) float64 { return q.P999 }}} {
			a, b := q.get(s.delays[pathProxy]), q.get(s.delays[pathChained])
			fl := q.get(s.delays[pathFloor])
			gs = append(gs, delayGoal{goalRow{goal: q.name + " ≤ the chained relay's", row: row,
				measured: fmt.Sprintf("%.0f µs (floor %.0f µs)", a, fl), target: fmt.Sprintf("≤ %.0f µs", b), met: a <= b}, fl > b})
		}
		if s.point.rate == 0 {
			continue
		}
		limit, target := 1.0, "≤ 1.00×"
		if s.point.rate < delayCPUFrom {
			limit, target = delayCPULow, fmt.Sprintf("≤ %.2f×", delayCPULow)
		}
		// The floor's CPU bounds a relay's only at N=1: with N replicas
		// it reads the primary N times, where a relay reads once.
		oneRead := s.point.replicas == 1
		cpu := s.core[pathProxy].Median / s.core[pathChained].Median
		flCPU := s.core[pathFloor].Median / s.core[pathChained].Median
		gs = append(gs, delayGoal{goalRow{goal: "relay CPU ÷ chained", row: row, measured: fmt.Sprintf("%.2f× (floor %.2f×)", cpu, flCPU),
			target: target, met: cpu <= limit}, oneRead && flCPU > limit})
		sw := s.switches[pathProxy].Median / s.switches[pathChained].Median
		flSw := s.switches[pathFloor].Median / s.switches[pathChained].Median
		gs = append(gs, delayGoal{goalRow{goal: "context switches ÷ chained", row: row, measured: fmt.Sprintf("%.2f× (floor %.2f×)", sw, flSw),
			target: fmt.Sprintf("≤ %.1f×", delaySwitches), met: sw <= delaySwitches}, oneRead && flSw > delaySwitches})
	}
	return gs
}

// delaySeries are a chart's lines: one quantile against the paced rate,
// at N=n, for the direct replica, the chained relay and the proxy at each
// window.
func (x *delayResult) delaySeries(n int, get func(probe.Quantiles) float64) []series {
	var out []series
	add := func(name string, keep func(delaySummary) bool, path delayPath) {
		s := series{name: name}
		for _, d := range x.points {
			if d.point.rate > 0 && d.point.replicas == n && d.point.variant == "" && keep(d) {
				v := get(d.delays[path])
				s.xs, s.ys = append(s.xs, float64(d.point.rate)), append(s.ys, sample.Summary{Median: v, Min: v, Max: v, N: 1})
			}
		}
		out = append(out, s)
	}
	first := x.points[0].point.window
	add("direct", func(d delaySummary) bool { return d.point.window == first }, pathDirect)
	add("chained redis-server", func(d delaySummary) bool { return d.point.window == first }, pathChained)
	for _, w := range x.windows() {
		label := "proxy, window " + w
		for _, d := range x.points {
			if d.point.window == w && d.point.variant == "" {
				label = "proxy, window " + d.proxyLabel()
				break
			}
		}
		add(label, func(d delaySummary) bool { return d.point.window == w }, pathProxy)
	}
	if len(out) > 0 {
		add("floor (a byte forwarder)", func(d delaySummary) bool { return d.point.window == first }, pathFloor)
	}
	return out
}

func (x *delayResult) windows() []string {
	var ws []string
	for _, d := range x.points {
		if !slices.Contains(ws, d.point.window) {
			ws = append(ws, d.point.window)
		}
	}
	return ws
}

func (x *delayResult) chartN() int {
	n := 0
	for _, d := range x.points {
		if n == 0 || d.point.replicas < n {
			n = d.point.replicas
		}
	}
	return n
}

func (r *results) delayMarkdown(p printer, charts map[string]string) {
	x := r.delay
	if x == nil || len(x.points) == 0 {
		return
	}
	p("")
	p("## Delay: how long a write takes to reach a replica")
	p("")
	p("One primary feeds, in the same run, a replica attached directly, a chained redis-server with N")
	p("replicas and the proxy (its defaults: stream log on) with N replicas, under one load: paced SETs")
	p("from %d connections as in the paced section, or a saturating burst (pipelined SETs from two", x.conns)
	p("connections, as fast as the primary takes them). A probe PUBLISHes its send time on the primary")
	p("%d times a second (PUBLISH is replicated; each replica delivers it to its own subscribers as it", int(1/delayProbeEvery.Seconds()))
	p("applies the stream), and a subscriber on every replica records its arrival, on the harness's")
	p("clock. A relay's delay for a message is its **last** replica's (of N): what a reader of every")
	p("replica waits for. The window of each run is %d s after %.0f s of warm-up; the delays of all", x.seconds, pacedWarmup.Seconds())
	p("%d run(s) of a row are pooled, the runs of the windows compared alternated. Delays include the", r.opts.reps)
	p("primary's own time to apply PUBLISH and send it, and the harness's time to read it, which are")
	p("the direct replica's delay; *added* is a relay's median beyond the direct replica's. CPU and")
	p("context switches are the relay's own over the window (medians of the runs; *direct*: the")
	p("primary's). *proxy* is the proxy's `repl-read-coalesce-usec` (window) and, at the smallest N,")
	p("its variants at the default window: *log off* (`--repl-log-size 0`; the chained relay and")
	p("the direct replica as in the plain rows); *TLS* (every replication link over TLS, the chained")
	p("relay's and the direct replica's too; the floor forwards the TLS bytes); *zstd pair* (proxy A")
	p("→ proxy B, which asks for `repl-link-compression zstd` → N replicas: two hops, and the relay")
	p("CPU is both proxies'; *link coalescing*: proxy A's `repl-link-compression-coalesce-usec`, whose")
	p("default is 0). *floor*: N replicas behind a process that only copies bytes between")
	p("each replica's socket and a connection of its own to the primary (the primary sends to each),")
	kind, least := forwardKind, "the least any relay can add"
	if r.opts.delayGoFloor {
		kind, least = forwardGoKind, "the least a relay in Go adds through `net.Conn`"
	}
	p("by %s:", kind)
	p("%s, one more hop and one more process woken per packet for all N;", least)
	p("its CPU and switches are that process's. A goal missed")
	p("*below the floor* is one the floor misses too in the same run.")
	p("")
	p("| load | value | N | proxy | direct p50 / p99 µs | floor p50 / p99 µs | chained p50 / p90 / p99 / p99.9 / max µs | proxy p50 / p90 / p99 / p99.9 / max µs | added median floor / chained / proxy µs | CPU %% floor / chained / proxy | switches/s floor / chained / proxy | messages | lost |")
	p("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range x.points {
		p("| %s | %s | %d | %s | %.0f / %.0f | %.0f / %.0f | %s | %s | %.0f / %.0f / %.0f | %s / %s / %s | %s / %s / %s | %d | %d |",
			s.point.loadLabel(), sizeName(s.point.valueSize), s.point.replicas, s.proxyLabel(),
			s.delays[pathDirect].P50, s.delays[pathDirect].P99, s.delays[pathFloor].P50, s.delays[pathFloor].P99, fmtQ(s.delays[pathChained]), fmtQ(s.delays[pathProxy]),
			s.added(pathFloor), s.added(pathChained), s.added(pathProxy), fmtS(s.core[pathFloor], 1), fmtS(s.core[pathChained], 1), fmtS(s.core[pathProxy], 1),
			fmtS(s.switches[pathFloor], 0), fmtS(s.switches[pathChained], 0), fmtS(s.switches[pathProxy], 0), s.delays[pathProxy].N, s.lost)
	}
	for _, q := range []string{"p50", "p99"} {
		if c, ok := charts["delay-"+q]; ok {
			p("")
			p("![%s delay against rate, N=%d](%s)", q, x.chartN(), c)
		}
	}
	gs := x.delayGoals()
	plain := make([]goalRow, len(gs))
	for i, g := range gs {
		plain[i] = g.goalRow
		if !g.met && g.floored {
			plain[i].target += ", below the floor"
		}
	}
	goalsSection(p, "Against the delay goals", plain, func() {
		p("Each goal at every row of this run at the proxy's default window: its median delay beyond the")
		p("direct replica ≤ %.0f%% of the chained redis-server's at paced rates and ≤ the chained relay's in", 100*delayAddedShare)
		p("bursts, its p99 and p99.9 ≤ the chained relay's;")
		p("at paced rates its CPU ≤ the chained relay's from %s writes a second up and ≤ %.2f× below,", thousands(delayCPUFrom), delayCPULow)
		p("and its context switches ≤ %.1f× the chained relay's. Each row gives the floor's figure beside", delaySwitches)
		p("the proxy's: where the floor too misses the target (*below the floor*), no relay meets it on")
		p("this machine. The floor's CPU and switches bound a relay's only at N=1: with N replicas it")
		p("reads the primary N times, where a relay reads once.")
	})
}

// proxyLabel is how the report names a row's proxy: its window, and its
// variant when it has one.
func (s delaySummary) proxyLabel() string {
	w := s.point.window
	if w == delayDefault {
		w = "default (" + s.window + ")"
	}
	switch s.point.variant {
	case delayLogOff:
		return w + ", log off"
	case delayTLS:
		return w + ", TLS"
	case delayZstd:
		return w + ", zstd pair"
	case delayZstdSlow:
		return w + ", zstd pair, link coalescing " + zstdCoalesceUS + " µs"
	}
	return w
}

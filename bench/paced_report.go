package main

import (
	"fmt"
	"slices"
	"strconv"
)

// The paced goals, each computed per row of the paced section from one
// run's medians.
const (
	// pacedVsChained and pacedVsChainedWide: the proxy at its defaults
	// (log on) pays at most this much of the chained redis-server's relay
	// CPU per replica-GB, at N = 1 and at N ≥ wideN.
	pacedVsChained     = 0.5
	pacedVsChainedWide = 0.4
	// pacedSwitchesVsChained: its context switches per second at most
	// this much of the chained relay's.
	pacedSwitchesVsChained = 1.2
	// idleExtraSwitches: idle, at most this many wake-ups per second more
	// than the chained relay.
	idleExtraSwitches = 10
	// pacedLogExtra: the relay's CPU with the log on at most this much of
	// its CPU with the log off.
	pacedLogExtra = 1.2
)

// relayLabel is a paced point's relay as the tables show it.
func relayLabel(p pacedPoint) string {
	if p.topology == chained {
		return "chained redis-server"
	}
	return "proxy, " + p.variant
}

// thousands is n with a comma every three digits: 20,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// pacedRow names a loaded point's row in the goals table.
func pacedRow(p pacedPoint) string {
	return fmt.Sprintf("%s/s, %s, N=%d", thousands(p.rate), sizeName(p.valueSize), p.replicas)
}

// find is the loaded or idle point p.
func (x *pacedResult) find(p pacedPoint) (pacedSummary, bool) {
	for _, s := range slices.Concat(x.points, x.idle) {
		if s.point == p {
			return s, true
		}
	}
	return pacedSummary{}, false
}

// peer is the point of the same rate, size and N with another relay.
func (x *pacedResult) peer(p pacedPoint, t topology, v variant) (pacedSummary, bool) {
	p.topology, p.variant = t, v.name
	return x.find(p)
}

// sizes are the value sizes of the points, ascending, the mixes last.
func (x *pacedResult) sizes() []int {
	return sortedSizes(x.points, func(s pacedSummary) int { return s.point.valueSize })
}

// chartSize is the value size the charts are drawn at: 512 B when the run
// has it, else its first size.
func (x *pacedResult) chartSize() int {
	sizes := x.sizes()
	if len(sizes) == 0 || slices.Contains(sizes, 512) {
		return 512
	}
	return sizes[0]
}

// relaySeries are the lines of the chart at size and N: one per relay, its
// CPU (% of a core) over the rates measured. Nil when N has fewer than two
// rates there.
func (x *pacedResult) relaySeries(size, n int) []series {
	var out []series
	for _, r := range pacedRelays {
		s := series{name: relayLabel(pacedPoint{topology: r.topology, variant: r.variant.name})}
		for _, pt := range x.points {
			if pt.point.valueSize == size && pt.point.replicas == n && pt.point.topology == r.topology && pt.point.variant == r.variant.name {
				s.xs, s.ys = append(s.xs, float64(pt.point.rate)), append(s.ys, pt.relayCore)
			}
		}
		if s.Len() < 2 {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// chartNs are the replica counts that have a chart.
func (x *pacedResult) chartNs() []int {
	var out []int
	for _, s := range x.points {
		if n := s.point.replicas; !slices.Contains(out, n) && x.relaySeries(x.chartSize(), n) != nil {
			out = append(out, n)
		}
	}
	return out
}

// ratioText is a ÷ b with prec decimals each, and the ratio to two.
func ratioText(a, b float64, prec int) string {
	return fmt.Sprintf("%.*f ÷ %.*f = %.2f", prec, a, prec, b, a/b)
}

// pacedGoals computes the paced goals for every row the run has.
func (x *pacedResult) pacedGoals() []goalRow {
	var out []goalRow
	for _, s := range x.points {
		p := s.point
		if p.topology != proxied || p.variant != logOn.name {
			continue
		}
		row := pacedRow(p)
		if c, ok := x.peer(p, chained, plain); ok {
			limit := pacedVsChained
			if p.replicas >= wideN {
				limit = pacedVsChainedWide
			}
			cpu, chainCPU := s.relayCPUGB.Median, c.relayCPUGB.Median
			out = append(out, goalRow{"relay CPU ÷ chained", row, ratioText(cpu, chainCPU, 2) + " (s/replica-GB)",
				fmt.Sprintf("≤ %.1f", limit), cpu/chainCPU <= limit})
			sw, chainSw := s.switches.Median, c.switches.Median
			out = append(out, goalRow{"context switches/s ÷ chained", row, ratioText(sw, chainSw, 0),
				fmt.Sprintf("≤ %.1f", pacedSwitchesVsChained), sw/chainSw <= pacedSwitchesVsChained})
		}
		if off, ok := x.peer(p, proxied, logOff); ok {
			on, offCPU := s.relayCPUGB.Median, off.relayCPUGB.Median
			out = append(out, goalRow{"the log: relay CPU, log on ÷ off", row, ratioText(on, offCPU, 2) + " (s/replica-GB)",
				fmt.Sprintf("≤ %.1f", pacedLogExtra), on/offCPU <= pacedLogExtra})
		}
	}
	idle := pacedPoint{replicas: idleReplicas, topology: proxied, variant: logOn.name}
	if s, ok := x.find(idle); ok {
		if c, ok := x.peer(idle, chained, plain); ok {
			extra := s.switches.Median - c.switches.Median
			out = append(out, goalRow{"idle wake-ups/s, proxy − chained", fmt.Sprintf("idle, N=%d", idleReplicas),
				fmt.Sprintf("%.1f − %.1f = %+.1f", s.switches.Median, c.switches.Median, extra),
				fmt.Sprintf("≤ +%d", idleExtraSwitches), extra <= idleExtraSwitches})
		}
	}
	return out
}

// vsChained is a proxy row's figure ÷ the chained row's, "–" on the
// chained row itself or without one.
func (x *pacedResult) vsChained(s pacedSummary, get func(pacedSummary) float64) string {
	if s.point.topology == chained {
		return "–"
	}
	c, ok := x.peer(s.point, chained, plain)
	if !ok {
		return "–"
	}
	return fmtRatio(get(s), get(c))
}

func (r *results) pacedMarkdown(p printer, charts map[string]string) {
	x := r.paced
	if x == nil {
		return
	}
	p("")
	p("## Paced: a steady rate from many clients")
	p("")
	p("A fixed total rate of SETs from %d connections, each writing its share every millisecond, the", x.conns)
	p("way a primary serving many clients below saturation runs: shares accumulate (1,000 SETs/s is")
	p("one SET per connection every 20 ms) and the connections take turns, so every millisecond")
	p("carries the rate ÷ 1,000 SETs, rounded. The relay then receives a few thousand small packets a")
	p("second, and what it costs is its wake-ups more than its bytes. The load writes prebuilt raw")
	p("RESP (one write per connection per millisecond) and reads the replies that have arrived every")
	p("10 ms without waiting for them. Values: SETs of one size to %d keys per connection, or the", pacedRing)
	p("*cache-like mix* of `internal/cachedata` (JSON documents, session hashes, short strings and")
	p("counters, about 440 B per command; its rate counts commands), %d commands per connection", cacheRing)
	p("written again and again. Each run starts fresh servers, holds the load %.0f s before a measured", pacedWarmup.Seconds())
	p("window of %d s and reads the relay and the primary at its two ends; %d run(s) per point, the", x.seconds, r.opts.reps)
	p("three relays of a row one after another in each repetition. Relays: *chained redis-server*")
	p("(primary → redis-server → N replicas), *proxy, log on* (replproxy's defaults, its durable")
	p("stream log on) and *proxy, log off* (`--repl-log-size 0`).")
	p("")
	p("- *held /s*: the SETs the load wrote per second in the window; a run below %.0f%% of the rate", 100*(1-pacedShortfall))
	p("  asked fails. *missed %%*: the load's millisecond ticks in the window that had no wake-up of")
	p("  their own (the harness woke late, and wrote their SETs with a later tick's: a burstier load).")
	p("- *stream MB/s*: the primary's offset delta ÷ the window.")
	p("- *relay CPU s/replica-GB*: the relay's CPU ÷ (stream GB × N); *%% of a core*: its CPU ÷ the")
	p("  window.")
	p("- *context switches/s*: voluntary and nonvoluntary context switches of all the relay's threads")
	p("  (`/proc/<pid>/task/*/status`), per second: how often it sleeps and wakes.")
	p("- *read+write calls/s*: `syscr` + `syscw` of `/proc/<pid>/io` (read, write and their vector,")
	p("  socket and positioned kin; not epoll_wait, futex or sleeps).")
	p("- *÷ chained*: the proxy's figure ÷ the chained redis-server's at the same rate, value and N.")
	p("- *primary*, *load*: the primary's and the harness's CPU, %% of a core. *digests equal* and")
	p("  *resyncs* as in streaming.")
	chartSize := x.chartSize()
	for _, size := range x.sizes() {
		p("")
		p("### %s", pacedHeading(size))
		p("")
		p("| rate /s | N | relay | held /s | stream MB/s | relay CPU s/replica-GB | %% of a core | ÷ chained | context switches/s | ÷ chained | read+write calls/s | primary %% of a core | load %% of a core | missed %% | digests equal | resyncs |")
		p("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
		for _, s := range x.points {
			if s.point.valueSize != size {
				continue
			}
			p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |", thousands(s.point.rate), s.point.replicas,
				relayLabel(s.point), fmtS(s.held, 0), fmtS(s.mbps, 2), fmtS(s.relayCPUGB, 2), fmtS(s.relayCore, 1),
				x.vsChained(s, func(s pacedSummary) float64 { return s.relayCPUGB.Median }), fmtS(s.switches, 0),
				x.vsChained(s, func(s pacedSummary) float64 { return s.switches.Median }), fmtS(s.syscalls, 0),
				fmtS(s.primaryCore, 1), fmtS(s.loadCore, 1), fmtS(s.missed, 1), yesNo(s.digestsSame), s.extraSyncs)
		}
		if size != chartSize {
			continue
		}
		for _, n := range x.chartNs() {
			if c, ok := charts[fmt.Sprintf("paced-%d", n)]; ok {
				p("")
				p("![relay CPU against rate, %s values, N=%d](%s)", sizeName(size), n, c)
			}
		}
	}
	if len(x.idle) > 0 {
		p("")
		p("### Idle")
		p("")
		p("%d replicas and no writes: the servers up and in sync, then %.0f s, then a window of %d s. The", idleReplicas, pacedWarmup.Seconds(), x.idleSeconds)
		p("primary still pings its replicas every 10 s (`repl-ping-replica-period`), and replicas")
		p("acknowledge every second. Medians of %d run(s):", r.opts.reps)
		p("")
		p("| relay | context switches/s (wake-ups) | − chained | %% of a core | read+write calls/s |")
		p("|---|---:|---:|---:|---:|")
		for _, s := range x.idle {
			extra := "–"
			if c, ok := x.peer(s.point, chained, plain); ok && s.point.topology != chained {
				extra = fmt.Sprintf("%+.1f", s.switches.Median-c.switches.Median)
			}
			p("| %s | %s | %s | %s | %s |", relayLabel(s.point), fmtS(s.switches, 1), extra, fmtS(s.relayCore, 2), fmtS(s.syscalls, 1))
		}
	}
	goalsSection(p, "Against the paced goals", x.pacedGoals(), func() {
		p("Each goal at every row of this run that has what it needs, from the medians above: the proxy")
		p("at its defaults (log on) pays ≤ %.1f× the chained redis-server's relay CPU per replica-GB at", pacedVsChained)
		p("N=1 and ≤ %.1f× at N ≥ %d, and makes ≤ %.1f× its context switches per second; idle, ≤ the", pacedVsChainedWide, wideN, pacedSwitchesVsChained)
		p("chained relay's wake-ups + %d per second; the log adds ≤ %.0f%% to the relay's CPU (log on ÷", idleExtraSwitches, 100*(pacedLogExtra-1))
		p("log off).")
	})
}

// pacedHeading is a value size's heading in the paced section.
func pacedHeading(size int) string {
	if size == cacheSize {
		return "Cache-like mix (commands/s)"
	}
	return sizeName(size) + " values"
}

// summary prints the paced section's medians, a line per row;
// results.summary counts its goals met.
func (x *pacedResult) summary(p printer) {
	p("paced, medians (relay %% of a core; context switches/s):")
	for _, s := range x.points {
		pt := s.point
		if pt.topology != chained {
			continue
		}
		on, ok1 := x.peer(pt, proxied, logOn)
		off, ok2 := x.peer(pt, proxied, logOff)
		if !ok1 || !ok2 {
			continue
		}
		p("  %-28s chained %5.1f%% %6.0f/s | log on %5.1f%% (%.2f× CPU/GB) %6.0f/s (%.2f×) | log off %5.1f%% %6.0f/s",
			pacedRow(pt), s.relayCore.Median, s.switches.Median, on.relayCore.Median, on.relayCPUGB.Median/s.relayCPUGB.Median,
			on.switches.Median, on.switches.Median/s.switches.Median, off.relayCore.Median, off.switches.Median)
	}
	for _, s := range x.idle {
		p("  idle N=%d %-22s %5.2f%% %6.1f wake-ups/s", idleReplicas, relayLabel(s.point), s.relayCore.Median, s.switches.Median)
	}
	for _, s := range slices.Concat(x.points, x.idle) {
		if s.extraSyncs > 0 || !s.digestsSame {
			p("  WARNING: %s: %d resync(s), digests equal: %s", s.point, s.extraSyncs, yesNo(s.digestsSame))
		}
	}
}

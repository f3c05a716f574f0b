package main

import "fmt"

// The streaming goals (the relay at the machine's floor, at its defaults),
// each computed per row from one run's medians.
const (
	// relayVsChained: at defaults the proxy's relay CPU per replica-GB is
	// at most the chained redis-server's at every N and size, and at most
	// relayVsChainedWide of it at N ≥ wideN; where the send floor is itself
	// above relayVsChainedWide of the chained relay, at most relayVsFloor ×
	// the floor instead (a chained relay pays the same kernel copies).
	relayVsChained     = 1.0
	relayVsChainedWide = 0.6
	wideN              = 4
	relayVsFloor       = 1.1
	// smallValueCPU: 512 B and 1 KiB values, N = 1, log off: relay CPU-s
	// per replica-GB.
	smallValueCPU = 1.0
	// engineVsRaw: the engine against raw writev, at 0 allocs/op.
	engineVsRaw = 0.95
)

// The stream log's goals at the streaming rows, each computed per row from
// one run's medians.
const (
	// logVsFloorFull and logVsFloorEmpty: the log's CPU per GB of stream ÷
	// its floor (diskFloor: dd through the page cache and CRC-32C), with
	// a full log (recycled segments, the steady state) against the
	// full-log floor and from an empty log against the empty-log floor.
	logVsFloorFull  = 1.3
	logVsFloorEmpty = 1.5
	// logRSSSlack: peak RSS with the log on at most log off's + the log's
	// follower's window + this.
	logRSSSlack = 16 << 20
)

// goalRow is one row of a goals table: one goal at one point.
type goalRow struct {
	goal     string // which goal
	row      string // the point: N, value, variant
	measured string
	target   string
	met      bool
}

func pointRow(n, size int, variant string) string {
	return fmt.Sprintf("N=%d %s, %s", n, sizeName(size), variant)
}

// streamingGoals computes the streaming goals for every row the run has.
func (r *results) streamingGoals() []goalRow {
	var out []goalRow
	if s := r.streaming; s != nil {
		out = append(out, s.relayGoals()...)
		for _, pt := range s.points {
			v := pt.point
			if v.topology != proxied || v.variant != logOff.name || v.replicas != 1 || (v.valueSize != 512 && v.valueSize != 1024) {
				continue
			}
			m := pt.relayCPUReplicaGB.Median
			out = append(out, goalRow{"small values, log off", pointRow(v.replicas, v.valueSize, v.variant),
				fmt.Sprintf("%.2f s/replica-GB", m), fmt.Sprintf("≤ %.1f", smallValueCPU), m <= smallValueCPU})
		}
		for _, g := range s.goals() {
			out = append(out, goalRow{"primary: proxied ÷ chained", pointRow(g.replicas, g.valueSize, g.variant),
				fmt.Sprintf("%.2f", g.primaryVsChained), "≤ 1", g.primaryVsChained <= 1})
		}
	}
	if e := r.engine; e != nil {
		for _, row := range e.rows {
			out = append(out, goalRow{"engine ÷ raw writev", fmt.Sprintf("%d replicas", row.replicas),
				fmt.Sprintf("%.2f, %s allocs/op", row.ratio, fmtS(row.fanoutAllocs, 0)),
				fmt.Sprintf("≥ %.2f, 0 allocs/op", engineVsRaw), row.ratio >= engineVsRaw && row.fanoutAllocs.Max == 0})
		}
	}
	return out
}

// pacedAndLogGoals computes the paced section's goals and the stream log's
// at the streaming rows, for every row the run has.
func (r *results) pacedAndLogGoals() []goalRow {
	var out []goalRow
	if r.streaming != nil {
		out = append(out, r.streaming.logGoals()...)
	}
	if r.paced != nil {
		out = append(out, r.paced.pacedGoals()...)
	}
	return out
}

// logGoals is the stream log's goals at every streaming row
// with the log on and a log-off row beside it: its cost against its floor
// (where the floor was measured) and its peak RSS.
func (s *streamingResult) logGoals() []goalRow {
	var out []goalRow
	for _, c := range s.logCosts() {
		row := pointRow(c.replicas, c.valueSize, c.variant)
		if f := c.floor(); f > 0 {
			limit := logVsFloorEmpty
			if c.full() {
				limit = logVsFloorFull
			}
			out = append(out, goalRow{"log's cost ÷ " + floorKind(c.full()) + " floor", row,
				fmt.Sprintf("%+.2f s/GB ÷ (dd %.2f + CRC %.2f) = %.2f", c.perStreamGB, c.ddFloor, c.crcFloor, c.vsFloor()),
				fmt.Sprintf("≤ %.1f", limit), c.vsFloor() <= limit})
		}
		if c.window > 0 {
			extra := (c.hwmOn - c.hwmOff) * 1e6
			limit := c.window + logRSSSlack
			out = append(out, goalRow{"peak RSS, log on − off", row,
				fmt.Sprintf("%.0f − %.0f MB = %+.1f MiB", c.hwmOn, c.hwmOff, extra/(1<<20)),
				fmt.Sprintf("≤ window %.0f + %d MiB", c.window/(1<<20), logRSSSlack>>20), extra <= limit})
		}
	}
	return out
}

// relayGoals is the first goal at every proxied row with the log on
// (from empty and full; over TLS against chained over TLS), saying which
// of its clauses applies.
func (s *streamingResult) relayGoals() []goalRow {
	var out []goalRow
	for _, pt := range s.points {
		v := variantNamed(pt.point.variant)
		if pt.point.topology != proxied || !v.log {
			continue
		}
		c, ok := s.find(streamPoint{chained, v.peer().name, pt.point.replicas, pt.point.valueSize})
		if !ok {
			continue
		}
		proxy, chain, floor := pt.relayCPUReplicaGB.Median, c.relayCPUReplicaGB.Median, pt.sendFloor.Median
		g := goalRow{goal: "relay ÷ chained", row: pointRow(pt.point.replicas, pt.point.valueSize, pt.point.variant)}
		ratio := proxy / chain
		limit := relayVsChained
		if pt.point.replicas >= wideN {
			limit = relayVsChainedWide
		}
		g.measured, g.target, g.met = fmt.Sprintf("%.2f ÷ %.2f = %.2f", proxy, chain, ratio), fmt.Sprintf("≤ %.1f", limit), ratio <= limit
		if floor > 0 && pt.point.replicas >= wideN && floor > relayVsChainedWide*chain {
			// The floor clause applies: the machine alone costs more than
			// the 0.6× the goal asks.
			g.goal = "relay ÷ send floor (floor > 0.6 × chained)"
			g.measured = fmt.Sprintf("%.2f ÷ %.2f = %.2f (floor %.2f × chained; relay %.2f × chained)", proxy, floor, proxy/floor, floor/chain, ratio)
			g.target = fmt.Sprintf("≤ %.1f, and ≤ chained", relayVsFloor)
			g.met = proxy/floor <= relayVsFloor && ratio <= relayVsChained
		}
		out = append(out, g)
	}
	return out
}

func (r *results) streamingGoalsMarkdown(p printer) {
	goalsSection(p, "Against the streaming goals", r.streamingGoals(), func() {
		p("Each goal at every row of this run that has what it needs, from the medians above: the proxy's")
		p("relay CPU with the log on ≤ the chained redis-server's, and ≤ %.1f× at N ≥ %d, or, where the", relayVsChainedWide, wideN)
		p("send floor itself is above %.1f× the chained relay, ≤ %.1f× the floor (the row says which);", relayVsChainedWide, relayVsFloor)
		p("512 B and 1 KiB values at N=1 with the log off ≤ %.1f s/replica-GB; the engine ≥ %.2f× raw", smallValueCPU, engineVsRaw)
		p("writev at 0 allocs/op; the primary behind the proxy pays no more than behind a chained")
		p("redis-server.")
	})
}

// logGoalsMarkdown is the stream log's goals, at the streaming rows.
func (s *streamingResult) logGoalsMarkdown(p printer) {
	goalsSection(p, "Against the stream log's goals", s.logGoals(), func() {
		p("At every row with the log on and a log-off row beside it, from the medians above: the log's")
		p("cost per GB of stream ≤ %.1f× the full-log floor with a full log (recycled segments) and ≤", logVsFloorFull)
		p("%.1f× the empty-log floor from an empty one (the floors: dd through the page cache + CRC-32C,", logVsFloorEmpty)
		p("measured beside the row); peak RSS with the log on ≤ with it off + the log's follower's window")
		p("+ %d MiB.", logRSSSlack>>20)
	})
}

// goalsSection prints a section of goal rows: its heading, the lines intro
// prints (what each goal asks) and the met/missed table; nothing without
// rows.
func goalsSection(p printer, heading string, gs []goalRow, intro func()) {
	if len(gs) == 0 {
		return
	}
	p("")
	p("### %s", heading)
	p("")
	intro()
	p("")
	goalsTable(p, gs)
}

// goalsTable prints goal rows as RESULTS.md's met/missed table.
func goalsTable(p printer, gs []goalRow) {
	p("| goal | row | measured | target | met |")
	p("|---|---|---|---|---|")
	for _, g := range gs {
		p("| %s | %s | %s | %s | %s |", g.goal, g.row, g.measured, g.target, metMissed(g.met))
	}
}

// goalsCount prints how many of the named goals' rows were met, for the
// summary at the end of a run; nothing when there are none.
func goalsCount(p printer, name string, gs []goalRow) {
	if len(gs) == 0 {
		return
	}
	met := 0
	for _, g := range gs {
		if g.met {
			met++
		}
	}
	p("%s: %d of %d rows met (RESULTS.md lists each)", name, met, len(gs))
}

func metMissed(b bool) string {
	if b {
		return "met"
	}
	return "**missed**"
}

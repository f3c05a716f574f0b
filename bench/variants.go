package main

import (
	"cmp"
	"fmt"
	"slices"
)

// variantLabel is a point's variant as the tables show it: "–" for the
// plain direct and chained runs, which have no proxy and no TLS.
func variantLabel(p streamPoint) string {
	if p.variant == plain.name {
		return "–"
	}
	return p.variant
}

// sizes are the value sizes of the points, in ascending order and the
// mixed row last (the TLS row's size may be one the grid does not have).
func (s *streamingResult) sizes() []int {
	return sortedSizes(s.points, func(pt streamSummary) int { return pt.point.valueSize })
}

// sortedSizes are the distinct value sizes of rows, ascending, the mixes
// last.
func sortedSizes[T any](rows []T, size func(T) int) []int {
	var out []int
	for _, r := range rows {
		if v := size(r); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, compareSizes)
	return out
}

// compareSizes orders value sizes ascending, the mixes (negative) last:
// the mixed row, then the cache-like mix.
func compareSizes(a, b int) int {
	if (a < 0) != (b < 0) {
		return cmp.Compare(b, a)
	}
	if a < 0 {
		return cmp.Compare(b, a) // mixedSize, -1, before cacheSize, -2
	}
	return cmp.Compare(a, b)
}

// logCost is what the stream log costs the proxy at one point: its CPU with
// the log on (from empty, or full) minus off, per replica-GB and per GB of
// stream (× N), against the disk floor measured beside the log-on run.
type logCost struct {
	replicas, valueSize       int
	variant                   string  // logOn or logFull
	on, off                   float64 // s/replica-GB
	perReplicaGB, perStreamGB float64
	ddBuffered, ddDirect      float64 // the disk floor, dd s/GB; 0 when not measured
	hwmOn, hwmOff             float64 // the proxy's peak RSS, MB
	logBehind                 float64 // s the log finished after the replicas (log on)
}

// ddFloor is the cheaper of the two dd floors: what the disk asks at least.
func (c logCost) ddFloor() float64 {
	if c.ddBuffered <= 0 || c.ddDirect <= 0 {
		return max(c.ddBuffered, c.ddDirect)
	}
	return min(c.ddBuffered, c.ddDirect)
}

// vsFloor is the log's cost per GB of stream ÷ the disk floor; 0 without one.
func (c logCost) vsFloor() float64 {
	if c.ddFloor() <= 0 {
		return 0
	}
	return c.perStreamGB / c.ddFloor()
}

// fmtFloor is a floor in s/GB, "–" when it was not measured.
func fmtFloor(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func (s *streamingResult) logCosts() []logCost {
	var out []logCost
	for _, pt := range s.points {
		if pt.point.topology != proxied || (pt.point.variant != logOn.name && pt.point.variant != logFull.name) {
			continue
		}
		off, ok := s.find(streamPoint{proxied, logOff.name, pt.point.replicas, pt.point.valueSize})
		if !ok {
			continue
		}
		c := logCost{replicas: pt.point.replicas, valueSize: pt.point.valueSize, variant: pt.point.variant,
			on: pt.relayCPUReplicaGB.Median, off: off.relayCPUReplicaGB.Median,
			ddBuffered: pt.ddBuffered.Median, ddDirect: pt.ddDirect.Median,
			hwmOn: pt.relayHWM.Median, hwmOff: off.relayHWM.Median, logBehind: pt.logBehind.Median}
		c.perReplicaGB = c.on - c.off
		c.perStreamGB = c.perReplicaGB * float64(c.replicas)
		out = append(out, c)
	}
	return out
}

// tlsCost is what TLS costs one topology at the TLS row: medians of the
// same topology plain (the proxy with its log on) and over TLS.
type tlsCost struct {
	topology                 topology
	variant                  string
	replicas, valueSize      int
	primaryPlain, primaryTLS float64 // s/GB of stream
	relayPlain, relayTLS     float64 // s/replica-GB; direct has none
	hasRelay                 bool
}

func (c tlsCost) relayText() string {
	if !c.hasRelay {
		return "–"
	}
	return fmt.Sprintf("%+.2f s/replica-GB (%.2f plain, %.2f TLS)", c.relayTLS-c.relayPlain, c.relayPlain, c.relayTLS)
}

func (s *streamingResult) tlsCosts() []tlsCost {
	var out []tlsCost
	for _, pt := range s.points {
		v := variantNamed(pt.point.variant)
		if !v.tls {
			continue
		}
		base := plain.name
		if pt.point.topology == proxied {
			base = v.twin
		}
		b, ok := s.find(streamPoint{pt.point.topology, base, pt.point.replicas, pt.point.valueSize})
		if !ok {
			continue
		}
		out = append(out, tlsCost{
			topology: pt.point.topology, variant: pt.point.variant, replicas: pt.point.replicas, valueSize: pt.point.valueSize,
			primaryPlain: b.primaryCPUGB.Median, primaryTLS: pt.primaryCPUGB.Median,
			relayPlain: b.relayCPUReplicaGB.Median, relayTLS: pt.relayCPUReplicaGB.Median,
			hasRelay: pt.point.topology != direct,
		})
	}
	return out
}

func (r *results) variantsMarkdown(p printer, charts map[string]string) {
	s := r.streaming
	logs, tlss := s.logCosts(), s.tlsCosts()
	if len(logs) == 0 && len(tlss) == 0 {
		return
	}
	p("")
	p("### What the stream log and TLS cost")
	p("")
	if len(logs) > 0 {
		p("The stream log: the proxy's CPU with the log on (*log on*: `repl-log-size 1gb`, the default,")
		p("from an empty log; *log on, full*: a full log recycling its segments) minus with")
		p("`--repl-log-size 0` (off), medians of the same run. Per GB of stream is per replica-GB × N:")
		p("the log is written once, whatever N, so its share shrinks as N grows. The disk floor: `dd")
		p("bs=1M` of %d MiB into the proxy's dir right after each log-on run (the servers idle), each", floorBytes(r.opts)>>20)
		p("time into a fresh file allocated beforehand (fallocate, `conv=notrunc`), once through the")
		p("page cache (with `fdatasync`, so that writeback ends before the next run) and once with")
		p("`oflag=direct`; dd's own user + system CPU from its rusage, per GB (it includes dd's reads")
		p("of /dev/zero). *log ÷ dd floor* is the log's cost per GB of stream ÷ the cheaper of the two.")
		p("*log behind s*: how long after every replica had the stream the log had it too (the relay's")
		p("CPU is read then).")
		p("")
		p("| N | value | variant | proxy s/replica-GB, log on | log off | log's cost s/replica-GB | log's cost s/GB of stream | dd floor s/GB, page cache | O_DIRECT | log ÷ dd floor | log behind s | peak RSS MB, log on | log off |")
		p("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range logs {
			p("| %d | %s | %s | %.2f | %.2f | %+.2f | %+.2f | %s | %s | %s | %.3f | %.0f | %.0f |", c.replicas, sizeName(c.valueSize), c.variant,
				c.on, c.off, c.perReplicaGB, c.perStreamGB, fmtFloor(c.ddBuffered), fmtFloor(c.ddDirect), fmtRatio(c.perStreamGB, c.ddFloor()),
				c.logBehind, c.hwmOn, c.hwmOff)
		}
		p("")
	}
	if len(tlss) > 0 {
		p("TLS: each topology over TLS against the same topology without it (the proxy with the same")
		p("log setting), medians:")
		p("")
		p("| N | value | topology | variant | primary s/GB plain | TLS | relay s/replica-GB plain | TLS | relay's TLS cost s/replica-GB |")
		p("|---:|---:|---|---|---:|---:|---:|---:|---:|")
		for _, c := range tlss {
			rp, rt, rd := "–", "–", "–"
			if c.hasRelay {
				rp, rt, rd = fmt.Sprintf("%.2f", c.relayPlain), fmt.Sprintf("%.2f", c.relayTLS), fmt.Sprintf("%+.2f", c.relayTLS-c.relayPlain)
			}
			p("| %d | %s | %s | %s | %.2f | %.2f | %s | %s | %s |", c.replicas, sizeName(c.valueSize), c.topology, c.variant,
				c.primaryPlain, c.primaryTLS, rp, rt, rd)
		}
	}
	if c, ok := charts["variants"]; ok {
		p("")
		p("![relay CPU by variant](%s)", c)
	}
}

package main

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/replproxy/replproxy/bench/internal/sample"
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
// stream (× N), against the log's floor measured beside the log-on run:
// the full log's for a full-log row, the empty log's for the others.
type logCost struct {
	replicas, valueSize       int
	variant                   string  // logOn or logFull
	on, off                   float64 // s/replica-GB
	perReplicaGB, perStreamGB float64
	ddFloor, crcFloor         float64 // the log's floor, its dd and its CRC-32C, s/GB; 0 when not measured
	hwmOn, hwmOff             float64 // the proxy's peak RSS, MB
	window                    float64 // the log's follower's window, bytes (log on)
	logBehind                 float64 // s the log finished after the replicas (log on)
}

// full reports whether the row's log was full (recycling its segments).
func (c logCost) full() bool { return c.variant == logFull.name }

// floor is the log's floor, dd and CRC-32C, s/GB; 0 without a dd.
func (c logCost) floor() float64 {
	if c.ddFloor <= 0 {
		return 0
	}
	return c.ddFloor + c.crcFloor
}

// vsFloor is the log's cost per GB of stream ÷ its floor; 0 without one.
func (c logCost) vsFloor() float64 {
	if c.floor() <= 0 {
		return 0
	}
	return c.perStreamGB / c.floor()
}

// floorKind names the log's floor a row is held to: "full-log" for a full
// log, "empty-log" for one that starts empty.
func floorKind(full bool) string {
	if full {
		return "full-log"
	}
	return "empty-log"
}

// fmtMiB is a size in bytes as MiB, "–" when it is not known.
func fmtMiB(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v/(1<<20))
}

// fmtFloor is a floor in s/GB, "–" when it was not measured.
func fmtFloor(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

// measured is a summary's median, 0 when it has no measurement (a floor
// that failed in every run).
func measured(s sample.Summary) float64 {
	if s.N == 0 {
		return 0
	}
	return s.Median
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
			ddFloor: measured(pt.ddFloor), crcFloor: measured(pt.crcFloor),
			hwmOn: pt.relayHWM.Median, hwmOff: off.relayHWM.Median, window: measured(pt.logWindow), logBehind: pt.logBehind.Median}
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
		p("the log is written once, whatever N, so its share shrinks as N grows. The log's floor, measured")
		p("right after each log-on run (the servers idle) over %d MiB, is what the log cannot do without:", floorBytes(r.opts)>>20)
		p("the write through the page cache, `dd if=/dev/zero bs=1M conv=fdatasync` into the proxy's dir")
		p("(dd's own user + system CPU from its rusage; it includes dd's reads of /dev/zero, and")
		p("`fdatasync` ends writeback before the next run), plus the checksum, the CRC-32C of as many")
		p("bytes computed in the harness (one thread's CPU, `RUSAGE_THREAD`, over a %d MiB buffer", crcBufferBytes>>20)
		p("written beforehand and reused). The *full-log* floor, for *log on, full* (whose new segments")
		p("are recycled files), has dd overwrite a file already allocated and written (`conv=notrunc`, a")
		p("first dd pass beforehand); the *empty-log* floor, for *log on*, has it write a new file. *log ÷")
		p("floor*: the log's cost per GB of stream ÷ dd + CRC. *log behind s*: how long after every")
		p("replica had the stream the log had it too (the relay's CPU is read then). *window*: how far")
		p("the log's follower may fall behind the stream, holding it in memory (INFO persistence")
		p("`repl_log_window`, or from `repl-backlog-size` as the proxy computes it).")
		p("")
		p("| N | value | variant | proxy s/replica-GB, log on | log off | log's cost s/replica-GB | log's cost s/GB of stream | floor | dd s/GB | CRC-32C s/GB | log ÷ floor | log behind s | peak RSS MB, log on | log off | window MiB |")
		p("|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range logs {
			p("| %d | %s | %s | %.2f | %.2f | %+.2f | %+.2f | %s | %s | %s | %s | %.3f | %.0f | %.0f | %s |", c.replicas, sizeName(c.valueSize), c.variant,
				c.on, c.off, c.perReplicaGB, c.perStreamGB, floorKind(c.full()), fmtFloor(c.ddFloor), fmtFloor(c.crcFloor), fmtRatio(c.perStreamGB, c.floor()),
				c.logBehind, c.hwmOn, c.hwmOff, fmtMiB(c.window))
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

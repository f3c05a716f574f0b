package main

import (
	"cmp"
	"fmt"
	"math"
	"strings"
)

// The regions goals: what the compressed link between regions is to meet.
const (
	// regionBytesFactor: on the cache-like data, plain's bytes across the
	// link ÷ zstd's, for the full sync and per GB of stream.
	regionBytesFactor = 3.0
	// regionCompressCPU and regionDecompressCPU: CPU seconds per GB of
	// stream spent compressing on proxy A and decompressing on proxy B.
	regionCompressCPU   = 1.0
	regionDecompressCPU = 0.3
	// regionLagSeconds bounds "bounded lag" under a load: the compressed
	// link's largest sampled lag is at most this many seconds of the
	// load's own stream, and its replicas have it all this long after the
	// load stops.
	regionLagSeconds = 1.0
)

func regionDataNames() string {
	var names []string
	for _, d := range regionDatas {
		names = append(names, d.name)
	}
	return strings.Join(names, ",")
}

func linkName(mode string) string {
	if mode == "no" {
		return "plain"
	}
	return mode
}

func (r *regionsResult) cell(data, mode string) (regionCell, bool) {
	for _, c := range r.cells {
		if c.data == data && c.mode == mode && c.synced {
			return c, true
		}
	}
	return regionCell{}, false
}

func (c regionCell) load(pct int) (regionStream, bool) {
	for _, s := range c.streams {
		if s.pct == pct {
			return s, true
		}
	}
	return regionStream{}, false
}

func perStreamGB(x float64, bytes int64) float64 { return x / (float64(bytes) / gb) }

// compressCPU is proxy A's compressing CPU per GB of s's stream: the
// link's own cpu_sec when INFO has it, else the process CPU it costs over
// the plain run's (from says which).
func compressCPU(s, plain regionStream, havePlain bool) (v float64, from string) {
	if s.linkA.ok {
		return perStreamGB(s.linkA.cpu, s.bytes), "link cpu_sec"
	}
	if !havePlain {
		return math.NaN(), ""
	}
	return perGB(s.cpuA, s.bytes) - perGB(plain.cpuA, plain.bytes), "process CPU, zstd − plain"
}

func decompressCPU(s, plain regionStream, havePlain bool) (v float64, from string) {
	if s.linkB.ok {
		return perStreamGB(s.linkB.cpu, s.bytes), "link cpu_sec"
	}
	if !havePlain {
		return math.NaN(), ""
	}
	return perGB(s.cpuB, s.bytes) - perGB(plain.cpuB, plain.bytes), "process CPU, zstd − plain"
}

// lagSeconds is a lag in bytes as seconds of s's load.
func (s regionStream) lagSeconds(bytes float64) float64 { return bytes / s.rate }

// regionsGoals is the regions goals at every row the section has.
func (r *regionsResult) regionsGoals() []goalRow {
	var out []goalRow
	for _, d := range regionDatas {
		plain, okP := r.cell(d.name, "no")
		z, okZ := r.cell(d.name, "zstd")
		if !okZ {
			continue
		}
		if d.name == regionDatas[0].name && okP {
			f := float64(plain.sync.crossedAB) / float64(z.sync.crossedAB)
			out = append(out, goalRow{"bytes across the link, plain ÷ zstd", d.name + ", full sync",
				fmt.Sprintf("%.0f ÷ %.0f MB = %.2f×", float64(plain.sync.crossedAB)/1e6, float64(z.sync.crossedAB)/1e6, f),
				fmt.Sprintf("≥ %.0f×", regionBytesFactor), f >= regionBytesFactor})
		}
		for _, zs := range z.streams {
			ps, okPS := plain.load(zs.pct)
			okPS = okPS && okP
			row := fmt.Sprintf("%s, load %d%%", d.name, zs.pct)
			if d.name == regionDatas[0].name && okPS {
				pg, zg := float64(ps.crossedAB)/float64(ps.bytes), float64(zs.crossedAB)/float64(zs.bytes)
				out = append(out, goalRow{"bytes across the link per GB of stream, plain ÷ zstd", row,
					fmt.Sprintf("%.3f ÷ %.3f = %.2f×", pg, zg, pg/zg), fmt.Sprintf("≥ %.0f×", regionBytesFactor), pg/zg >= regionBytesFactor})
			}
			if v, from := compressCPU(zs, ps, okPS); from != "" {
				out = append(out, goalRow{"compressing on proxy A, CPU-s per GB of stream", row,
					fmt.Sprintf("%.3f (%s)", v, from), fmt.Sprintf("≤ %.1f", regionCompressCPU), v <= regionCompressCPU})
			}
			if v, from := decompressCPU(zs, ps, okPS); from != "" {
				out = append(out, goalRow{"decompressing on proxy B, CPU-s per GB of stream", row,
					fmt.Sprintf("%.3f (%s)", v, from), fmt.Sprintf("≤ %.1f", regionDecompressCPU), v <= regionDecompressCPU})
			}
			plainLag := "plain not measured"
			if okPS {
				plainLag = fmt.Sprintf("plain: max %.1f MB = %.2f s, catch-up %.2f s", ps.lag.Max/1e6, ps.lagSeconds(ps.lag.Max), ps.catchUp.Seconds())
			}
			zl := zs.lagSeconds(zs.lag.Max)
			out = append(out, goalRow{"bounded lag, zstd", row,
				fmt.Sprintf("max %.2f MB = %.2f s of load, catch-up %.2f s (%s)", zs.lag.Max/1e6, zl, zs.catchUp.Seconds(), plainLag),
				fmt.Sprintf("≤ %.0f s and ≤ %.0f s", regionLagSeconds, regionLagSeconds),
				zl <= regionLagSeconds && zs.catchUp.Seconds() <= regionLagSeconds})
		}
	}
	return out
}

func fmtLink(l linkFigures, bytes int64) string {
	if !l.ok {
		return "–"
	}
	return fmt.Sprintf("%.3f", perStreamGB(l.cpu, bytes))
}

func (r *results) regionsMarkdown(p printer) {
	x := r.regions
	if x == nil {
		return
	}
	p("")
	p("## Regions: one link between two network namespaces, plain against zstd")
	p("")
	if x.skipped != "" {
		p("**Not measured:** the section needs root, `ip` and `tc` to build two network namespaces, and")
		p("could not: %s.", x.skipped)
		return
	}
	p("Two regions as two network namespaces joined by a veth pair, limited to %d Mbit/s each way", x.rateBits/1e6)
	p("by `tc … tbf` on both ends (internal/netns). Region A: the primary and proxy A (a replica of")
	p("the primary); region B: proxy B (a replica of proxy A, `--repl-link-compression` *plain* =")
	p("`no`, or `zstd`) and %d redis-server replicas of proxy B. Only the link A→B crosses the", regionReplicas)
	p("veth. Every server is started afresh for each data kind and link mode, in the same run: the")
	p("primary filled with %d MiB of dataset (the same seeded commands under both modes), proxy A's", x.dataMB)
	p("own full sync (within region A), then proxy B's across the link, then the loads; so both")
	p("modes sync the same dataset from a fresh snapshot. Every server gets")
	p("`client-output-buffer-limit replica 0 0 0`, so that a lagging link is measured, not dropped.")
	if r.opts.quick {
		p("This quick run's dataset is %d MiB, not the full run's 1 GiB.", x.dataMB)
	}
	p("")
	p("The data:")
	p("")
	for _, d := range regionDatas {
		p("- *%s*: %s.", d.name, d.shape)
	}
	p("")
	p("- *across A→B*, *B→A*: bytes the veth's counters (`ip -s link`) counted, Ethernet, IP and TCP")
	p("  headers included.")
	p("- *full sync*: from starting proxy B (empty dir) until its offset equals the primary's; proxy A")
	p("  serves it the snapshot of its own full sync. *RDB* is proxy B's `upstream_rdb_bytes`")
	p("  (uncompressed); *syncs by A*: syncs proxy A served meanwhile (1: proxy B's alone); *corrupt*:")
	p("  proxy B's `link_corrupt_errors`.")
	p("- *load*: the data kind's own commands (fresh, never repeated batches), paced at that percent")
	p("  of the link's rate in command bytes for %d s; the stream is the primary's offset delta.", x.seconds)
	p("- *lag*: the primary's offset minus the furthest-behind replica's, sampled every %v under the", lagSampleInterval)
	p("  load (replicas read first); *catch-up*: from the load's end until every replica has it all.")
	p("- *CPU*: each proxy's process CPU (`/proc/<pid>/stat`) per GB of stream; *link CPU*: the codec's")
	p("  own `cpu_sec` from INFO `# Links` (thread CPU inside the zstd encoder on A, decoder on B),")
	p("  \"–\" where the proxy's INFO has no such line.")
	p("- *resyncs*: full and partial syncs served by proxy A, proxy B and the primary during the load.")
	p("")
	p("### Full sync of proxy B across the link")
	p("")
	p("| data | link | dataset MB | RDB MB | across A→B MB | across ÷ RDB | B→A MB | time s | proxy A CPU s | proxy B CPU s | link CPU A s | link CPU B s | link (INFO) | syncs by A | corrupt | digests equal |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
	for _, c := range x.cells {
		if !c.synced {
			p("| %s | %s | %.0f | not measured: %s |%s", c.data, linkName(c.mode), c.dataMB, mdEscape(c.failed), strings.Repeat(" |", 12))
			continue
		}
		s := c.sync
		la, lb := "–", "–"
		if s.linkA.ok {
			la = fmt.Sprintf("%.2f", s.linkA.cpu)
		}
		if s.linkB.ok {
			lb = fmt.Sprintf("%.2f", s.linkB.cpu)
		}
		p("| %s | %s | %.0f | %.0f | %.0f | %.3f | %.1f | %.1f | %.2f | %.2f | %s | %s | %s | %d | %d | %s |", c.data, linkName(c.mode), c.dataMB,
			float64(s.rdbBytes)/1e6, float64(s.crossedAB)/1e6, float64(s.crossedAB)/float64(s.rdbBytes), float64(s.crossedBA)/1e6,
			s.elapsed.Seconds(), s.cpuA.Seconds(), s.cpuB.Seconds(), la, lb, cmp.Or(s.compression, "–"), s.syncsA, s.corrupt, digestText(c))
	}
	p("")
	p("### Steady loads through the link")
	p("")
	p("| data | link | load | stream MB/s | stream MB | across A→B per GB of stream | B→A per GB | lag MB: median, p99, max | max lag, s of load | catch-up s | proxy A CPU s/GB | proxy B CPU s/GB | link CPU A s/GB | link CPU B s/GB | resyncs |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range x.cells {
		for _, s := range c.streams {
			p("| %s | %s | %d%% | %.2f | %.0f | %.3f | %.3f | %.2f, %.2f, %.2f | %.2f | %.2f | %.3f | %.3f | %s | %s | %d |",
				c.data, linkName(c.mode), s.pct, s.rate/1e6, float64(s.bytes)/1e6,
				float64(s.crossedAB)/float64(s.bytes), float64(s.crossedBA)/float64(s.bytes),
				s.lag.Median/1e6, s.lagP99/1e6, s.lag.Max/1e6, s.lagSeconds(s.lag.Max), s.catchUp.Seconds(),
				perGB(s.cpuA, s.bytes), perGB(s.cpuB, s.bytes), fmtLink(s.linkA, s.bytes), fmtLink(s.linkB, s.bytes),
				s.resyncs)
		}
	}
	for _, c := range x.cells {
		if c.failed != "" {
			p("")
			p("**%s, %s link: stopped short** (the rows above are what it measured before): %s", c.data, linkName(c.mode), mdEscape(c.failed))
		}
	}
	goalsSection(p, "Against the regions goals", x.regionsGoals(), func() {
		p("On the cache-like data ≥ %.0f× fewer bytes across the link with zstd, for the full sync and per", regionBytesFactor)
		p("GB of stream; ≤ %.1f CPU-s per GB of stream compressing on proxy A and ≤ %.1f decompressing on", regionCompressCPU, regionDecompressCPU)
		p("proxy B (the link's own cpu_sec where INFO has it); under each load, the zstd link's largest")
		p("sampled lag ≤ %.0f s of the load and its replicas caught up ≤ %.0f s after it stops (the plain", regionLagSeconds, regionLagSeconds)
		p("link's figures beside it, for the load that saturates it).")
	})
}

// mdEscape keeps an error message on one table row.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// regionsSummary is the section's lines of the run's summary.
func (x *regionsResult) summary(p printer) {
	if x.skipped != "" {
		p("regions: SKIPPED: %s", x.skipped)
		return
	}
	p("regions (%d Mbit/s, %d MiB dataset):", x.rateBits/1e6, x.dataMB)
	for _, c := range x.cells {
		if c.failed != "" {
			p("  %s %s: stopped short: %s", c.data, linkName(c.mode), c.failed)
		}
		if !c.synced {
			continue
		}
		p("  %-15s %-5s full sync %.1f s, across ÷ RDB %.3f", c.data, linkName(c.mode), c.sync.elapsed.Seconds(),
			float64(c.sync.crossedAB)/float64(c.sync.rdbBytes))
		for _, s := range c.streams {
			p("    load %3d%%: %.2f MB/s, across %.3f per GB, lag max %.2f s of load, catch-up %.2f s, CPU A %.3f B %.3f s/GB",
				s.pct, s.rate/1e6, float64(s.crossedAB)/float64(s.bytes), s.lagSeconds(s.lag.Max), s.catchUp.Seconds(),
				perGB(s.cpuA, s.bytes), perGB(s.cpuB, s.bytes))
		}
	}
	goalsCount(p, "regions goals", x.regionsGoals())
}

// digestText is whether the cell's replicas equal its primary.
func digestText(c regionCell) string {
	if !c.digested {
		return "not compared"
	}
	return yesNo(c.digestsSame)
}

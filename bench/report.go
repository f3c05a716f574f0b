package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replproxy/replproxy/bench/internal/sample"
)

// results is everything one run of the harness measured.
type results struct {
	opts              *options
	machine           machine
	started, finished time.Time
	loadEnd           string // load average at the end
	engine            *engineResult
	streaming         *streamingResult
	fullsync          *fullSyncResult
	walk              *walkResult // the RDB check's cost, in the full-sync section
	paced             *pacedResult
	delay             *delayResult
	restart           []*restartResult // one per variant
	many              *manyResult
	profiles          []*profileResult
	regions           *regionsResult
}

// fmtS is a summary as "median (min–max)", or the median alone for one run.
func fmtS(s sample.Summary, prec int) string {
	if s.N == 0 {
		return "–"
	}
	m := fmt.Sprintf("%.*f", prec, s.Median)
	if s.N == 1 || s.Min == s.Max {
		return m
	}
	return fmt.Sprintf("%s (%.*f–%.*f)", m, prec, s.Min, prec, s.Max)
}

func sizeName(b int) string {
	switch {
	case b == mixedSize:
		return fmt.Sprintf("mixed %s–%s", sizeName(mixedMin), sizeName(mixedMax))
	case b == cacheSize:
		return "cache-like mix"
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// fileSize is sizeName for file names: "16KiB", "mixed", "cache".
func fileSize(b int) string {
	switch b {
	case mixedSize:
		return "mixed"
	case cacheSize:
		return "cache"
	}
	return strings.ReplaceAll(sizeName(b), " ", "")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**NO**"
}

// write writes RESULTS.md and the charts into the output directory.
func (r *results) write() error {
	if err := os.MkdirAll(r.opts.out, 0o755); err != nil {
		return err
	}
	charts, err := r.drawCharts()
	if err != nil {
		return err
	}
	var b strings.Builder
	r.markdown(&b, charts)
	return os.WriteFile(filepath.Join(r.opts.out, "RESULTS.md"), []byte(b.String()), 0o644)
}

func (r *results) markdown(b *strings.Builder, charts map[string]string) {
	o, m := r.opts, r.machine
	p := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	p("# replproxy benchmark results")
	p("")
	p("Produced by `%s` (`%s` in bench/) on %s, in %s.",
		o.makeCommand(), o.command(), r.started.Format("2006-01-02 15:04 MST"), r.finished.Sub(r.started).Round(time.Second))
	if o.quick {
		p("This is a **quick** run: fewer points and less data than `make bench`, so the")
		p("figures are noisier; the full run is `make bench`.")
	}
	if o.note != "" {
		p("")
		p("**Note:** %s", o.note)
	}
	p("")
	p("## Machine")
	p("")
	p("| | |")
	p("|---|---|")
	p("| cores | %d |", m.cores)
	p("| CPU | %s |", m.cpu)
	p("| kernel | %s |", m.kernel)
	p("| Go | %s |", m.goVersion)
	p("| Redis | %s |", m.redis)
	p("| replproxy | %s, tree %s |", m.proxy, m.commit)
	if m.harness != m.commit {
		p("| harness | tree %s (-root %s) |", m.harness, o.root)
	}
	p("| load average (1, 5, 15 min) | %s at the start, %s at the end |", m.loadStart, r.loadEnd)
	p("")
	p("Every server listens on 127.0.0.1 (loopback; the regions section's on its two network")
	p("namespaces' addresses) and runs from a fresh temp dir; servers are started afresh for every run. ")
	p("Figures are medians, with the range (min–max) in parentheses. CPU is read from `/proc/<pid>/stat` (utime + stime + cutime + cstime, the last two being")
	p("fork children the process has reaped), peak RSS from `VmHWM` in `/proc/<pid>/status`.")
	r.engineMarkdown(p, charts)
	r.delayMarkdown(p, charts)
	r.streamingMarkdown(p, charts)
	r.pacedMarkdown(p, charts)
	r.fullSyncMarkdown(p, charts)
	r.restartMarkdown(p)
	r.manyMarkdown(p)
	r.profileMarkdown(p)
	r.regionsMarkdown(p)
}

type printer func(format string, args ...any)

func (r *results) engineMarkdown(p printer, charts map[string]string) {
	e := r.engine
	if e == nil {
		return
	}
	p("")
	p("## Engine: fan-out vs raw writev")
	p("")
	p("`replbuf`'s BenchmarkFanout against BenchmarkRawWritev (N goroutines writev pre-filled 16 KiB")
	p("blocks, 1 MiB per call) on the same kind of loopback sockets, the same bytes per op (a block")
	p("to every replica); MB/s counts every replica's bytes. The engine's producer fills the stream")
	p("as the proxy's stream loop does: `FillBuffers` from a reader that returns up to 16 blocks")
	p("(256 KiB) per read, as a socket holding a window of stream does, offering twice what the last")
	p("read took, and publishes once per read (*blocks/read*: the reads' mean, smaller when the pool")
	p("has fewer free blocks to offer); one cursor per replica sends with writev. %d runs each:", e.rows[0].runs)
	p("")
	p("    %s", e.command)
	p("")
	p("| replicas | engine MB/s | raw writev MB/s | engine / raw | engine allocs/op | engine B/op | blocks/read |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range e.rows {
		p("| %d | %s | %s | %.2f | %s | %s | %s |", row.replicas, fmtS(row.fanout, 0), fmtS(row.raw, 0),
			row.ratio, fmtS(row.fanoutAllocs, 0), fmtS(row.fanoutBytesOp, 0), fmtS(row.fanoutRead, 1))
	}
	p("")
	p("Goal: engine ≥ %.2f × raw writev at every replica count, 0 allocs/op.", engineVsRaw)
	if c, ok := charts["engine"]; ok {
		p("")
		p("![engine vs raw writev](%s)", c)
	}
}

func (r *results) streamingMarkdown(p printer, charts map[string]string) {
	s := r.streaming
	if s == nil {
		return
	}
	p("")
	p("## Streaming: direct, chained, proxied")
	p("")
	p("The same write load for each topology, in the same run: *direct* (primary → N replicas),")
	p("*chained* (primary → one redis-server → N replicas) and *proxied* (primary → replproxy → N")
	p("replicas). Load: %s, written by the harness itself (a raw RESP writer); %d runs per point,", s.loadDesc, r.opts.reps)
	p("the repetitions interleaved across points.")
	p("")
	p("- *stream MB/s*: stream bytes (the primary's offset delta) ÷ time from the load's start until")
	p("  every replica's offset equals the primary's.")
	p("- *primary CPU/GB*: the primary's CPU seconds per GB of stream (it also executes the SETs).")
	p("- *relay CPU/replica-GB*: the relay's CPU seconds ÷ (stream GB × N).")
	p("- *lag*: time from the load's end until every replica's offset equals the primary's.")
	p("- *load CPU/GB*: the harness process (the load generator) per GB; it shares the machine.")
	p("- *resyncs*: full syncs on the primary and full or partial resyncs served by the relay during")
	p("  the load, summed over the runs (should be 0: a replica that lost its link counts one).")
	p("  The primary and the relay run with `client-output-buffer-limit replica 0 0 0`, so that no")
	p("  topology drops a lagging replica: one that resyncs gets the load's small dataset instead of")
	p("  the stream, and its relay would look cheaper than it is.")
	p("- *send floor*: the machine's cost of sending the same volume to N sockets, measured in the")
	p("  same run just before the row group (once per N, value size and repetition): %d MiB per", floorBytes(r.opts)>>20)
	p("  replica (the stream's size, at most %d MiB) written with writev in 1 MiB batches of 16 KiB", floorMaxBytes>>20)
	p("  blocks (the largest batch a cursor sends, as replbuf's BenchmarkRawWritev) to N loopback")
	p("  sockets whose far ends the harness drains; CPU of the sending threads alone (getrusage")
	p("  `RUSAGE_THREAD`), per replica-GB. The same volume, not the same bytes: the kernel's copy")
	p("  does not look at them, and a relay's writes are as large as it is behind, not as the")
	p("  primary's commands. The floor pays the kernel's send copies and loopback's delivery, as")
	p("  every relay does; not the relay's reading of its upstream or any of its own work.")
	p("- *proxy ÷ floor*: the relay's CPU per replica-GB ÷ the send floor (chained rows too, for")
	p("  comparison): how far above the machine's floor the relay is.")
	p("- *variant*: the proxy with its durable stream log on (its default, `repl-log-size 1gb`),")
	p("  starting from an empty log (*log on*); on and already full (*log on, full*: `--repl-log-size")
	p("  %dmb`, and %d MiB of the same load, its size and two segments, written before the measured", r.opts.fullLogMB, fullLogFill(r.opts)>>20)
	p("  run, after which the log's first offset has moved: retention drops segments and new ones")
	p("  are recycled files; a smaller log than the default, so that the fill stays short); or")
	p("  off (`--repl-log-size 0`). With the log on, the relay's CPU is read once the log holds the")
	p("  whole stream too (its follower may trail the replicas). *TLS*: every replication link (primary → relay → replicas, or")
	p("  primary → replicas) over TLS, with the proxy's log on (*TLS*) or off (*TLS, log off*). The")
	p("  load itself and the harness's INFO commands use the plain port, so only replication pays")
	p("  for TLS.")
	for _, size := range s.sizes() {
		p("")
		p("### %s values", sizeName(size))
		p("")
		p("| N | topology | variant | stream MB/s | primary CPU s/GB | relay CPU s/replica-GB | send floor s/replica-GB | proxy ÷ floor | relay peak RSS MB | lag s | load CPU s/GB | digests equal | resyncs |")
		p("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
		for _, pt := range s.points {
			if pt.point.valueSize != size {
				continue
			}
			floor, ratio := "–", "–"
			if pt.point.topology != direct {
				floor, ratio = fmtS(pt.sendFloor, 2), fmtRatio(pt.relayCPUReplicaGB.Median, pt.sendFloor.Median)
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |", pt.point.replicas, pt.point.topology,
				variantLabel(pt.point), fmtS(pt.mbps, 0), fmtS(pt.primaryCPUGB, 2), fmtS(pt.relayCPUReplicaGB, 2),
				floor, ratio, fmtS(pt.relayHWM, 0), fmtS(pt.lag, 3), fmtS(pt.loadCPUGB, 2), yesNo(pt.digestsSame), pt.extraSyncs)
		}
		for _, kind := range []string{"primary", "relay"} {
			if c, ok := charts[fmt.Sprintf("streaming-%s-%d", kind, size)]; ok {
				p("")
				p("![%s CPU, %s values](%s)", kind, sizeName(size), c)
			}
		}
	}
	r.variantsMarkdown(p, charts)
	r.streamingGoalsMarkdown(p)
	s.logGoalsMarkdown(p)
	p("")
	p("### Against the goals")
	p("")
	p("Goals: proxy ≤ 0.4 s per replica-GB and ≤ 0.5 × the chained relay; the primary behind the")
	p("proxy pays no more than behind a chained relay (ratio ≤ 1). Medians:")
	p("")
	p("| N | value | proxy variant | proxy s/replica-GB | proxy ÷ chained relay | primary: proxied ÷ chained | primary: proxied ÷ direct |")
	p("|---:|---:|---|---:|---:|---:|---:|")
	for _, g := range s.goals() {
		p("| %d | %s | %s | %.2f | %.2f | %.2f | %.2f |", g.replicas, sizeName(g.valueSize), g.variant, g.proxyPerReplicaGB,
			g.proxyVsChained, g.primaryVsChained, g.primaryVsDirect)
	}
	p("")
	p("The TLS row is compared with direct and chained over TLS; the others with plain ones.")
}

// fmtRatio is a ÷ b to two places, "–" when b is missing (a may be 0 or
// below: a log whose cost was lost in the noise).
func fmtRatio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// streamGoal is one row of the streaming goals table.
type streamGoal struct {
	replicas, valueSize                                                  int
	variant                                                              string
	proxyPerReplicaGB, proxyVsChained, primaryVsChained, primaryVsDirect float64
}

func (s *streamingResult) find(p streamPoint) (streamSummary, bool) {
	for _, pt := range s.points {
		if pt.point == p {
			return pt, true
		}
	}
	return streamSummary{}, false
}

func (s *streamingResult) goals() []streamGoal {
	var out []streamGoal
	for _, pt := range s.points {
		if pt.point.topology != proxied {
			continue
		}
		peer := variantNamed(pt.point.variant).peer().name
		d, ok1 := s.find(streamPoint{direct, peer, pt.point.replicas, pt.point.valueSize})
		c, ok2 := s.find(streamPoint{chained, peer, pt.point.replicas, pt.point.valueSize})
		if !ok1 || !ok2 {
			continue
		}
		out = append(out, streamGoal{
			replicas: pt.point.replicas, valueSize: pt.point.valueSize, variant: pt.point.variant,
			proxyPerReplicaGB: pt.relayCPUReplicaGB.Median,
			proxyVsChained:    pt.relayCPUReplicaGB.Median / c.relayCPUReplicaGB.Median,
			primaryVsChained:  pt.primaryCPUGB.Median / c.primaryCPUGB.Median,
			primaryVsDirect:   pt.primaryCPUGB.Median / d.primaryCPUGB.Median,
		})
	}
	return out
}

func (r *results) fullSyncMarkdown(p printer, charts map[string]string) {
	f := r.fullsync
	if f == nil || len(f.points) == 0 {
		return
	}
	p("")
	p("## Full sync: N replicas attaching at once")
	p("")
	p("A primary filled with `DEBUG POPULATE` (%d MiB asked; %.0f MB of dataset) and", f.dataMB, f.points[0].dataMB)
	p("`repl-diskless-sync yes`, `repl-diskless-sync-delay %d`. N fresh replicas are told", f.delay)
	p("`REPLICAOF` at the same moment, of the primary (*direct*) or of a proxy already in sync with")
	p("it (*proxied*). Time is from `REPLICAOF` until every replica's offset equals the primary's;")
	p("forks are `total_forks` on the primary in that window (the proxy's own first sync, before")
	p("the window, is shown apart with the primary CPU it cost); primary CPU is in the same window")
	p("and includes the fork child (reaped before the second reading). Peak RSS is the process's")
	p("own (`VmHWM`), without the fork child's copy-on-write pages. The proxy's own sync is timed")
	p("from its start until its offset is the primary's, with the proxy's CPU until then (receiving")
	p("the snapshot, checking it and writing it to `dir`). %d run(s) per point.", r.opts.syncReps)
	p("")
	p("| N | topology | time to all synced s | primary forks | primary CPU s | primary peak RSS MB | proxy peak RSS MB | proxy's own sync: forks, primary CPU s | proxy's own sync: s, proxy CPU s | digests equal |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, pt := range f.points {
		own, ownSync, relayHWM := "–", "–", "–"
		if pt.point.topology == proxied {
			own, relayHWM = fmtS(pt.proxyForks, 0)+", "+fmtS(pt.proxyCPU, 2), fmtS(pt.relayHWM, 0)
			ownSync = fmtS(pt.ownSync, 2) + ", " + fmtS(pt.ownSyncCPU, 2)
		}
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |", pt.point.replicas, pt.point.topology,
			fmtS(pt.seconds, 2), fmtS(pt.forks, 0), fmtS(pt.primaryCPU, 2),
			fmtS(pt.primaryHWM, 0), relayHWM, own, ownSync, yesNo(pt.digestsSame))
	}
	p("")
	p("Goal: N simultaneous full syncs cost the primary at most one fork and under half the direct CPU.")
	r.walkMarkdown(p)
	for _, k := range []string{"fullsync-time", "fullsync-cpu"} {
		if c, ok := charts[k]; ok {
			p("")
			p("![%s](%s)", k, c)
		}
	}
}

func (r *results) restartMarkdown(p printer) {
	if len(r.restart) == 0 {
		return
	}
	x0 := r.restart[0]
	p("")
	p("## Restart: the proxy SIGKILLed under load")
	p("")
	p("Primary → replproxy → %d replicas, %d MiB/s of 1 KiB SETs on the primary, whose", x0.replicas, x0.rateMBs)
	p("`repl-backlog-size` is %s (about %d s of this load, far longer than the outage). The proxy is", restartBacklog, (256<<20)/(x0.rateMBs<<20))
	p("SIGKILLed and started again at once on the same port, dir and arguments; time is from the")
	p("kill until every replica's link is up and its offset has passed the primary's offset at the")
	p("restart. Full syncs: served by the primary (to the proxy) and by the restarted proxy (to")
	p("the replicas); partial resyncs: accepted by the restarted proxy from its replicas. %d runs", x0.runs)
	p("per variant.")
	p("")
	p("| proxy variant | time until streaming again s | full syncs on the primary | of which the proxy's own | of which snapshot fetches | full syncs by the proxy | partial resyncs by the proxy | digests equal |")
	p("|---|---:|---:|---:|---:|---:|---:|---|")
	for _, x := range r.restart {
		p("| %s | %s | %s | %s | %s | %s | %s | %s |", x.variant.name, fmtS(x.seconds, 3), fmtS(x.primaryFull, 0), fmtS(x.proxyOwn, 0),
			fmtS(x.proxyFetches, 0), fmtS(x.proxyFull, 0), fmtS(x.proxyPartial, 0), yesNo(x.digestsSame))
	}
	p("")
	p("Goal: 0 full syncs anywhere. With the stream log on, the restarted proxy reads its history")
	p("and snapshot back from its dir, continues from the primary by partial resync (the primary's")
	p("backlog covers the outage) and takes its replicas back by partial resync from the log. With")
	p("the log off it keeps its history in memory only, so it needs a full sync from the primary and")
	p("its replicas need one from it (the snapshot fetches are the proxy's side-link `REPLCONF")
	p("rdb-only` syncs for those replicas). Replicas retry their link once a second, which bounds")
	p("the time from below.")
}

func (r *results) profileMarkdown(p printer) {
	if len(r.profiles) == 0 {
		return
	}
	p("")
	p("## Profile")
	p("")
	p("Where the proxy's CPU goes (`-profile`: one more streaming run per point below, recorded while")
	p("the load ran and the replicas caught up). The proxy has no pprof endpoint, so it is sampled")
	p("with perf, which reads the Go symbols of the binary: first the share of each binary (the")
	p("kernel's is the system calls), then self time by symbol, entries above 0.5%%.")
	for _, x := range r.profiles {
		p("")
		p("### Proxied (%s), N=%d, %s values", x.point.variant, x.point.replicas, sizeName(x.point.valueSize))
		p("")
		if x.report == "" {
			p("No profile: %s.", x.skipped)
			continue
		}
		p("Relay %.2f s/replica-GB in the profiled run.", perGB(x.run.relayCPU, x.run.bytes*int64(x.point.replicas)))
		p("")
		p("    %s", x.command)
		p("")
		for _, l := range strings.Split(x.report, "\n") {
			p("%s", strings.TrimRight("    "+l, " "))
		}
	}
}

// summary is the few lines printed at the end of a run.
func (r *results) summary() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("")
	p("results written to %s", filepath.Join(r.opts.out, "RESULTS.md"))
	if e := r.engine; e != nil {
		var parts []string
		for _, row := range e.rows {
			parts = append(parts, fmt.Sprintf("%d: %.2f (%s allocs/op)", row.replicas, row.ratio, fmtS(row.fanoutAllocs, 0)))
		}
		p("engine / raw writev by replicas: %s", strings.Join(parts, ", "))
	}
	if s := r.streaming; s != nil {
		p("streaming, medians (CPU s/GB of stream; relay per replica-GB):")
		for _, g := range s.goals() {
			peer := variantNamed(g.variant).peer().name
			d, _ := s.find(streamPoint{direct, peer, g.replicas, g.valueSize})
			c, _ := s.find(streamPoint{chained, peer, g.replicas, g.valueSize})
			x, _ := s.find(streamPoint{proxied, g.variant, g.replicas, g.valueSize})
			p("  N=%d %-7s %-7s primary: direct %.2f chained %.2f proxied %.2f | relay: chained %.2f proxy %.2f (%.2f×)",
				g.replicas, sizeName(g.valueSize), g.variant, d.primaryCPUGB.Median, c.primaryCPUGB.Median, x.primaryCPUGB.Median,
				c.relayCPUReplicaGB.Median, x.relayCPUReplicaGB.Median, g.proxyVsChained)
		}
		for _, pt := range s.points {
			if pt.extraSyncs > 0 {
				p("  WARNING: %d resync(s) during the load at %s (%s) N=%d %s; lag %s s",
					pt.extraSyncs, pt.point.topology, pt.point.variant, pt.point.replicas, sizeName(pt.point.valueSize), fmtS(pt.lag, 1))
			}
		}
		for _, pt := range s.points {
			if pt.logRestarts > 0 {
				p("  WARNING: the stream log restarted %d time(s) for falling behind at %s (%s) N=%d %s: its cost is of a log that was down for part of the run",
					pt.logRestarts, pt.point.topology, pt.point.variant, pt.point.replicas, sizeName(pt.point.valueSize))
			}
		}
		for _, pt := range s.points {
			if pt.point.topology != direct {
				p("  send floor, N=%d %s %s %s: %s s/replica-GB, relay ÷ floor %s", pt.point.replicas, sizeName(pt.point.valueSize),
					pt.point.topology, variantLabel(pt.point), fmtS(pt.sendFloor, 2), fmtRatio(pt.relayCPUReplicaGB.Median, pt.sendFloor.Median))
			}
		}
		for _, c := range s.logCosts() {
			p("  stream log's cost, N=%d %s (%s): proxy %+.2f s/replica-GB (%.2f on, %.2f off), %+.2f s/GB of stream; %s floor dd %s + CRC-32C %s s/GB, log ÷ floor %s",
				c.replicas, sizeName(c.valueSize), c.variant, c.perReplicaGB, c.on, c.off, c.perStreamGB, floorKind(c.full()),
				fmtFloor(c.ddFloor), fmtFloor(c.crcFloor), fmtRatio(c.perStreamGB, c.floor()))
		}
		for _, c := range s.tlsCosts() {
			p("  TLS's cost, N=%d %s %-7s (%s): relay %s, primary %+.2f s/GB (%.2f plain, %.2f TLS)",
				c.replicas, sizeName(c.valueSize), c.topology, c.variant, c.relayText(), c.primaryTLS-c.primaryPlain, c.primaryPlain, c.primaryTLS)
		}
	}
	if r.paced != nil {
		r.paced.summary(p)
	}
	if f := r.fullsync; f != nil {
		p("full sync (%d MiB):", f.dataMB)
		for _, pt := range f.points {
			p("  N=%d %-7s %6.2f s, %s primary forks, primary CPU %.2f s", pt.point.replicas, pt.point.topology,
				pt.seconds.Median, fmtS(pt.forks, 0), pt.primaryCPU.Median)
		}
	}
	goalsCount(p, "streaming goals", r.streamingGoals())
	goalsCount(p, "paced and stream log goals", r.pacedAndLogGoals())
	for _, x := range r.restart {
		p("restart (%s): streaming again after %.3f s; full syncs: primary %s, proxy %s; partial resyncs by the proxy %s",
			x.variant.name, x.seconds.Median, fmtS(x.primaryFull, 0), fmtS(x.proxyFull, 0), fmtS(x.proxyPartial, 0))
	}
	if r.many != nil {
		r.many.summary(p)
	}
	for _, x := range r.profiles {
		if x.report == "" {
			p("profile (%s): skipped: %s", x.point.variant, x.skipped)
		}
	}
	if r.regions != nil {
		r.regions.summary(p)
	}
	return b.String()
}

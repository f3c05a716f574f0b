package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/replproxy/replproxy/bench/internal/probe"
)

// manyPlan is the section's line of -dry-run; available reads the memory
// the data is sized by.
func (o *options) manyPlan(available func() (int64, error)) string {
	data := fmt.Sprintf("%d MiB of data", o.manyDataMB)
	if avail, err := available(); err != nil {
		data += fmt.Sprintf(" (memory available unknown: %v)", err)
	} else if mb, note, err := manyData(o.manyDataMB, o.manyDataSet, o.manyN, avail); err != nil {
		data += fmt.Sprintf(" (the run would stop: %v)", err)
	} else if note != "" {
		data = fmt.Sprintf("%d MiB of data (%s)", mb, note)
	}
	return fmt.Sprintf("many: N=%d replicas, direct and proxied (log on) alternated, %d run(s) each: %s, all N told REPLICAOF at once; "+
		"%s SETs/s of %s from %d connections, %.0f s of warm-up then %d s measured, a probe subscriber on every replica; proxied: the proxy SIGKILLed under that load",
		o.manyN, o.manyReps, data, thousands(o.manyRate), sizeName(manyValueSize), o.pacedConns, pacedWarmup.Seconds(), o.manySeconds)
}

// sectionCommand is the command that runs section alone with o's other
// flags.
func (o *options) sectionCommand(section string) string {
	args := []string{"go run ."}
	for _, a := range o.args {
		if a != "-sections" && !strings.HasPrefix(a, "-sections=") {
			args = append(args, a)
		}
	}
	return strings.Join(append(args, "-sections="+section), " ")
}

// fmtDelays is a delay summary as p50 / p99 / p99.9 / max, in µs.
func fmtDelays(q probe.Quantiles) string {
	if q.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", q.P50, q.P99, q.P999, q.Max)
}

// proxiedOnly is a figure shown for the proxied rows alone.
func proxiedOnly(s manySummary, text string) string {
	if s.topology != proxied {
		return "–"
	}
	return text
}

func (r *results) manyMarkdown(p printer) {
	x := r.many
	if x == nil || len(x.points) == 0 {
		return
	}
	n := x.replicas
	p("")
	p("## Many replicas: %d redis-servers, direct and behind one proxy", n)
	p("")
	p("%d real redis-server replicas attached directly to the primary (*direct*) against the same %d", n, n)
	p("behind one replproxy (*proxied*: its defaults, stream log on), measured from outside. Each run")
	p("starts one topology's servers afresh and measures three parts on them in turn: %d run(s) per", x.reps)
	p("topology, direct and proxied alternated. The primary holds %d MiB of `DEBUG POPULATE` values", x.dataMB)
	p("(%.0f MB of dataset) and runs with `repl-diskless-sync yes`, `repl-diskless-sync-delay 0`,", x.points[0].dataMB)
	p("`client-output-buffer-limit replica 0 0 0` and `repl-backlog-size %s`; the proxy with its", restartBacklog)
	p("defaults. Digests are compared once, at the end of each run: the load writes keys of its own,")
	p("so a snapshot that went wrong in part 1 still shows there. The section took %s.", x.took.Round(time.Second))
	if x.dataNote != "" {
		p("")
		p("**Data:** %s.", x.dataNote)
	}
	p("")
	p("    %s", r.opts.sectionCommand("many"))

	p("")
	p("### 1. Full syncs at once")
	p("")
	p("| topology | first in sync s | all %d in sync s | primary forks | primary CPU s | proxy CPU s | all %d replicas CPU s | proxy's own sync: s, primary forks, primary CPU s | digests equal |", n, n)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, s := range x.points {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", s.topology, fmtS(s.firstSync, 2), fmtS(s.syncTime, 2), fmtS(s.forks, 0),
			fmtS(s.primarySyncCPU, 2), proxiedOnly(s, fmtS(s.relaySyncCPU, 2)), fmtS(s.replicasSync, 1),
			proxiedOnly(s, fmtS(s.ownSync, 2)+", "+fmtS(s.ownForks, 0)+", "+fmtS(s.ownPrimaryCPU, 2)), yesNo(s.digestsSame))
	}
	p("")
	p("- *first*, *all in sync*: from `REPLICAOF` (to the primary, or to the proxy), sent to all %d", n)
	p("  at the same moment, until the first and until every replica's link is up and its offset")
	p("  has reached the primary's at that moment (each replica asked every %d ms). Each replica", manyPoll.Milliseconds())
	p("  receives its copy into a file, fsyncs it and loads it (Redis's default, `repl-diskless-load")
	p("  disabled`), so on one machine the last one waits for all %d copies to cross its disk and", n)
	p("  its cores, whichever relay sends them. Direct, the first replica to ask gets a fork of its")
	p("  own and the others wait for the next fork, which serves them all; the proxy serves all of")
	p("  them at once from its copy on disk.")
	p("- *primary forks*, *primary CPU*: `total_forks` delta and the primary's CPU over that window,")
	p("  fork children included (reaped before the second reading). *proxy CPU*, *replicas CPU*: the")
	p("  proxy's, and the %d replicas' added up, over the same window.", n)
	p("- *proxy's own sync*: before the window, from the proxy's start until it is in sync, with the")
	p("  primary's forks and CPU for it.")

	p("")
	p("### 2. A paced load: %s SETs/s of %s", thousands(x.rate), sizeName(manyValueSize))
	p("")
	p("| topology | held /s | primary %% of a core | proxy %% of a core | all %d replicas %% of a core | harness %% of a core | first replica p50 / p99 / p99.9 / max µs | last replica p50 / p99 / p99.9 / max µs | messages | lost | resyncs |", n)
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range x.points {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d |", s.topology, fmtS(s.held, 0), fmtS(s.primaryCore, 1),
			proxiedOnly(s, fmtS(s.relayCore, 1)), fmtS(s.replicasCore, 0), fmtS(s.harnessCore, 1),
			fmtDelays(s.first), fmtDelays(s.last), s.last.N, s.lost, s.resyncs)
	}
	p("")
	p("- The load: %s SETs/s from %d connections, each writing its share every millisecond (as in", thousands(x.rate), x.conns)
	p("  the paced section), held %.0f s before a measured window of %d s; *held*: the SETs it wrote", pacedWarmup.Seconds(), x.seconds)
	p("  per second in the window.")
	p("- *%% of a core*: each one's CPU ÷ the window: the primary's, the proxy's, the %d replicas'", n)
	p("  added up, and the harness's (the load, the probe and its %d subscribers), which share the", n)
	p("  machine's %d cores: the replicas' delays are also the time each waits for a core.", r.machine.cores)
	p("- *first*, *last replica*: the probe of the delay section PUBLISHes its send time on the")
	p("  primary %d times a second and a subscriber on every replica records its arrival; a", int(1/delayProbeEvery.Seconds()))
	p("  message's delay to the first and to the last of the %d replicas, pooled over the runs.", n)
	p("- *messages*: probe messages in the windows that every replica delivered; *lost*: those some")
	p("  replica never did. *resyncs*: full syncs on the primary and full or partial resyncs by the")
	p("  proxy from the load's start to the window's end (should be 0).")

	var restarted []manySummary
	for _, s := range x.points {
		if s.topology == proxied {
			restarted = append(restarted, s)
		}
	}
	if len(restarted) == 0 {
		return
	}
	p("")
	p("### 3. The proxy SIGKILLed under that load")
	p("")
	p("| topology | first streaming again s | all %d streaming again s | full syncs on the primary | full syncs by the proxy | partial resyncs accepted by the proxy | digests equal |", n)
	p("|---|---:|---:|---:|---:|---:|---|")
	for _, s := range restarted {
		p("| %s | %s | %s | %s | %s | %s | %s |", s.topology, fmtS(s.firstBack, 2), fmtS(s.restart, 2), fmtS(s.primaryFull, 0), fmtS(s.proxyFull, 0),
			fmtS(s.proxyPartial, 0), yesNo(s.digestsSame))
	}
	p("")
	p("- Direct has no relay to kill: the table has the proxied runs only. After part 2, with the load")
	p("  still running, the proxy is SIGKILLed and started again at once on the same port, dir and")
	p("  arguments, as in the restart section.")
	p("- *first*, *all streaming again*: from the kill until the first and until every replica's link")
	p("  is up and its offset has passed the primary's offset at the restart. Replicas retry their")
	p("  link once a second, which bounds it from below.")
	p("- *full syncs on the primary* (to the proxy), *by the proxy* (to its replicas) and *partial")
	p("  resyncs accepted by the proxy*: counted from the kill until every replica has the whole")
	p("  stream, the load stopped. Goal: 0 full syncs, %d partial resyncs.", n)
}

// summary is the section's lines at the end of a run.
func (x *manyResult) summary(p printer) {
	p("many (N=%d, %d MiB, %s SETs/s; %s):", x.replicas, x.dataMB, thousands(x.rate), x.took.Round(time.Second))
	for _, s := range x.points {
		restart := ""
		if s.topology == proxied {
			restart = fmt.Sprintf("; restart %.2f s, full syncs %s + %s, partial %s", s.restart.Median,
				fmtS(s.primaryFull, 0), fmtS(s.proxyFull, 0), fmtS(s.proxyPartial, 0))
		}
		p("  %-7s synced in %.2f s, %s primary forks; primary %.1f%% of a core, last replica p50/p99 %.0f/%.0f µs%s",
			s.topology, s.syncTime.Median, fmtS(s.forks, 0), s.primaryCore.Median, s.last.P50, s.last.P99, restart)
		if s.resyncs > 0 || s.lost > 0 || !s.digestsSame {
			p("  WARNING: %s: %d resync(s) under the load, %d probe message(s) lost, digests equal: %s", s.topology, s.resyncs, s.lost, yesNo(s.digestsSame))
		}
		if s.held.N > 0 && s.held.Min < (1-pacedShortfall)*float64(x.rate) {
			p("  WARNING: %s: the load held %.0f SETs/s at worst, short of %d", s.topology, s.held.Min, x.rate)
		}
	}
}

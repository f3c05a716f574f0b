package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
	"github.com/replproxy/replproxy/bench/internal/load"
	"github.com/replproxy/replproxy/bench/internal/probe"
	"github.com/replproxy/replproxy/bench/internal/procstat"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// The many section: N real redis-server replicas (a hundred by default)
// attached directly to the primary, against the same N behind one proxy
// (its defaults, stream log on), all measured from outside. Each run
// starts one topology's servers and measures three parts on them, one
// after the other, because starting a hundred replicas and filling them
// is the dear part of a run:
//
//  1. Full syncs at once: the primary holds data (DEBUG POPULATE), the
//     proxy (proxied) has made its own sync beforehand, and all N
//     replicas are told REPLICAOF at the same moment.
//  2. A paced load (load.Paced) for a measured window after a warm-up,
//     with the probe of the delay section: its send time PUBLISHed on the
//     primary, a subscriber on every replica, and the delay to the first
//     and to the last of the N.
//  3. Proxied only (direct has no relay to kill): the proxy SIGKILLed
//     under that same load and started again on its port and dir, as the
//     restart section does.
//
// Runs alternate direct and proxied, so that a disturbance of the machine
// falls on both.

// manyValueSize is the value size of the paced load's SETs.
const manyValueSize = 512

// manyPoll is how often the section asks each replica that has not yet
// reached an offset. cluster.WaitReached asks every replica every 5 ms:
// with a hundred of them that is a core's worth of INFO on a machine of
// 2 cores whose CPU the run measures; at this pace, a few percent.
const manyPoll = 100 * time.Millisecond

// The memory a run needs: each redis-server holding d bytes of DEBUG
// POPULATE's 1 KiB values uses about 1.5 d (jemalloc's 1280 B class for
// the value, the key and the dict entry; 64 MiB measured as a 100 MB RSS)
// and manyCopyBase of its own; a run holds manyCopies of it, and may take
// a manyMemShare of the memory available at its start, the rest being
// the machine's (it may be shared).
const (
	manyCopyBase = 8 << 20
	manyMemShare = 0.5
)

// manyCopies are the copies of the data a run holds with n replicas: the
// replicas, the primary, and one more for the proxy, the fork child's
// copy-on-write pages and the harness.
func manyCopies(n int) int { return n + 2 }

// manyFootprint is the memory a run with n replicas and dataMB MiB of
// data needs, in bytes.
func manyFootprint(dataMB, n int) int64 {
	return int64(manyCopies(n)) * ((int64(dataMB)<<20)*3/2 + manyCopyBase)
}

// manyData is the MiB of data a run puts on the primary, with available
// bytes of memory: the default (set false) halved until the run fits,
// with a note saying so; a size given with -many-data-mb that does not
// fit is an error, since it would push the machine into swap or the OOM
// killer.
func manyData(asked int, set bool, n int, available int64) (mb int, note string, err error) {
	budget := int64(manyMemShare * float64(available))
	fits := func(mb int) bool { return manyFootprint(mb, n) <= budget }
	if fits(asked) {
		return asked, "", nil
	}
	if set {
		return 0, "", fmt.Errorf("-many-data-mb %d: %d copies of it need about %.1f GB, more than %.0f%% of the %.1f GB available; ask less, or fewer -many-replicas",
			asked, manyCopies(n), float64(manyFootprint(asked, n))/1e9, 100*manyMemShare, float64(available)/1e9)
	}
	mb = asked
	for mb > 1 && !fits(mb) {
		mb /= 2
	}
	if !fits(mb) {
		return 0, "", fmt.Errorf("%d replicas do not fit in %.0f%% of the %.1f GB available even with 1 MiB of data each",
			n, 100*manyMemShare, float64(available)/1e9)
	}
	return mb, fmt.Sprintf("%d MiB asked: its %d copies (about %.1f GB) would not fit in %.0f%% of the %.1f GB of memory available at the start, so halved until they do",
		asked, manyCopies(n), float64(manyFootprint(asked, n))/1e9, 100*manyMemShare, float64(available)/1e9), nil
}

// parseMemAvailable returns MemAvailable, in bytes, from the text of
// /proc/meminfo.
func parseMemAvailable(meminfo string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(meminfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemAvailable" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, errors.New("no MemAvailable in kB in /proc/meminfo")
}

// memAvailable is the memory the kernel says it can give without swapping.
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(string(b))
}

// manyRun is one run of one topology: the figures of its three parts.
type manyRun struct {
	topology topology
	dataMB   float64 // used_memory_dataset of the primary

	// Part 1. The window is from REPLICAOF until every replica's link is
	// up and it has the offset the primary had at REPLICAOF.
	syncTime       time.Duration
	firstSync      time.Duration // REPLICAOF until the first replica was there
	replicasSync   time.Duration // all N replicas' CPU over the window, added up
	forks          int64         // total_forks delta on the primary over the window
	primarySyncCPU time.Duration // the primary's, over the window, fork children included
	relaySyncCPU   time.Duration // the proxy's, over the window
	ownSync        time.Duration // the proxy's own sync: from its start until in sync
	ownForks       int64         // the primary's forks for it
	ownPrimaryCPU  time.Duration // the primary's CPU for it, fork children included

	// Part 2, over the measured window.
	window               time.Duration
	commands             int64 // written by the load
	primaryCPU, relayCPU time.Duration
	replicasCPU          time.Duration // all N replicas' CPU added up
	harnessCPU           time.Duration // this process: the load, the probe and its N subscribers
	delays               probe.Delays
	resyncs              int64 // full syncs on the primary, full and partial by the proxy, from the load's start to the window's end

	// Part 3 (proxied).
	restart      time.Duration // SIGKILL until every replica has passed the primary's offset at the restart
	firstBack    time.Duration // SIGKILL until the first one had
	primaryFull  int64         // full syncs the primary served (to the proxy)
	proxyFull    int64         // full syncs the restarted proxy served
	proxyPartial int64         // partial resyncs the restarted proxy accepted

	digestsSame bool // at the end of the run
}

// manyLoad is the paced load of the section on addr.
func manyLoad(o *options, addr string) load.Paced {
	return load.Paced{Addr: addr, Rate: o.manyRate, Conns: o.pacedConns, ValueSize: manyValueSize, Ring: pacedRing}
}

// manyOnce runs the three parts on fresh servers of topology t.
func manyOnce(ctx context.Context, o *options, proxyBin string, t topology, dataMB int) (run manyRun, err error) {
	run.topology = t
	c, err := newCluster(o, proxyBin, logOn)
	if err != nil {
		return run, err
	}
	defer closeCluster(c, &err)
	s := &servers{}
	// The backlog covers the proxy's outage in part 3 many times over at
	// the paced rate; direct gets it too, so that the primaries differ by
	// their replicas only.
	if s.primary, err = startPrimary(ctx, c, 0, append(noReplicaLimit(), "--repl-backlog-size", restartBacklog)...); err != nil {
		return run, err
	}
	keys := (int64(dataMB) << 20) / syncValueSize
	if err := s.primary.Client().Do(ctx, "DEBUG", "POPULATE", keys, "bench", syncValueSize).Err(); err != nil {
		return run, fmt.Errorf("DEBUG POPULATE: %w", err)
	}
	data, err := s.primary.InfoInt(ctx, "memory", "used_memory_dataset")
	if err != nil {
		return run, err
	}
	run.dataMB = float64(data) / 1e6
	if err := manyFullSyncs(ctx, o, c, s, &run); err != nil {
		return run, fmt.Errorf("full syncs: %w", err)
	}

	l, err := manyLoad(o, s.primary.Addr()).Start(ctx)
	if err != nil {
		return run, err
	}
	defer l.Stop() // on error; Stop may be called again
	if err := manyPaced(ctx, o, s, l, &run); err != nil {
		return run, fmt.Errorf("paced load: %w", err)
	}
	var full0 int64
	if t == proxied {
		if full0, err = manyRestart(ctx, s, &run); err != nil {
			return run, fmt.Errorf("restart: %w", err)
		}
	}
	if _, err := l.Stop(); err != nil {
		return run, fmt.Errorf("load: %w", err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...); err != nil {
		return run, err
	}
	if t == proxied {
		// Read once every replica has the whole stream, so that a late
		// full sync counts too.
		if err := readRestartCounters(ctx, s, full0, &run); err != nil {
			return run, err
		}
	}
	// Once, at the end: the load writes its own keys only, so a snapshot
	// that went wrong in part 1 still shows here, and so does a stream
	// that went wrong in part 2 or 3.
	began := time.Now()
	if run.digestsSame, err = digestsEqual(ctx, s); err != nil {
		return run, err
	}
	logf("many %s: digests compared in %.1f s", t, time.Since(began).Seconds())
	return run, nil
}

// manyFullSyncs is part 1: the proxy's own sync first (proxied), then N
// fresh replicas told REPLICAOF at once, timed until all are in sync.
func manyFullSyncs(ctx context.Context, o *options, c *cluster.Cluster, s *servers, run *manyRun) error {
	forks0, err := s.primary.InfoInt(ctx, "stats", "total_forks")
	if err != nil {
		return err
	}
	cpuAttach, err := s.primary.CPU()
	if err != nil {
		return err
	}
	if run.topology == proxied {
		start := time.Now()
		if s.relay, err = startRelay(ctx, c, proxied, logOn, s.primary); err != nil {
			return err
		}
		run.ownSync = time.Since(start)
	}
	started := time.Now()
	if s.replicas, err = startReplicas(ctx, c, o.manyN, nil); err != nil {
		return err
	}
	logf("many %s: %d replicas started in %.1f s", run.topology, o.manyN, time.Since(started).Seconds())
	if err := waitNoChild(ctx, s.primary); err != nil {
		return err
	}
	forks1, err := s.primary.InfoInt(ctx, "stats", "total_forks")
	if err != nil {
		return err
	}
	cpu0, err := s.primary.CPU()
	if err != nil {
		return err
	}
	run.ownForks, run.ownPrimaryCPU = forks1-forks0, cpu0.Sub(cpuAttach).Total()
	relay0, err := relayCPU(s)
	if err != nil {
		return err
	}
	replicas0, err := replicasCPU(s)
	if err != nil {
		return err
	}
	target, err := s.primary.Offset(ctx)
	if err != nil {
		return err
	}

	start := time.Now()
	if err := replicaOfAll(ctx, s.replicas, s.upstream()); err != nil {
		return err
	}
	if run.firstSync, run.syncTime, err = waitAllReached(ctx, target, s.replicas, start); err != nil {
		return err
	}

	// The fork children's CPU reaches cutime/cstime once the primary has
	// reaped them.
	if err := waitNoChild(ctx, s.primary); err != nil {
		return err
	}
	cpu1, err := s.primary.CPU()
	if err != nil {
		return err
	}
	relay1, err := relayCPU(s)
	if err != nil {
		return err
	}
	replicas1, err := replicasCPU(s)
	if err != nil {
		return err
	}
	run.replicasSync = replicas1 - replicas0
	forks2, err := s.primary.InfoInt(ctx, "stats", "total_forks")
	if err != nil {
		return err
	}
	run.forks, run.primarySyncCPU, run.relaySyncCPU = forks2-forks1, cpu1.Sub(cpu0).Total(), relay1.Sub(relay0).Total()
	return nil
}

// relayCPU is the proxy's CPU, zero for direct.
func relayCPU(s *servers) (procstat.CPU, error) {
	if s.relay == nil {
		return procstat.CPU{}, nil
	}
	return s.relay.CPU()
}

// replicasCPU is the CPU of all the replicas, added up.
func replicasCPU(s *servers) (time.Duration, error) {
	var total time.Duration
	for _, r := range s.replicas {
		c, err := r.CPU()
		if err != nil {
			return 0, err
		}
		total += c.Total()
	}
	return total, nil
}

// manyMark is what part 2 reads at each end of its window.
type manyMark struct {
	at                               time.Time
	seq                              int
	progress                         load.PacedStats
	primaryCPU, relayCPU, harnessCPU procstat.CPU
	replicasCPU                      time.Duration
}

func readManyMark(s *servers, l *load.PacedRun, pub *probe.PublisherRun) (m manyMark, err error) {
	m.at, m.seq, m.progress = time.Now(), pub.Sent(), l.Progress()
	if m.primaryCPU, err = s.primary.CPU(); err != nil {
		return m, err
	}
	if m.relayCPU, err = relayCPU(s); err != nil {
		return m, err
	}
	if m.replicasCPU, err = replicasCPU(s); err != nil {
		return m, err
	}
	m.harnessCPU, err = procstat.ReadCPU(os.Getpid())
	return m, err
}

// manyPaced is part 2: the load l is running; a subscriber on every
// replica and the probe on the primary measure the delays over the
// window, after a warm-up. The load keeps running for part 3.
func manyPaced(ctx context.Context, o *options, s *servers, l *load.PacedRun, run *manyRun) error {
	syncs0, err := resyncs(ctx, s)
	if err != nil {
		return err
	}
	clock := probe.NewClock()
	subs := make([]*probe.Subscriber, 0, len(s.replicas))
	defer func() {
		for _, sub := range subs {
			sub.Close()
		}
	}()
	for _, r := range s.replicas {
		sub, err := probe.Subscribe(ctx, r.Addr(), clock)
		if err != nil {
			return err
		}
		subs = append(subs, sub)
	}
	pub, err := probe.Publisher{Addr: s.primary.Addr(), Every: delayProbeEvery, Clock: clock}.Start(ctx)
	if err != nil {
		return err
	}
	defer pub.Stop() // on error; Stop may be called again
	if err := waitLoad(ctx, l, pacedWarmup); err != nil {
		return err
	}
	m0, err := readManyMark(s, l, pub)
	if err != nil {
		return err
	}
	if err := waitLoad(ctx, l, time.Duration(o.manySeconds)*time.Second); err != nil {
		return err
	}
	m1, err := readManyMark(s, l, pub)
	if err != nil {
		return err
	}
	sent, err := pub.Stop()
	if err != nil {
		return err
	}
	syncs1, err := resyncs(ctx, s)
	if err != nil {
		return err
	}
	// Every replica has applied the stream up to the last probe message
	// once it has the primary's offset of now: what a subscriber has not
	// received by then it lost (a replica delivers a message as it
	// applies it), which the run reports.
	off, err := s.primary.Offset(ctx)
	if err != nil {
		return err
	}
	if _, _, err := waitAllReached(ctx, off, s.replicas, time.Now()); err != nil {
		return fmt.Errorf("catching up: %w", err)
	}
	if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
		return err
	}
	got := make([]map[int]time.Duration, 0, len(subs))
	for _, sub := range subs {
		got = append(got, sub.Close())
	}
	subs = nil
	run.window = m1.at.Sub(m0.at)
	run.commands = m1.progress.Commands - m0.progress.Commands
	run.primaryCPU = m1.primaryCPU.Sub(m0.primaryCPU).Total()
	run.relayCPU = m1.relayCPU.Sub(m0.relayCPU).Total()
	run.replicasCPU = m1.replicasCPU - m0.replicasCPU
	run.harnessCPU = m1.harnessCPU.Sub(m0.harnessCPU).Total()
	run.delays = probe.Measure(sent, m0.seq, m1.seq, got)
	run.resyncs = syncs1 - syncs0
	return nil
}

// manyRestart is part 3: the proxy SIGKILLed under the running load and
// started again on the same port, dir and arguments, timed until every
// replica's link is up and it has passed the primary's offset at the
// restart. It returns the primary's sync_full before the kill.
func manyRestart(ctx context.Context, s *servers, run *manyRun) (full0 int64, err error) {
	if full0, err = s.primary.InfoInt(ctx, "stats", "sync_full"); err != nil {
		return 0, err
	}
	start := time.Now()
	s.relay.Kill()
	if err := s.relay.Restart(ctx); err != nil {
		return 0, err
	}
	off, err := s.primary.Offset(ctx)
	if err != nil {
		return 0, err
	}
	if run.firstBack, run.restart, err = waitAllReached(ctx, off, s.replicas, start); err != nil {
		return 0, fmt.Errorf("replicas after the restart: %w", err)
	}
	return full0, nil
}

// readRestartCounters reads part 3's counters: the primary's full syncs
// since full0, and the restarted proxy's (its counters start from zero).
func readRestartCounters(ctx context.Context, s *servers, full0 int64, run *manyRun) error {
	full1, err := s.primary.InfoInt(ctx, "stats", "sync_full")
	if err != nil {
		return err
	}
	run.primaryFull = full1 - full0
	f, err := s.relay.Info(ctx, "stats")
	if err != nil {
		return err
	}
	for field, dst := range map[string]*int64{"sync_full": &run.proxyFull, "sync_partial_ok": &run.proxyPartial} {
		if *dst, err = strconv.ParseInt(f[field], 10, 64); err != nil {
			return fmt.Errorf("proxy INFO stats %s = %q", field, f[field])
		}
	}
	return nil
}

// waitAllReached waits until every replica's link is up and its
// master_repl_offset is at least target, and returns the time from since
// until the first replica was seen there and until the last was. Each
// replica is asked by a goroutine of its own, every manyPoll until it is
// there: a replica writing or loading a snapshot may not answer for many
// seconds (a hundred of them fsyncing their copies at once block in the
// disk), and must hold up neither the reading of the others nor, when it
// answers, the time its answer is seen. An INFO that times out means "not
// yet".
func waitAllReached(ctx context.Context, target int64, replicas []*cluster.Process, since time.Time) (first, last time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, linkTimeout)
	defer cancel()
	at := make([]time.Duration, len(replicas))
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() {
			if errs[i] = waitReached(ctx, target, r); errs[i] == nil {
				at[i] = time.Since(since)
			}
		})
	}
	wg.Wait()
	failed := 0
	for _, e := range errs {
		if e != nil {
			err = cmp.Or(err, e)
			failed++
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%d of %d replicas: %w", failed, len(replicas), err)
	}
	return slices.Min(at), slices.Max(at), nil
}

// waitReached is waitAllReached for one replica.
func waitReached(ctx context.Context, target int64, r *cluster.Process) error {
	for {
		f, err := r.Info(ctx, "replication")
		var netErr net.Error
		switch {
		case err == nil:
			off, _ := strconv.ParseInt(f["master_repl_offset"], 10, 64)
			if f["master_link_status"] == "up" && off >= target {
				return nil
			}
		case ctx.Err() != nil:
			return fmt.Errorf("%s has not reached offset %d: %w", r.Name, target, ctx.Err())
		case !errors.As(err, &netErr) || !netErr.Timeout():
			return err
		}
		if err := sleepCtx(ctx, manyPoll); err != nil {
			return fmt.Errorf("%s has not reached offset %d: %w", r.Name, target, err)
		}
	}
}

// manySummary is one topology's runs summarised.
type manySummary struct {
	topology topology
	runs     int
	dataMB   float64 // median

	syncTime, forks, primarySyncCPU, relaySyncCPU sample.Summary // seconds, count, seconds, seconds
	firstSync, replicasSync                       sample.Summary // seconds
	ownSync, ownForks, ownPrimaryCPU              sample.Summary // proxied: seconds, count, seconds

	held, primaryCore, relayCore sample.Summary // SETs/s, % of a core, % of a core
	replicasCore, harnessCore    sample.Summary // % of a core
	first, last                  probe.Quantiles
	lost                         int
	resyncs                      int64 // summed

	restart, primaryFull, proxyFull, proxyPartial sample.Summary // proxied: seconds, counts
	firstBack                                     sample.Summary // proxied: seconds

	digestsSame bool // in every run
}

// summariseMany summarises the runs of topology t: medians and ranges of
// the per-run figures, and the delays of every probe message of every run
// pooled.
func summariseMany(t topology, runs []manyRun) manySummary {
	s := manySummary{topology: t, runs: len(runs), digestsSame: true}
	var data, syncTime, forks, pcpu, rcpu, own, ownForks, ownCPU, held, pcore, rcore, repCore, harnessCore, restart, pfull, xfull, xpart []float64
	var first, last, firstSync, repSync, firstBack []float64
	for _, r := range runs {
		data = append(data, r.dataMB)
		syncTime = append(syncTime, r.syncTime.Seconds())
		firstSync = append(firstSync, r.firstSync.Seconds())
		repSync = append(repSync, r.replicasSync.Seconds())
		forks = append(forks, float64(r.forks))
		pcpu = append(pcpu, r.primarySyncCPU.Seconds())
		held = append(held, perSecond(r.commands, r.window))
		pcore = append(pcore, pctCore(r.primaryCPU, r.window))
		repCore = append(repCore, pctCore(r.replicasCPU, r.window))
		harnessCore = append(harnessCore, pctCore(r.harnessCPU, r.window))
		first, last = append(first, r.delays.First...), append(last, r.delays.Last...)
		s.lost += r.delays.Lost
		s.resyncs += r.resyncs
		s.digestsSame = s.digestsSame && r.digestsSame
		if t != proxied {
			continue
		}
		rcpu = append(rcpu, r.relaySyncCPU.Seconds())
		own = append(own, r.ownSync.Seconds())
		ownForks = append(ownForks, float64(r.ownForks))
		ownCPU = append(ownCPU, r.ownPrimaryCPU.Seconds())
		rcore = append(rcore, pctCore(r.relayCPU, r.window))
		restart = append(restart, r.restart.Seconds())
		firstBack = append(firstBack, r.firstBack.Seconds())
		pfull = append(pfull, float64(r.primaryFull))
		xfull = append(xfull, float64(r.proxyFull))
		xpart = append(xpart, float64(r.proxyPartial))
	}
	s.dataMB = sample.Of(data).Median
	s.syncTime, s.forks, s.primarySyncCPU, s.relaySyncCPU = sample.Of(syncTime), sample.Of(forks), sample.Of(pcpu), sample.Of(rcpu)
	s.firstSync, s.replicasSync = sample.Of(firstSync), sample.Of(repSync)
	s.ownSync, s.ownForks, s.ownPrimaryCPU = sample.Of(own), sample.Of(ownForks), sample.Of(ownCPU)
	s.held, s.primaryCore, s.relayCore = sample.Of(held), sample.Of(pcore), sample.Of(rcore)
	s.replicasCore, s.harnessCore = sample.Of(repCore), sample.Of(harnessCore)
	s.first, s.last = probe.Summarise(first), probe.Summarise(last)
	s.restart, s.primaryFull, s.proxyFull, s.proxyPartial = sample.Of(restart), sample.Of(pfull), sample.Of(xfull), sample.Of(xpart)
	s.firstBack = sample.Of(firstBack)
	return s
}

// manyResult is the whole section.
type manyResult struct {
	replicas  int
	dataMB    int    // put on the primary
	dataNote  string // why it is less than asked; "" when it is not
	available int64  // bytes of memory available at the start
	rate      int    // SETs/s
	conns     int
	seconds   int // each run's measured window
	reps      int
	took      time.Duration // the whole section
	points    []manySummary // direct, then proxied
}

// manyTopologies are the section's topologies, in the order each
// repetition runs them.
var manyTopologies = []topology{direct, proxied}

func runMany(ctx context.Context, o *options, proxyBin string) (*manyResult, error) {
	began := time.Now()
	available, err := memAvailable()
	if err != nil {
		return nil, fmt.Errorf("many: %w", err)
	}
	dataMB, note, err := manyData(o.manyDataMB, o.manyDataSet, o.manyN, available)
	if err != nil {
		return nil, fmt.Errorf("many: %w", err)
	}
	if note != "" {
		logf("many: %d MiB of data: %s", dataMB, note)
	}
	res := &manyResult{replicas: o.manyN, dataMB: dataMB, dataNote: note, available: available,
		rate: o.manyRate, conns: o.pacedConns, seconds: o.manySeconds, reps: o.manyReps}
	runs := map[topology][]manyRun{}
	for rep := 1; rep <= o.manyReps; rep++ {
		for _, t := range manyTopologies {
			start := time.Now()
			r, err := manyOnce(ctx, o, proxyBin, t, dataMB)
			if err != nil {
				return nil, fmt.Errorf("many %s, %d replicas, run %d: %w", t, o.manyN, rep, err)
			}
			last := probe.Summarise(r.delays.Last)
			logf("many run %d %-7s N=%d (%.0f s): synced in %.2f s, %d forks, primary CPU %.2f s; at %.0f/s primary %.1f%% proxy %.1f%%, last replica p50/p99 %.0f/%.0f µs, lost %d; restart %.2f s, full syncs %d+%d, partial %d; digests equal %s",
				rep, t, o.manyN, time.Since(start).Seconds(), r.syncTime.Seconds(), r.forks, r.primarySyncCPU.Seconds(),
				perSecond(r.commands, r.window), pctCore(r.primaryCPU, r.window), pctCore(r.relayCPU, r.window),
				last.P50, last.P99, r.delays.Lost, r.restart.Seconds(), r.primaryFull, r.proxyFull, r.proxyPartial, yesNo(r.digestsSame))
			runs[t] = append(runs[t], r)
		}
	}
	for _, t := range manyTopologies {
		res.points = append(res.points, summariseMany(t, runs[t]))
	}
	res.took = time.Since(began)
	return res, nil
}

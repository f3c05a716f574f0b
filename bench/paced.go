package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
	"github.com/replproxy/replproxy/bench/internal/load"
	"github.com/replproxy/replproxy/bench/internal/procstat"
	"github.com/replproxy/replproxy/bench/internal/sample"
	"github.com/replproxy/replproxy/internal/cachedata"
)

// The paced section: the relays at the rates production
// primaries run at, far below saturation. A fixed total rate of SETs from
// many connections, each writing its share every millisecond (load.Paced),
// reaches the relay as a few thousand small packets per second, where its
// cost is wake-ups rather than bytes. Each run holds the rate for a warm-up
// and then a measured window; the relay's CPU, context switches and
// system calls, and the primary's CPU, are read at both ends of the
// window. The idle row measures the relays with no writes at all.

// pacedWarmup is the load's time before the measured window opens (and the
// idle row's time after the servers are up).
const pacedWarmup = 2 * time.Second

// pacedShortfall is how far the rate the load held in the window may fall
// short of the rate asked before the run fails: beyond it the harness,
// not the relay, would be what the row measured.
const pacedShortfall = 0.03

// idleReplicas is the idle row's replicas.
const idleReplicas = 4

// cacheSize is the value size that names the cache-like mix in
// -paced-sizes ("cache"): internal/cachedata's commands instead of SETs of
// one size.
const cacheSize = -2

// pacedRing is the SETs built per load connection, to as many keys.
const pacedRing = 64

// cacheRing is the cache-like commands built per load connection (about
// 440 B each on average), written again and again.
const cacheRing = 1024

// pacedPoint is one row of the paced tables: one relay at one rate, value
// size and replica count. The idle rows have rate 0 and no value size.
type pacedPoint struct {
	rate      int // SETs per second (commands of the mix); 0: idle
	valueSize int // bytes, or cacheSize
	replicas  int
	topology  topology // chained or proxied
	variant   string   // plain (chained), log on or log off (proxied)
}

// pacedRelays are the relays every paced point measures, in the order each
// repetition runs them.
var pacedRelays = []struct {
	topology topology
	variant  variant
}{{chained, plain}, {proxied, logOn}, {proxied, logOff}}

// pacedPoints are the loaded points a run measures, in order: at every
// rate, size and N (the -paced-wide-replicas at the lowest rate only) the
// chained redis-server, the proxy with its log and without.
func pacedPoints(o *options) []pacedPoint {
	var out []pacedPoint
	if len(o.pacedRates) == 0 {
		return nil
	}
	lowest := slices.Min(o.pacedRates)
	for _, rate := range o.pacedRates {
		for _, size := range o.pacedSizes {
			ns := o.pacedN
			if rate == lowest {
				ns = append(slices.Clone(ns), o.pacedWideN...)
			}
			for _, n := range ns {
				for _, r := range pacedRelays {
					out = append(out, pacedPoint{rate, size, n, r.topology, r.variant.name})
				}
			}
		}
	}
	return out
}

// idlePoints are the idle rows: each relay, idleReplicas replicas, no writes.
func idlePoints() []pacedPoint {
	var out []pacedPoint
	for _, r := range pacedRelays {
		out = append(out, pacedPoint{replicas: idleReplicas, topology: r.topology, variant: r.variant.name})
	}
	return out
}

// pacedLoad is the load of a point: o's connections writing the point's
// rate of SETs of its value size into addr, or of the cache-like mix
// (each connection its own seeded generator, so every run writes the same
// commands).
func pacedLoad(o *options, addr string, pt pacedPoint) load.Paced {
	l := load.Paced{Addr: addr, Rate: pt.rate, Conns: o.pacedConns, ValueSize: pt.valueSize, Ring: pacedRing}
	if pt.valueSize == cacheSize {
		l.ValueSize, l.Ring = 0, cacheRing
		l.Next = func(c int) func([]byte) []byte { return cachedata.New(int64(37_000 + c)).Next }
	}
	return l
}

// pacedRun is one measured run: the figures of its window.
type pacedRun struct {
	window                        time.Duration
	commands                      int64 // written by the load in the window
	bytes                         int64 // stream: the primary's offset delta in the window
	relayCPU, primaryCPU, loadCPU time.Duration
	switches                      int64   // the relay's context switches, all its threads
	syscalls                      int64   // the relay's read and write system calls
	missed                        float64 // the load's ticks without a wake-up of their own, share of the window's
	extraSyncs                    int64   // full syncs on the primary and resyncs by the relay, during the run
	digestsSame                   bool    // idle rows: not compared, true
}

func perSecond(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() }

// pctCore is CPU time as a percentage of one core over d.
func pctCore(cpu, d time.Duration) float64 { return 100 * cpu.Seconds() / d.Seconds() }

// pacedMark is what a run reads at each end of its window.
type pacedMark struct {
	at                   time.Time
	progress             load.PacedStats
	offset               int64
	relayCPU, primaryCPU procstat.CPU
	loadCPU              procstat.CPU
	switches             procstat.Switches
	io                   procstat.IO
}

// readMark reads the relay first (its /proc files only), then the primary
// and the harness, and the primary's offset last: the one reading that
// asks a server.
func readMark(ctx context.Context, s *servers, l *load.PacedRun) (m pacedMark, err error) {
	m.at = time.Now()
	if l != nil {
		m.progress = l.Progress()
	}
	if m.relayCPU, err = s.relay.CPU(); err != nil {
		return m, err
	}
	if m.switches, err = s.relay.Switches(); err != nil {
		return m, err
	}
	if m.io, err = s.relay.IO(); err != nil {
		return m, err
	}
	if m.primaryCPU, err = s.primary.CPU(); err != nil {
		return m, err
	}
	if m.loadCPU, err = procstat.ReadCPU(os.Getpid()); err != nil {
		return m, err
	}
	m.offset, err = s.primary.Offset(ctx)
	return m, err
}

// errLoadStopped is a paced load that ended before the run stopped it
// without saying why.
var errLoadStopped = errors.New("the load stopped early")

// waitLoad waits d, unless ctx is cancelled or the load l (nil: none)
// stops on its own, which is an error.
func waitLoad(ctx context.Context, l *load.PacedRun, d time.Duration) error {
	var done <-chan struct{}
	if l != nil {
		done = l.Done()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		if _, err := l.Stop(); err != nil {
			return err
		}
		return errLoadStopped
	case <-time.After(d):
		return nil
	}
}

// pacedOnce starts fresh servers, holds the point's load (none for an
// idle point) for pacedWarmup and then window, and reads the window.
func pacedOnce(ctx context.Context, o *options, proxyBin string, pt pacedPoint, window time.Duration) (run pacedRun, err error) {
	v := variantNamed(pt.variant)
	c, err := newCluster(o, proxyBin, v)
	if err != nil {
		return run, err
	}
	defer closeCluster(c, &err)
	s, err := startSteady(ctx, c, pt.topology, v, pt.replicas)
	if err != nil {
		return run, err
	}
	syncs0, err := resyncs(ctx, s)
	if err != nil {
		return run, err
	}
	var l *load.PacedRun
	if pt.rate > 0 {
		if l, err = pacedLoad(o, s.primary.Addr(), pt).Start(ctx); err != nil {
			return run, err
		}
		defer l.Stop() // on error
	}
	if err := waitLoad(ctx, l, pacedWarmup); err != nil {
		return run, err
	}
	m0, err := readMark(ctx, s, l)
	if err != nil {
		return run, err
	}
	if err := waitLoad(ctx, l, window); err != nil {
		return run, err
	}
	m1, err := readMark(ctx, s, l)
	if err != nil {
		return run, err
	}
	run = pacedRun{
		window:     m1.at.Sub(m0.at),
		commands:   m1.progress.Commands - m0.progress.Commands,
		missed:     m1.progress.Sub(m0.progress).Missed(),
		bytes:      m1.offset - m0.offset,
		relayCPU:   m1.relayCPU.Sub(m0.relayCPU).Total(),
		primaryCPU: m1.primaryCPU.Sub(m0.primaryCPU).Total(),
		loadCPU:    m1.loadCPU.Sub(m0.loadCPU).Total(),
		switches:   m1.switches.Sub(m0.switches).Total(),
		syscalls:   m1.io.Sub(m0.io).Total(),
	}
	if l != nil {
		if _, err := l.Stop(); err != nil {
			return run, fmt.Errorf("load: %w", err)
		}
		if held := perSecond(run.commands, run.window); held < (1-pacedShortfall)*float64(pt.rate) {
			return run, fmt.Errorf("the load held %.0f SETs/s in the window, %.1f%% short of %d (the harness could not keep the rate: too little CPU?)",
				held, 100*(1-held/float64(pt.rate)), pt.rate)
		}
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...); err != nil {
		return run, fmt.Errorf("catching up: %w", err)
	}
	syncs1, err := resyncs(ctx, s)
	if err != nil {
		return run, err
	}
	run.extraSyncs = syncs1 - syncs0
	run.digestsSame = true
	if l != nil {
		run.digestsSame, err = digestsEqual(ctx, s)
	}
	return run, err
}

// pacedSummary is a point's runs summarised.
type pacedSummary struct {
	point       pacedPoint
	runs        int
	held        sample.Summary // SETs/s the load wrote in the window
	mbps        sample.Summary // stream MB/s
	relayCPUGB  sample.Summary // relay CPU-s per replica-GB
	relayCore   sample.Summary // relay CPU, % of a core
	switches    sample.Summary // relay context switches per second
	syscalls    sample.Summary // relay read and write system calls per second
	primaryCore sample.Summary // primary CPU, % of a core
	loadCore    sample.Summary // the harness, % of a core
	missed      sample.Summary // the load's ticks without a wake-up of their own, %
	extraSyncs  int64          // summed over runs
	digestsSame bool           // in every run
}

func summarisePaced(p pacedPoint, runs []pacedRun) pacedSummary {
	s := pacedSummary{point: p, runs: len(runs), digestsSame: true}
	var held, mbps, gb, core, sw, calls, prim, ld, missed []float64
	for _, r := range runs {
		held = append(held, perSecond(r.commands, r.window))
		mbps = append(mbps, float64(r.bytes)/1e6/r.window.Seconds())
		if p.rate > 0 && r.bytes > 0 {
			gb = append(gb, perGB(r.relayCPU, r.bytes*int64(p.replicas)))
		}
		core = append(core, pctCore(r.relayCPU, r.window))
		sw = append(sw, perSecond(r.switches, r.window))
		calls = append(calls, perSecond(r.syscalls, r.window))
		prim = append(prim, pctCore(r.primaryCPU, r.window))
		ld = append(ld, pctCore(r.loadCPU, r.window))
		missed = append(missed, 100*r.missed)
		s.extraSyncs += r.extraSyncs
		s.digestsSame = s.digestsSame && r.digestsSame
	}
	s.held, s.mbps, s.relayCPUGB, s.relayCore = sample.Of(held), sample.Of(mbps), sample.Of(gb), sample.Of(core)
	s.switches, s.syscalls, s.primaryCore = sample.Of(sw), sample.Of(calls), sample.Of(prim)
	s.loadCore, s.missed = sample.Of(ld), sample.Of(missed)
	return s
}

// pacedResult is the whole section.
type pacedResult struct {
	seconds, idleSeconds int // each run's measured window
	conns                int // the load's connections
	points               []pacedSummary
	idle                 []pacedSummary
}

func (p pacedPoint) String() string {
	if p.rate == 0 {
		return fmt.Sprintf("idle N=%d %s", p.replicas, relayLabel(p))
	}
	return fmt.Sprintf("%s/s %s N=%d %s", thousands(p.rate), sizeName(p.valueSize), p.replicas, relayLabel(p))
}

func runPaced(ctx context.Context, o *options, proxyBin string) (*pacedResult, error) {
	order := append(pacedPoints(o), idlePoints()...)
	runs := map[pacedPoint][]pacedRun{}
	// Repetitions are the outer loop and the relays of a row run one after
	// another, as in streaming: a disturbance of the machine spreads over
	// all points, and the ratios compare runs minutes apart at most.
	for rep := 1; rep <= o.reps; rep++ {
		for _, pt := range order {
			window := time.Duration(o.pacedSeconds) * time.Second
			if pt.rate == 0 {
				window = time.Duration(o.idleSeconds) * time.Second
			}
			r, err := pacedOnce(ctx, o, proxyBin, pt, window)
			if err != nil {
				return nil, fmt.Errorf("paced %s, run %d: %w", pt, rep, err)
			}
			if pt.rate == 0 {
				logf("paced run %d %-36s relay %5.2f%% of a core %6.1f switches/s %6.1f calls/s", rep, pt,
					pctCore(r.relayCPU, r.window), perSecond(r.switches, r.window), perSecond(r.syscalls, r.window))
			} else {
				logf("paced run %d %-36s %6.0f/s %6.2f MB/s, relay %6.2f s/replica-GB %5.1f%% of a core %6.0f switches/s %6.0f calls/s, primary %5.1f%%, load %4.1f%% (%.1f%% ticks missed)",
					rep, pt, perSecond(r.commands, r.window), float64(r.bytes)/1e6/r.window.Seconds(), perGB(r.relayCPU, r.bytes*int64(pt.replicas)),
					pctCore(r.relayCPU, r.window), perSecond(r.switches, r.window), perSecond(r.syscalls, r.window),
					pctCore(r.primaryCPU, r.window), pctCore(r.loadCPU, r.window), 100*r.missed)
			}
			runs[pt] = append(runs[pt], r)
		}
	}
	res := &pacedResult{seconds: o.pacedSeconds, idleSeconds: o.idleSeconds, conns: o.pacedConns}
	for _, pt := range order {
		s := summarisePaced(pt, runs[pt])
		if pt.rate == 0 {
			res.idle = append(res.idle, s)
		} else {
			res.points = append(res.points, s)
		}
	}
	return res, nil
}

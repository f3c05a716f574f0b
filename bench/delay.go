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
	"github.com/replproxy/replproxy/bench/internal/probe"
	"github.com/replproxy/replproxy/bench/internal/procstat"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// The delay section: how long a write to the primary takes to reach a
// replica, directly, behind a chained redis-server and behind the proxy,
// all three fed by one primary under one load in the same run, so that
// the relays' delays differ only by what each relay adds. A probe
// PUBLISHes its send time on the primary at a fixed pace (PUBLISH is
// replicated, and each replica delivers it to its own subscribers as it
// applies the stream); a subscriber on every replica records its arrival.
// A relay's delay for one message is its last replica's (of N), the one a
// reader of every replica waits for. The load is paced SETs from many
// connections (as in the paced section) or, at rate 0, a saturating burst
// (load.Writer) for the window. Each relay's CPU and context switches are
// read over the same window. The proxy runs with the stream log on (its
// default) and with each -delay-windows setting of
// repl-read-coalesce-usec in turn, runs alternated.

// delayProbeEvery is the probe's pace: 100 messages a second, a few
// thousand per row over the repetitions, and nothing the stream notices.
const delayProbeEvery = 10 * time.Millisecond

// delayDefault names the proxy's default window in -delay-windows.
const delayDefault = "default"

// delayPoint is one row: a rate (0: a saturating burst), a value size, N
// replicas behind each relay, the proxy's window, and a variant of the
// servers (delayVariants; "" for the proxy's defaults on plain TCP).
type delayPoint struct {
	rate, valueSize, replicas int
	window                    string // delayDefault or microseconds
	variant                   string
}

// The delay section's variants, each measured at the smallest N and the
// default window: the proxy with its stream log off; every replication
// link over TLS (the forwarder then forwards the TLS bytes); and, in place
// of the one proxy, two in a row joined by a zstd-compressed link (proxy A
// → proxy B with repl-link-compression zstd → N replicas), as between two
// regions, at proxy A's default repl-link-compression-coalesce-usec and
// at zstdCoalesceUS (the setting that trades delay for the ratio of
// larger chunks).
const (
	delayLogOff    = "log-off"
	delayTLS       = "tls"
	delayZstd      = "zstd"
	delayZstdSlow  = "zstd-coalesced"
	zstdCoalesceUS = "2000"
)

var delayVariantNames = []string{delayLogOff, delayTLS, delayZstd, delayZstdSlow}

func (p delayPoint) String() string {
	load := "burst"
	if p.rate > 0 {
		load = thousands(p.rate) + "/s"
	}
	v := ""
	if p.variant != "" {
		v = " " + p.variant
	}
	return fmt.Sprintf("%s %s N=%d window %s%s", load, sizeName(p.valueSize), p.replicas, p.window, v)
}

// delayPoints are the rows a run measures, in order.
func delayPoints(o *options) []delayPoint {
	var out []delayPoint
	rates := slices.Clone(o.delayRates)
	if o.delayBurst {
		rates = append(rates, 0)
	}
	smallest := slices.Min(o.delayN)
	for _, rate := range rates {
		for _, size := range o.delaySizes {
			for _, n := range o.delayN {
				for _, w := range o.delayWindows {
					out = append(out, delayPoint{rate, size, n, w, ""})
				}
				if n == smallest {
					for _, v := range o.delayVariants {
						out = append(out, delayPoint{rate, size, n, delayDefault, v})
					}
				}
			}
		}
	}
	return out
}

// delayPath is one way from the primary to replicas: direct (one replica),
// through the chained redis-server or through the proxy.
type delayPath int

const (
	pathDirect delayPath = iota
	pathFloor            // through the forwarder (forward.go): N replicas, each its own connection to the primary
	pathChained
	pathProxy
	nPaths
)

var delayPaths = []delayPath{pathDirect, pathFloor, pathChained, pathProxy}

func (p delayPath) String() string { return [...]string{"direct", "floor", "chained", "proxy"}[p] }

// delayRun is one run's figures.
type delayRun struct {
	window   string // the proxy's repl-read-coalesce-usec, as CONFIG GET reads it
	rate     float64
	delays   [nPaths]probe.Delays  // by path
	cpu      [nPaths]time.Duration // by path: the relay's CPU (direct: the primary's)
	switches [nPaths]int64         // relays' context switches
	seconds  float64               // the window
	lost     int                   // probe messages some replica never got
}

// delayServers are one run's processes.
type delayServers struct {
	primary, forwarder, chained, proxy *cluster.Process
	proxyB                             *cluster.Process           // the zstd variant's second proxy; nil otherwise
	replicas                           [nPaths][]*cluster.Process // by path
}

func (s *delayServers) relay(p delayPath) *cluster.Process {
	return [...]*cluster.Process{s.primary, s.forwarder, s.chained, s.proxy}[p]
}

func (s *delayServers) all() []*cluster.Process {
	return slices.Concat(s.replicas[:]...)
}

// startDelay starts the primary, the relays and their replicas, and
// returns once every replica has applied one write; goFloor makes the
// floor the Go forwarder (forwardGoKind).
func startDelay(ctx context.Context, c *cluster.Cluster, pt delayPoint, goFloor bool) (*delayServers, error) {
	s := &delayServers{}
	var err error
	if s.primary, err = startPrimary(ctx, c, 0, noReplicaLimit()...); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	fwdArgs := []string{forwardFlag}
	if goFloor {
		fwdArgs = append(fwdArgs, "-go")
	}
	if s.forwarder, err = c.StartForwarder(ctx, "forwarder", self, s.primary, fwdArgs...); err != nil {
		return nil, err
	}
	v := logOn
	switch pt.variant {
	case delayLogOff:
		v = logOff
	case delayTLS:
		v = withTLS
	}
	if s.chained, err = startRelay(ctx, c, chained, v.peer(), s.primary, noReplicaLimit()...); err != nil {
		return nil, err
	}
	args := noReplicaLimit()
	if pt.window != delayDefault {
		args = append(args, "--repl-read-coalesce-usec", pt.window)
	}
	if pt.variant == delayZstdSlow {
		args = append(args, "--repl-link-compression-coalesce-usec", zstdCoalesceUS)
	}
	if s.proxy, err = startRelay(ctx, c, proxied, v, s.primary, args...); err != nil {
		return nil, err
	}
	upProxy := s.proxy
	if pt.variant == delayZstd || pt.variant == delayZstdSlow {
		if s.proxyB, err = c.StartProxy(ctx, "proxy-b", s.proxy, append(noReplicaLimit(), "--repl-link-compression", "zstd")...); err != nil {
			return nil, err
		}
		if err := cluster.WaitLinkUp(ctx, linkTimeout, s.proxyB); err != nil {
			return nil, fmt.Errorf("proxy B: %w", err)
		}
		upProxy = s.proxyB
	}
	for _, p := range delayPaths {
		n := pt.replicas
		if p == pathDirect {
			n = 1
		}
		up := s.relay(p)
		if p == pathProxy {
			up = upProxy
		}
		for i := range n {
			r, err := c.StartRedis(ctx, fmt.Sprintf("%s-replica%d", p, i+1), "--replicaof", "127.0.0.1", fmt.Sprint(up.ReplPort()))
			if err != nil {
				return nil, err
			}
			s.replicas[p] = append(s.replicas[p], r)
		}
	}
	if err := cluster.WaitLinkUp(ctx, linkTimeout, s.all()...); err != nil {
		return nil, err
	}
	if err := s.primary.Client().Set(ctx, "bench:warmup", "1", 0).Err(); err != nil {
		return nil, err
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.all()...); err != nil {
		return nil, err
	}
	return s, nil
}

// delayMark is what a run reads at each end of its window.
type delayMark struct {
	at       time.Time
	seq      int
	cpu      [nPaths]procstat.CPU
	switches [nPaths]procstat.Switches
}

func readDelayMark(s *delayServers, pub *probe.PublisherRun) (m delayMark, err error) {
	m.at, m.seq = time.Now(), pub.Sent()
	for _, p := range delayPaths {
		if m.cpu[p], err = s.relay(p).CPU(); err != nil {
			return m, err
		}
		if m.switches[p], err = s.relay(p).Switches(); err != nil {
			return m, err
		}
	}
	if s.proxyB != nil {
		// The pair is the relay: both proxies' CPU and switches.
		cpu, err := s.proxyB.CPU()
		if err != nil {
			return m, err
		}
		sw, err := s.proxyB.Switches()
		if err != nil {
			return m, err
		}
		m.cpu[pathProxy] = addCPU(m.cpu[pathProxy], cpu)
		m.switches[pathProxy].Voluntary += sw.Voluntary
		m.switches[pathProxy].Nonvoluntary += sw.Nonvoluntary
	}
	return m, nil
}

func addCPU(a, b procstat.CPU) procstat.CPU {
	a.User += b.User
	a.System += b.System
	a.ChildUser += b.ChildUser
	a.ChildSystem += b.ChildSystem
	return a
}

// delayLoad starts the point's load on addr: paced, or a burst (rate 0)
// until the returned stop is called.
func delayLoad(ctx context.Context, o *options, addr string, pt delayPoint) (stop func() error, err error) {
	if pt.rate > 0 {
		l, err := load.Paced{Addr: addr, Rate: pt.rate, Conns: o.pacedConns, ValueSize: pt.valueSize, Ring: pacedRing}.Start(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { _, err := l.Stop(); return err }, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := load.Writer{Addr: addr, ValueSize: pt.valueSize}.Run(ctx, 0)
		done <- err
	}()
	return func() error {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}, nil
}

// delayOnce measures one run of pt.
func delayOnce(ctx context.Context, o *options, proxyBin string, pt delayPoint) (run delayRun, err error) {
	cv := logOn
	if pt.variant == delayTLS {
		cv = withTLS
	}
	c, err := newCluster(o, proxyBin, cv)
	if err != nil {
		return run, err
	}
	defer closeCluster(c, &err)
	s, err := startDelay(ctx, c, pt, o.delayGoFloor)
	if err != nil {
		return run, err
	}
	cfg, err := s.proxy.Client().ConfigGet(ctx, "repl-read-coalesce-usec").Result()
	if err != nil {
		return run, fmt.Errorf("proxy: CONFIG GET: %w", err)
	}
	run.window = cfg["repl-read-coalesce-usec"]
	clock := probe.NewClock()
	var subs [nPaths][]*probe.Subscriber
	defer func() {
		for _, g := range subs {
			for _, sub := range g {
				sub.Close()
			}
		}
	}()
	for _, p := range delayPaths {
		for _, r := range s.replicas[p] {
			sub, err := probe.Subscribe(ctx, r.Addr(), clock)
			if err != nil {
				return run, err
			}
			subs[p] = append(subs[p], sub)
		}
	}
	stopLoad, err := delayLoad(ctx, o, s.primary.Addr(), pt)
	if err != nil {
		return run, err
	}
	loadStopped := false
	defer func() {
		if !loadStopped {
			stopLoad()
		}
	}()
	pub, err := probe.Publisher{Addr: s.primary.Addr(), Every: delayProbeEvery, Clock: clock}.Start(ctx)
	if err != nil {
		return run, err
	}
	if err := sleepCtx(ctx, pacedWarmup); err != nil {
		return run, err
	}
	m0, err := readDelayMark(s, pub)
	if err != nil {
		return run, err
	}
	if err := sleepCtx(ctx, time.Duration(o.delaySeconds)*time.Second); err != nil {
		return run, err
	}
	m1, err := readDelayMark(s, pub)
	if err != nil {
		return run, err
	}
	sent, err := pub.Stop()
	if err != nil {
		return run, err
	}
	loadStopped = true
	if err := stopLoad(); err != nil {
		return run, fmt.Errorf("load: %w", err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.all()...); err != nil {
		return run, fmt.Errorf("catching up: %w", err)
	}
	// Every replica has applied the whole stream: what a subscriber has
	// not received by now it lost (its delivery is the replica's, after
	// the stream is applied), which the run reports.
	time.Sleep(50 * time.Millisecond)
	run.seconds = m1.at.Sub(m0.at).Seconds()
	for _, p := range delayPaths {
		var got []map[int]time.Duration
		for _, sub := range subs[p] {
			got = append(got, sub.Close())
		}
		subs[p] = nil
		run.delays[p] = probe.Measure(sent, m0.seq, m1.seq, got)
		run.lost += run.delays[p].Lost
		run.cpu[p] = m1.cpu[p].Sub(m0.cpu[p]).Total()
		run.switches[p] = m1.switches[p].Sub(m0.switches[p]).Total()
	}
	return run, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// delaySummary is a row's runs pooled: the delays of every probe message
// of every run, and the per-run medians of CPU and switches.
type delaySummary struct {
	point    delayPoint
	window   string // the proxy's setting, as it reported it
	runs     int
	delays   [nPaths]probe.Quantiles // by path: the last replica's delay
	first    [nPaths]probe.Quantiles // by path: the first replica's
	core     [nPaths]sample.Summary  // % of a core: the primary (direct), the relays
	switches [nPaths]sample.Summary  // per second
	lost     int
}

// added is a path's median delay beyond the direct replica's, µs.
func (s delaySummary) added(p delayPath) float64 { return s.delays[p].P50 - s.delays[pathDirect].P50 }

func summariseDelay(pt delayPoint, runs []delayRun) delaySummary {
	s := delaySummary{point: pt, runs: len(runs)}
	for _, p := range delayPaths {
		var last, first, core, sw []float64
		for _, r := range runs {
			last = append(last, r.delays[p].Last...)
			first = append(first, r.delays[p].First...)
			core = append(core, pctCore(r.cpu[p], time.Duration(r.seconds*float64(time.Second))))
			sw = append(sw, float64(r.switches[p])/r.seconds)
		}
		s.delays[p], s.first[p] = probe.Summarise(last), probe.Summarise(first)
		s.core[p], s.switches[p] = sample.Of(core), sample.Of(sw)
	}
	for _, r := range runs {
		s.lost += r.lost
		s.window = r.window
	}
	return s
}

// delayResult is the whole section.
type delayResult struct {
	seconds int
	conns   int
	points  []delaySummary
}

func runDelay(ctx context.Context, o *options, proxyBin string) (*delayResult, error) {
	order := delayPoints(o)
	runs := map[delayPoint][]delayRun{}
	for rep := 1; rep <= o.reps; rep++ {
		for _, pt := range order {
			r, err := delayOnce(ctx, o, proxyBin, pt)
			if err != nil {
				return nil, fmt.Errorf("delay %s, run %d: %w", pt, rep, err)
			}
			d, fl, ch, px := probe.Summarise(r.delays[pathDirect].Last), probe.Summarise(r.delays[pathFloor].Last), probe.Summarise(r.delays[pathChained].Last), probe.Summarise(r.delays[pathProxy].Last)
			logf("delay run %d %-30s (window %s) p50/p99 µs: direct %4.0f/%5.0f floor %4.0f/%5.0f chained %4.0f/%5.0f proxy %4.0f/%5.0f; CPU %% floor %4.1f chained %4.1f proxy %4.1f; lost %d",
				rep, pt, r.window, d.P50, d.P99, fl.P50, fl.P99, ch.P50, ch.P99, px.P50, px.P99,
				pctCore(r.cpu[pathFloor], time.Duration(r.seconds*float64(time.Second))),
				pctCore(r.cpu[pathChained], time.Duration(r.seconds*float64(time.Second))),
				pctCore(r.cpu[pathProxy], time.Duration(r.seconds*float64(time.Second))), r.lost)
			runs[pt] = append(runs[pt], r)
		}
	}
	res := &delayResult{seconds: o.delaySeconds, conns: o.pacedConns}
	for _, pt := range order {
		res.points = append(res.points, summariseDelay(pt, runs[pt]))
	}
	return res, nil
}

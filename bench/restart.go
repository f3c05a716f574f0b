package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// restartValueSize is the value size of the write load during a restart.
const restartValueSize = 1024

// restartRun is one SIGKILL and restart of the proxy under write load.
type restartRun struct {
	elapsed      time.Duration // SIGKILL until every replica is streaming again
	primaryFull  int64         // full syncs the primary served (to the proxy)
	proxyFull    int64         // full syncs the restarted proxy served
	proxyPartial int64         // partial resyncs the restarted proxy accepted
	proxyOwn     int64         // of primaryFull: the proxy's own full syncs (upstream_full_syncs)
	proxyFetches int64         // of primaryFull: side-link snapshot fetches (snapshot_fetches)
	digestsSame  bool
}

type restartResult struct {
	variant      variant
	replicas     int
	rateMBs      int
	seconds      sample.Summary
	primaryFull  sample.Summary
	proxyFull    sample.Summary
	proxyPartial sample.Summary
	proxyOwn     sample.Summary
	proxyFetches sample.Summary
	runs         int
	digestsSame  bool
}

// restartBacklog is the primary's repl-backlog-size in the restart runs:
// at the restart load (16 MB/s by default) it holds about 16 s of stream,
// far more than the outage, so a proxy that comes back with its history
// can continue by partial resync.
const restartBacklog = "256mb"

// restartVariants are the proxy configurations the restart section runs:
// the stream log on (the default) and, with the log-off variant, off.
func restartVariants(o *options) []variant {
	if o.withLogOff {
		return []variant{logOn, logOff}
	}
	return []variant{logOn}
}

func runRestart(ctx context.Context, o *options, proxyBin string, v variant) (*restartResult, error) {
	res := &restartResult{variant: v, replicas: o.restartN, rateMBs: o.restartMBs, runs: o.restartRep, digestsSame: true}
	var secs, pf, xf, xp, own, fetch []float64
	for rep := 1; rep <= o.restartRep; rep++ {
		r, err := restartOnce(ctx, o, proxyBin, v)
		if err != nil {
			return nil, fmt.Errorf("restart (%s) run %d: %w", v.name, rep, err)
		}
		logf("restart (%s) run %d: streaming again after %.3f s; full syncs: primary %d, proxy %d; partial %d",
			v.name, rep, r.elapsed.Seconds(), r.primaryFull, r.proxyFull, r.proxyPartial)
		secs = append(secs, r.elapsed.Seconds())
		pf = append(pf, float64(r.primaryFull))
		xf = append(xf, float64(r.proxyFull))
		xp = append(xp, float64(r.proxyPartial))
		own = append(own, float64(r.proxyOwn))
		fetch = append(fetch, float64(r.proxyFetches))
		res.digestsSame = res.digestsSame && r.digestsSame
	}
	res.seconds, res.primaryFull, res.proxyFull, res.proxyPartial = sample.Of(secs), sample.Of(pf), sample.Of(xf), sample.Of(xp)
	res.proxyOwn, res.proxyFetches = sample.Of(own), sample.Of(fetch)
	return res, nil
}

// restartOnce runs primary → proxy → N replicas under a steady write load,
// SIGKILLs the proxy, starts it again on the same port, dir and arguments
// (so with its log on it finds its history and snapshot there), and
// measures until every replica's link is up and its offset has passed the
// primary's offset at the restart: the replicas stream again.
func restartOnce(ctx context.Context, o *options, proxyBin string, v variant) (run restartRun, err error) {
	c, err := newCluster(o, proxyBin, v)
	if err != nil {
		return run, err
	}
	defer closeCluster(c, &err)
	s := &servers{}
	if s.primary, err = startPrimary(ctx, c, 0, "--repl-backlog-size", restartBacklog); err != nil {
		return run, err
	}
	if s.relay, err = startRelay(ctx, c, proxied, v, s.primary); err != nil {
		return run, err
	}
	if s.replicas, err = startReplicas(ctx, c, o.restartN, s.relay); err != nil {
		return run, err
	}
	if err := cluster.WaitLinkUp(ctx, linkTimeout, s.replicas...); err != nil {
		return run, err
	}

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	w := streamLoad(fmt.Sprintf("127.0.0.1:%d", s.primary.Port), restartValueSize)
	w.Rate = int64(o.restartMBs) << 20
	loadErr := make(chan error, 1)
	go func() {
		_, err := w.Run(loadCtx, 0)
		loadErr <- err
	}()
	// Let the stream flow to every replica for a second before the kill.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return run, ctx.Err()
	}
	flowing, err := s.primary.Offset(ctx)
	if err != nil {
		return run, err
	}
	if err := cluster.WaitReached(ctx, linkTimeout, flowing, s.replicas...); err != nil {
		return run, err
	}
	full0, err := s.primary.InfoInt(ctx, "stats", "sync_full")
	if err != nil {
		return run, err
	}

	start := time.Now()
	s.relay.Kill()
	if err := s.relay.Restart(ctx); err != nil {
		return run, err
	}
	off, err := s.primary.Offset(ctx)
	if err != nil {
		return run, err
	}
	if err := cluster.WaitReached(ctx, linkTimeout, off, s.replicas...); err != nil {
		return run, fmt.Errorf("replicas after the restart: %w", err)
	}
	run.elapsed = time.Since(start)

	stopLoad()
	if err := <-loadErr; err != nil {
		return run, fmt.Errorf("load: %w", err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...); err != nil {
		return run, err
	}
	full1, err := s.primary.InfoInt(ctx, "stats", "sync_full")
	if err != nil {
		return run, err
	}
	run.primaryFull = full1 - full0
	info, err := s.relay.Info(ctx, "all")
	if err != nil {
		return run, err
	}
	for field, dst := range map[string]*int64{
		"sync_full": &run.proxyFull, "sync_partial_ok": &run.proxyPartial,
		"upstream_full_syncs": &run.proxyOwn, "snapshot_fetches": &run.proxyFetches,
	} {
		if *dst, err = strconv.ParseInt(info[field], 10, 64); err != nil {
			return run, fmt.Errorf("proxy INFO %s = %q", field, info[field])
		}
	}
	run.digestsSame, err = digestsEqual(ctx, s)
	return run, err
}

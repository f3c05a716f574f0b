package main

import (
	"context"
	"fmt"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
	"github.com/replproxy/replproxy/bench/internal/sample"
)

// syncValueSize is the value size DEBUG POPULATE fills the primary with.
const syncValueSize = 1024

// syncRun is one full-sync run: N replicas told REPLICAOF at once.
type syncRun struct {
	elapsed     time.Duration // REPLICAOF until every replica is in sync
	forks       int64         // total_forks delta on the primary in that window
	proxyForks  int64         // forks for the proxy's own first sync, before the window
	proxyCPU    time.Duration // primary CPU for the proxy's own first sync
	ownSync     time.Duration // the proxy's own first sync: from its start until its offset is the primary's
	ownSyncCPU  time.Duration // the proxy's CPU until then (receiving, checking and writing the snapshot)
	primaryCPU  time.Duration // in the window, fork children included
	primaryHWM  int64         // bytes
	relayHWM    int64         // bytes; 0 for direct
	dataMB      float64       // used_memory_dataset of the primary
	digestsSame bool
}

type syncPoint struct {
	topology topology
	replicas int
}

type syncSummary struct {
	point       syncPoint
	runs        int
	seconds     sample.Summary
	forks       sample.Summary
	proxyForks  sample.Summary
	proxyCPU    sample.Summary // seconds
	ownSync     sample.Summary // seconds
	ownSyncCPU  sample.Summary // seconds
	primaryCPU  sample.Summary // seconds
	primaryHWM  sample.Summary // MB
	relayHWM    sample.Summary // MB
	dataMB      float64
	digestsSame bool
}

type fullSyncResult struct {
	dataMB int // asked for
	delay  int // repl-diskless-sync-delay of the primary
	points []syncSummary
}

func runFullSync(ctx context.Context, o *options, proxyBin string) (*fullSyncResult, error) {
	res := &fullSyncResult{dataMB: o.syncMB, delay: o.syncDelay}
	runs := map[syncPoint][]syncRun{}
	var order []syncPoint
	for _, n := range o.syncN {
		for _, t := range []topology{direct, proxied} {
			order = append(order, syncPoint{t, n})
		}
	}
	for rep := 1; rep <= o.syncReps; rep++ {
		for _, p := range order {
			r, err := fullSyncOnce(ctx, o, proxyBin, p)
			if err != nil {
				return nil, fmt.Errorf("full sync %s, %d replicas, run %d: %w", p.topology, p.replicas, rep, err)
			}
			logf("full sync run %d %-7s N=%d: %.2f s, %d forks, primary CPU %.2f s, primary peak RSS %.0f MB",
				rep, p.topology, p.replicas, r.elapsed.Seconds(), r.forks, r.primaryCPU.Seconds(), float64(r.primaryHWM)/1e6)
			runs[p] = append(runs[p], r)
		}
	}
	for _, p := range order {
		s := syncSummary{point: p, runs: len(runs[p]), digestsSame: true}
		var secs, forks, pforks, pcpu, own, ownCPU, cpu, phwm, rhwm, data []float64
		for _, r := range runs[p] {
			secs = append(secs, r.elapsed.Seconds())
			forks = append(forks, float64(r.forks))
			pforks = append(pforks, float64(r.proxyForks))
			pcpu = append(pcpu, r.proxyCPU.Seconds())
			own = append(own, r.ownSync.Seconds())
			ownCPU = append(ownCPU, r.ownSyncCPU.Seconds())
			cpu = append(cpu, r.primaryCPU.Seconds())
			phwm = append(phwm, float64(r.primaryHWM)/1e6)
			rhwm = append(rhwm, float64(r.relayHWM)/1e6)
			data = append(data, r.dataMB)
			s.digestsSame = s.digestsSame && r.digestsSame
		}
		s.seconds, s.forks, s.primaryCPU = sample.Of(secs), sample.Of(forks), sample.Of(cpu)
		s.proxyForks, s.proxyCPU = sample.Of(pforks), sample.Of(pcpu)
		s.ownSync, s.ownSyncCPU = sample.Of(own), sample.Of(ownCPU)
		s.primaryHWM, s.relayHWM, s.dataMB = sample.Of(phwm), sample.Of(rhwm), sample.Of(data).Median
		res.points = append(res.points, s)
	}
	return res, nil
}

func fullSyncOnce(ctx context.Context, o *options, proxyBin string, p syncPoint) (run syncRun, err error) {
	c, err := newCluster(o, proxyBin, logOn)
	if err != nil {
		return run, err
	}
	defer closeCluster(c, &err)
	s := &servers{}
	if s.primary, err = startPrimary(ctx, c, o.syncDelay); err != nil {
		return run, err
	}
	keys := (int64(o.syncMB) << 20) / syncValueSize
	if err := s.primary.Client().Do(ctx, "DEBUG", "POPULATE", keys, "bench", syncValueSize).Err(); err != nil {
		return run, fmt.Errorf("DEBUG POPULATE: %w", err)
	}
	forks0, err := s.primary.InfoInt(ctx, "stats", "total_forks")
	if err != nil {
		return run, err
	}
	cpuAttach, err := s.primary.CPU()
	if err != nil {
		return run, err
	}
	relayStart := time.Now()
	if s.relay, err = startRelay(ctx, c, p.topology, logOn, s.primary); err != nil {
		return run, err
	}
	if s.relay != nil {
		run.ownSync = time.Since(relayStart)
		cpu, err := s.relay.CPU()
		if err != nil {
			return run, err
		}
		run.ownSyncCPU = cpu.Total()
	}
	if s.replicas, err = startReplicas(ctx, c, p.replicas, nil); err != nil {
		return run, err
	}
	if err := waitNoChild(ctx, s.primary); err != nil {
		return run, err
	}
	forks1, err := s.primary.InfoInt(ctx, "stats", "total_forks")
	if err != nil {
		return run, err
	}
	cpu0, err := s.primary.CPU()
	if err != nil {
		return run, err
	}
	run.proxyForks, run.proxyCPU = forks1-forks0, cpu0.Sub(cpuAttach).Total()

	start := time.Now()
	if err := replicaOfAll(ctx, s.replicas, s.upstream()); err != nil {
		return run, err
	}
	if err := cluster.WaitLinkUp(ctx, linkTimeout, s.replicas...); err != nil {
		return run, err
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...); err != nil {
		return run, err
	}
	run.elapsed = time.Since(start)

	// The fork child's CPU reaches cutime/cstime once the primary has
	// reaped it.
	if err := waitNoChild(ctx, s.primary); err != nil {
		return run, err
	}
	cpu1, err := s.primary.CPU()
	if err != nil {
		return run, err
	}
	run.primaryCPU = cpu1.Sub(cpu0).Total()
	forks2, err := s.primary.InfoInt(ctx, "stats", "total_forks")
	if err != nil {
		return run, err
	}
	run.forks = forks2 - forks1
	if run.primaryHWM, err = s.primary.HWM(); err != nil {
		return run, err
	}
	if s.relay != nil {
		if run.relayHWM, err = s.relay.HWM(); err != nil {
			return run, err
		}
	}
	data, err := s.primary.InfoInt(ctx, "memory", "used_memory_dataset")
	if err != nil {
		return run, err
	}
	run.dataMB = float64(data) / 1e6
	run.digestsSame, err = digestsEqual(ctx, s)
	return run, err
}

// waitNoChild waits until the primary has no fork child: the last one has
// been reaped, so its CPU is in the primary's cutime/cstime.
func waitNoChild(ctx context.Context, p *cluster.Process) error {
	deadline := time.Now().Add(linkTimeout)
	for {
		f, err := p.Info(ctx, "persistence")
		if err != nil {
			return err
		}
		if f["rdb_bgsave_in_progress"] == "0" && f["aof_rewrite_in_progress"] == "0" && f["module_fork_in_progress"] != "1" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still has a fork child after %v", p.Name, linkTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

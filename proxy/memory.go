package proxy

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/sysmem"
	"github.com/replproxy/replproxy/replbuf"
)

// overLimitLogEvery rate-limits the "over maxmemory" warning of noeviction.
const overLimitLogEvery = time.Minute

// measureRuntimeBaseline is the Go heap the proxy holds before any stream,
// snapshot or client: the runtime's and the program's own structures. It is
// the "runtime" category of used_memory.
func measureRuntimeBaseline() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// memory is the server's own memory bookkeeping and the work the monitor
// does on it: used_memory's figures and its peak, maxmemory's eviction,
// and released memory given back to the OS. Made by New once the snapshot
// work is; the monitor (cron.go) runs enforceMaxMemory and
// returnReleasedMemory, any goroutine reads report, the memory return
// actor runs returnMemory.
type memory struct {
	// What the figures are read from and what eviction acts on, and the
	// program's hook for maxmemory (Options.OnMaxMemory; nil: none).
	// Read-only.
	conf        *liveConfig
	hist        *history.History
	pool        *replbuf.Pool
	clients     *registry
	durable     *durable // nil without the stream log
	snaps       *snapshots.Keeper
	log         hclog.Logger
	onMaxMemory func(maxmemory int64)

	runtimeBaseline int64        // measureRuntimeBaseline's, at New
	peak            atomic.Int64 // used_memory_peak
	over            atomic.Bool  // still over maxmemory after the last round's eviction
	lastOverLog     atomic.Int64 // unix nanos of the last "over maxmemory" warning
	returner        sysmem.Returner
	// returnWake (capacity 1) asks returnMemory for a return: sent by the
	// monitor.
	returnWake chan struct{}
}

func newMemory(baseline int64, conf *liveConfig, hist *history.History, pool *replbuf.Pool, clients *registry,
	durable *durable, snaps *snapshots.Keeper, log hclog.Logger, onMaxMemory func(int64)) *memory {
	return &memory{runtimeBaseline: baseline, conf: conf, hist: hist, pool: pool, clients: clients,
		durable: durable, snaps: snaps, log: log, onMaxMemory: onMaxMemory, returnWake: make(chan struct{}, 1)}
}

// figures gathers every category, at usable sizes.
func (m *memory) figures() eviction.Figures {
	f := eviction.Figures{
		Stream:     m.hist.Stream().Usage(),
		FreeBlocks: m.pool.Stats().FreeBytes,
		Runtime:    m.runtimeBaseline,
	}
	f.Snapshots, f.SnapshotsOnDisk = m.hist.SnapshotBytes()
	cm := m.clients.memory()
	f.NormalClients, f.ReplicaClients, f.Replicas, f.LinkCompression = cm.normal, cm.replicaClients, cm.replicas, cm.links
	if m.durable != nil {
		f.LogIndex = m.durable.log.IndexBytes()
	}
	return f
}

// report is the accounting of figures, and keeps the peak.
func (m *memory) report() eviction.Report {
	rep := eviction.Account(m.figures())
	for {
		peak := m.peak.Load()
		if rep.UsedMemory <= peak || m.peak.CompareAndSwap(peak, rep.UsedMemory) {
			break
		}
	}
	return rep
}

// enforceMaxMemory runs one round of eviction (from the monitor).
func (m *memory) enforceMaxMemory(now time.Time) {
	cfg := m.conf.config()
	limit, policy, dir := cfg.MaxMemory, cfg.MaxMemoryPolicy, cfg.Dir
	if limit <= 0 {
		m.over.Store(false)
		return
	}
	rep := m.report()
	cands := m.hist.EvictionCandidates()
	actions, over := eviction.Plan(rep, limit, policy, cands)
	m.over.Store(over) // still over once the planned evictions are done
	if over && policy == eviction.NoEviction {
		if last := m.lastOverLog.Load(); now.UnixNano()-last > int64(overLimitLogEvery) && m.lastOverLog.CompareAndSwap(last, now.UnixNano()) {
			m.log.Warn("memory over maxmemory; noeviction: nothing is evicted, serving goes on",
				"counted-bytes", rep.Counted, "maxmemory", limit)
		}
	}
	for _, a := range actions {
		switch a.Kind {
		case eviction.DropFreeBlocks:
			m.pool.DropFree()
		case eviction.EvictSnapshot:
			m.snaps.Evict(a.ID, dir)
		}
	}
}

// returnReleasedMemory is the monitor's look at used_memory (see
// sysmem.Returner for when memory goes back); the return itself is
// returnMemory's, so the monitor's other checks never wait for a
// collection.
func (m *memory) returnReleasedMemory(now time.Time) {
	if !m.returner.Observe(now, m.report().UsedMemory) {
		return
	}
	select {
	case m.returnWake <- struct{}{}:
	default: // one is asked for already
	}
}

// returnMemory gives released memory back to the OS whenever the monitor
// asks (returnReleasedMemory). One of Run's actors: it returns nil once
// ctx ends.
func (m *memory) returnMemory(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.returnWake:
		}
		before, start := sysmem.RSS(), time.Now()
		debug.FreeOSMemory()
		m.log.Debug("released memory returned to the OS", "rss-before-bytes", before, "rss-after-bytes", sysmem.RSS(),
			"took-ms", time.Since(start).Milliseconds())
	}
}

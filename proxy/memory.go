package proxy

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/sysmem"
	"github.com/replproxy/replproxy/proxy/wire"
)

// clientBufferBytes is what each connection's reader holds at least: its
// bufio buffer (Redis's PROTO_IOBUF_LEN). The command being read comes on
// top (client.bufferBytes).
const clientBufferBytes = wire.ReadBufferSize

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

// memoryFigures gathers every category, at usable sizes.
func (s *Server) memoryFigures() eviction.Figures {
	f := eviction.Figures{
		Stream:     s.hist.Stream().Usage(),
		FreeBlocks: s.pool.Stats().FreeBytes,
		Runtime:    s.runtimeBaseline,
	}
	f.Snapshots, f.SnapshotsOnDisk = s.hist.SnapshotBytes()
	cm := s.clients.memory()
	f.NormalClients, f.ReplicaClients, f.Replicas, f.LinkCompression = cm.normal, cm.replicaClients, cm.replicas, cm.links
	if s.durable != nil {
		f.LogIndex = s.durable.log.IndexBytes()
	}
	return f
}

// memoryReport is the accounting of memoryFigures, and keeps the peak.
func (s *Server) memoryReport() eviction.Report {
	rep := eviction.Account(s.memoryFigures())
	for {
		peak := s.peakMemory.Load()
		if rep.UsedMemory <= peak || s.peakMemory.CompareAndSwap(peak, rep.UsedMemory) {
			break
		}
	}
	return rep
}

// enforceMaxMemory runs one round of eviction (from the monitor).
func (s *Server) enforceMaxMemory(now time.Time) {
	cfg := s.config()
	limit, policy, dir := cfg.MaxMemory, cfg.MaxMemoryPolicy, cfg.Dir
	if limit <= 0 {
		s.overMaxMemory.Store(false)
		return
	}
	rep := s.memoryReport()
	cands := s.hist.EvictionCandidates()
	actions, over := eviction.Plan(rep, limit, policy, cands)
	s.overMaxMemory.Store(over) // still over once the planned evictions are done
	if over && policy == eviction.NoEviction {
		if last := s.lastOverLog.Load(); now.UnixNano()-last > int64(overLimitLogEvery) && s.lastOverLog.CompareAndSwap(last, now.UnixNano()) {
			s.log.Warn("memory over maxmemory; noeviction: nothing is evicted, serving goes on",
				"counted-bytes", rep.Counted, "maxmemory", limit)
		}
	}
	for _, a := range actions {
		switch a.Kind {
		case eviction.DropFreeBlocks:
			s.pool.DropFree()
		case eviction.EvictSnapshot:
			s.snaps.Evict(a.ID, dir)
		}
	}
}

// memoryState is the server's own memory bookkeeping.
type memoryState struct {
	runtimeBaseline int64
	peakMemory      atomic.Int64
	overMaxMemory   atomic.Bool
	lastOverLog     atomic.Int64
	memReturn       sysmem.Returner // when released memory goes back to the OS
	// returnWake (capacity 1) asks returnMemory for a return: sent by the
	// monitor, made by New.
	returnWake chan struct{}
}

// returnReleasedMemory is the monitor's look at used_memory (see
// sysmem.Returner for when memory goes back); the return itself is
// returnMemory's, so the monitor's other checks never wait for a
// collection.
func (s *Server) returnReleasedMemory(now time.Time) {
	if !s.memReturn.Observe(now, s.memoryReport().UsedMemory) {
		return
	}
	select {
	case s.returnWake <- struct{}{}:
	default: // one is asked for already
	}
}

// returnMemory gives released memory back to the OS whenever the monitor
// asks (returnReleasedMemory). One of Run's actors: it returns nil once
// ctx ends.
func (s *Server) returnMemory(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.returnWake:
		}
		before, start := sysmem.RSS(), time.Now()
		debug.FreeOSMemory()
		s.log.Debug("released memory returned to the OS", "rss-before-bytes", before, "rss-after-bytes", sysmem.RSS(),
			"took-ms", time.Since(start).Milliseconds())
	}
}

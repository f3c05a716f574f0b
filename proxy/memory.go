package proxy

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/replbuf"
)

// clientBufferBytes is what each connection's reader holds at least: its
// 16 KiB bufio buffer (Redis's PROTO_IOBUF_LEN). The command being read comes
// on top (client.bufferBytes).
const clientBufferBytes = 16 << 10

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
	u := s.stream.Usage()
	f := eviction.Figures{
		StreamBlocks: u.Total,
		StreamIndex:  u.Index,
		BacklogSize:  s.stream.BacklogSize(),
		FreeBlocks:   s.pool.Stats().FreeBytes,
		Runtime:      s.runtimeBaseline,
		// Stream bytes read and not yet published: the primary's query buffer.
		NormalClients: u.Unpublished,
	}
	s.mu.Lock()
	f.Replicas = len(s.mu.replicas)
	for _, sn := range s.heldSnapshotsLocked() {
		f.Snapshots += sn.Usage().Allocated()
	}
	if sp := s.mu.spilled; sp != nil {
		f.SnapshotsOnDisk = sp.size
	}
	for _, c := range s.mu.clients {
		b := c.bufferBytes()
		if c.replicaSet() {
			f.ReplicaClients += b
		} else {
			f.NormalClients += b
		}
	}
	s.mu.Unlock()
	return f
}

// heldSnapshotsLocked lists the snapshots in memory, newest first.
// REQUIRES: s.mu held.
func (s *Server) heldSnapshotsLocked() []*replbuf.Snapshot {
	var list []*replbuf.Snapshot
	if s.mu.snapshot != nil {
		list = append(list, s.mu.snapshot)
	}
	list = append(list, s.mu.retired...)
	return list
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
	s.mu.Lock()
	limit, policy := s.mu.cfg.MaxMemory, eviction.Policy(s.mu.cfg.MaxMemoryPolicy)
	s.mu.Unlock()
	if limit <= 0 {
		s.overMaxMemory.Store(false)
		return
	}
	rep := s.memoryReport()
	cands := s.evictionCandidates()
	actions, over := eviction.Plan(rep, limit, policy, cands)
	s.overMaxMemory.Store(over || len(actions) > 0 && rep.Counted > limit && policy == eviction.NoEviction)
	if over && policy == eviction.NoEviction {
		if last := s.lastOverLog.Load(); now.UnixNano()-last > int64(overLimitLogEvery) && s.lastOverLog.CompareAndSwap(last, now.UnixNano()) {
			s.log.Warn("memory over maxmemory; noeviction: nothing is evicted, serving goes on",
				"counted", humanize.IBytes(uint64(rep.Counted)), "maxmemory", humanize.IBytes(uint64(limit)))
		}
	}
	for _, a := range actions {
		switch a.Kind {
		case eviction.DropFreeBlocks:
			s.pool.DropFree()
		case eviction.EvictSnapshot:
			s.evictSnapshot(a.ID)
		}
	}
}

// evictionCandidates describes the snapshots held in memory.
func (s *Server) evictionCandidates() []eviction.Candidate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cands []eviction.Candidate
	for _, sn := range s.heldSnapshotsLocked() {
		cands = append(cands, eviction.Candidate{
			ID:     snapshotID(sn),
			Bytes:  sn.Usage().Allocated(),
			Busy:   sn.State() == replbuf.SnapshotBuilding || sn.Readers() > 0 || sn == s.mu.spilling,
			Newest: sn == s.mu.snapshot,
		})
	}
	return cands
}

func snapshotID(sn *replbuf.Snapshot) string {
	return sn.ReplID() + ":" + strconv.FormatInt(sn.Offset(), 10) + ":" + strconv.FormatInt(sn.Created().UnixNano(), 10)
}

// evictSnapshot evicts one snapshot: a retired one is released; the newest is
// spilled to dir in the background (dropped if dir cannot be written).
func (s *Server) evictSnapshot(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, sn := range s.mu.retired {
		if snapshotID(sn) == id && sn.Readers() == 0 {
			s.mu.retired = append(s.mu.retired[:i], s.mu.retired[i+1:]...)
			s.countEviction(sn)
			sn.Release()
			s.pool.DropFree()
			return
		}
	}
	sn := s.mu.snapshot
	if sn == nil || snapshotID(sn) != id || s.mu.spilling != nil {
		return
	}
	s.mu.spilling = sn
	dir := s.mu.cfg.Dir
	if !s.goBackground(func(ctx context.Context) { s.spill(ctx, sn, dir) }) {
		s.mu.spilling = nil
	}
}

// countEviction counts an evicted snapshot. It touches only atomic counters
// and sn's usage, so it needs no lock.
func (s *Server) countEviction(sn *replbuf.Snapshot) {
	s.stats.evictedSnapshots.Add(1)
	s.stats.evictedBytes.Add(sn.Usage().Allocated())
}

// rssBytes reads the resident set size from /proc (0 where there is none).
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(data)
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(string(f[1]), 10, 64)
	return pages * int64(os.Getpagesize())
}

// memoryState is the server's own memory bookkeeping.
type memoryState struct {
	runtimeBaseline int64
	peakMemory      atomic.Int64
	overMaxMemory   atomic.Bool
	lastOverLog     atomic.Int64
	memReturn       memoryReturner // released memory given back to the OS
}

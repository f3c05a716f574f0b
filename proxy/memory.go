package proxy

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/eviction"
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

// machineMemory is the most memory the process may have when maxmemory does
// not say: the machine's (MemTotal in /proc/meminfo), or its cgroup's limit
// when lower (memory.max under cgroup v2, memory.limit_in_bytes under v1).
// 0 when neither can be read. Read anew at each call: a container's limit
// may change.
func machineMemory() int64 {
	total := int64(0)
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range bytes.Lines(data) {
			if rest, ok := bytes.CutPrefix(line, []byte("MemTotal:")); ok {
				f := bytes.Fields(rest) // "<n> kB"
				if len(f) == 2 && string(f[1]) == "kB" {
					if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil && kb > 0 && kb < 1<<53 {
						total = kb << 10
					}
				}
				break
			}
		}
	}
	if limit := cgroupMemoryLimit(); limit > 0 && (total == 0 || limit < total) {
		return limit
	}
	return total
}

// cgroupMemoryLimit returns the memory limit of the process's cgroup, 0 for
// none or none that can be read: in its own cgroup (its paths from
// /proc/self/cgroup), cgroup v2's memory.max or v1's memory.limit_in_bytes,
// else the same files at the mounts' roots (a container's namespace shows
// its own cgroup there). "max", and v1's "no limit" (near 2^63), are none.
func cgroupMemoryLimit() int64 {
	var paths []string
	if data, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for line := range bytes.Lines(data) {
			// id:controllers:path; v2's is 0::path.
			f := strings.SplitN(strings.TrimSpace(string(line)), ":", 3)
			if len(f) != 3 || !filepath.IsAbs(f[2]) {
				continue
			}
			switch dir := filepath.Clean(f[2]); {
			case f[0] == "0" && f[1] == "":
				paths = append(paths, filepath.Join("/sys/fs/cgroup", dir, "memory.max"))
			case slices.Contains(strings.Split(f[1], ","), "memory"):
				paths = append(paths, filepath.Join("/sys/fs/cgroup/memory", dir, "memory.limit_in_bytes"))
			}
		}
	}
	paths = append(paths, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			continue // "max", or v1's page-rounded 2^63-1: no limit here
		}
		return n
	}
	return 0
}

// memoryState is the server's own memory bookkeeping.
type memoryState struct {
	runtimeBaseline int64
	peakMemory      atomic.Int64
	overMaxMemory   atomic.Bool
	lastOverLog     atomic.Int64
	memReturn       memoryReturner // released memory given back to the OS
}

// Package sysmem reads what the operating system says of the process's
// memory: its resident set, and the most it may have (the machine's memory,
// or its cgroup's limit), read anew at each call from any goroutine; and it
// decides when memory the process released is worth giving back to it
// (Returner).
package sysmem

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// RSS reads the resident set size from /proc (0 where there is none).
func RSS() int64 {
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

// Machine is the most memory the process may have when maxmemory does
// not say: the machine's (MemTotal in /proc/meminfo), or its cgroup's limit
// when lower (memory.max under cgroup v2, memory.limit_in_bytes under v1).
// 0 when neither can be read. Read anew at each call: a container's limit
// may change.
func Machine() int64 {
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
	if limit := cgroupLimit(); limit > 0 && (total == 0 || limit < total) {
		return limit
	}
	return total
}

// cgroupLimit returns the memory limit of the process's cgroup, 0 for
// none or none that can be read: in its own cgroup (its paths from
// /proc/self/cgroup), cgroup v2's memory.max or v1's memory.limit_in_bytes,
// else the same files at the mounts' roots (a container's namespace shows
// its own cgroup there). "max", and v1's "no limit" (near 2^63), are none.
func cgroupLimit() int64 {
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

// Memory a process releases (a snapshot, a stream generation, a burst of
// blocks a slow replica pinned) becomes garbage, and the Go runtime gives
// its pages back to the OS only after a collection, which, with nothing
// else allocating, may not come for two minutes (the forced GC); until then
// RSS stays at its peak, and a container limit may kill the process. So
// when used_memory has fallen by ReturnMemoryDrop from its highest point,
// the caller has the runtime collect and return the freed pages at once
// (debug.FreeOSMemory), at most once per ReturnMemoryEvery, off the hot
// path: from a background goroutine, never from a client's or the stream's.
const (
	// ReturnMemoryDrop is the fall in used_memory that is worth a
	// collection: the slack the goal "RSS within used_memory + 32 MiB"
	// allows.
	ReturnMemoryDrop = 32 << 20
	// ReturnMemoryEvery debounces: a forced collection costs a full GC.
	ReturnMemoryEvery = 5 * time.Second
)

// A Returner decides when to give released memory back to the OS. Observe
// is called from one goroutine (the server's monitor); High from any.
type Returner struct {
	// high is the highest used_memory seen since the last return; atomic
	// so that High may be read from any goroutine.
	high atomic.Int64
	last time.Time // owned by Observe's goroutine: the last return
}

// High is the highest used_memory seen since the last return.
func (m *Returner) High() int64 { return m.high.Load() }

// Observe records used_memory at now and reports whether to return memory
// now: used_memory lies ReturnMemoryDrop or more below its highest point
// since the last return, and that return was ReturnMemoryEvery ago or more.
// A fall during the debounce is remembered and returned once it ends.
func (m *Returner) Observe(now time.Time, used int64) bool {
	high := max(m.high.Load(), used)
	if high-used < ReturnMemoryDrop || (!m.last.IsZero() && now.Sub(m.last) < ReturnMemoryEvery) {
		m.high.Store(high)
		return false
	}
	m.high.Store(used)
	m.last = now
	return true
}

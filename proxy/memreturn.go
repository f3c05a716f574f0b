package proxy

import (
	"context"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/sysmem"
)

// Memory the proxy releases (a snapshot, a stream generation, a burst of
// blocks a slow replica pinned) becomes garbage, and the Go runtime gives
// its pages back to the OS only after a collection, which, with nothing
// else allocating, may not come for two minutes (the forced GC); until then
// RSS stays at its peak, and a container limit may kill the process. So
// when used_memory has fallen by returnMemoryDrop from its highest point,
// the monitor has the runtime collect and return the freed pages at once
// (debug.FreeOSMemory), at most once per returnMemoryEvery, off the hot
// path: from a background goroutine, never from a client's or the stream's.
const (
	// returnMemoryDrop is the fall in used_memory that is worth a
	// collection: the slack the goal "RSS within used_memory + 32 MiB"
	// allows.
	returnMemoryDrop = 32 << 20
	// returnMemoryEvery debounces: a forced collection costs a full GC.
	returnMemoryEvery = 5 * time.Second
)

// memoryReturner decides when to give released memory back to the OS.
type memoryReturner struct {
	// high is the highest used_memory seen since the last return. Written
	// by the monitor only; atomic so that tests can see what it has seen.
	high atomic.Int64
	last time.Time // owned by the monitor: the last return
}

// observe records used_memory at now and reports whether to return memory
// now: used_memory lies returnMemoryDrop or more below its highest point
// since the last return, and that return was returnMemoryEvery ago or more.
// A fall during the debounce is remembered and returned once it ends.
func (m *memoryReturner) observe(now time.Time, used int64) bool {
	high := max(m.high.Load(), used)
	if high-used < returnMemoryDrop || (!m.last.IsZero() && now.Sub(m.last) < returnMemoryEvery) {
		m.high.Store(high)
		return false
	}
	m.high.Store(used)
	m.last = now
	return true
}

// returnReleasedMemory is the monitor's look at used_memory; the return
// itself runs on the background group, so the monitor's other checks never
// wait for a collection.
func (s *Server) returnReleasedMemory(now time.Time) {
	if !s.memReturn.observe(now, s.memoryReport().UsedMemory) {
		return
	}
	s.goBackground(func(context.Context) {
		before, start := sysmem.RSS(), time.Now()
		debug.FreeOSMemory()
		s.log.Debug("released memory returned to the OS", "rss-before-bytes", before, "rss-after-bytes", sysmem.RSS(),
			"took-ms", time.Since(start).Milliseconds())
	})
}

package linkzstd

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Spans of fewer raw bytes than sampleBelow are timed one in sampleEvery,
// the timed one counting for all of them. A clock reading is a syscall,
// measured at 3 to 6 µs a pair under load (BenchmarkThreadCPU), as much as
// a 600 B chunk's decoding: timing each small chunk would cost the link
// more CPU than the figure reports. Chunks of 16 KiB and more (replicas
// catching up, full syncs, a busy stream) are each timed, at under 3%.
const (
	sampleBelow = 16 << 10
	sampleEvery = 16
)

// cpuMeter adds up the CPU time of a codec's spans of work. Owned by the
// codec's owner, except total, which anyone reads atomically.
type cpuMeter struct {
	total atomic.Int64 // nanoseconds; owner adds
	small int          // untimed small spans since the last timed one
}

// begin starts a span of work on raw bytes. If it returns a weight above
// 0, the span is timed: the goroutine is locked to its thread, and end
// must be called with what begin returned.
func (m *cpuMeter) begin(raw int) (t0 time.Duration, weight int64) {
	weight = 1
	if raw < sampleBelow {
		if m.small++; m.small < sampleEvery {
			return 0, 0
		}
		m.small, weight = 0, sampleEvery
	}
	runtime.LockOSThread()
	return threadCPU(), weight
}

// end ends a span begin started.
func (m *cpuMeter) end(t0 time.Duration, weight int64) {
	if weight == 0 {
		return
	}
	m.total.Add(int64(threadCPU()-t0) * weight)
	runtime.UnlockOSThread()
}

// threadCPU returns the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID),
// or 0 if the clock cannot be read. The caller holds runtime.LockOSThread
// across the two readings it subtracts, so that both are one thread's and
// the span counts the work in between, not what a wall clock would (the
// goroutine descheduled, other goroutines on the thread).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

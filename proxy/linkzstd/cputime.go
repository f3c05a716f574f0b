package linkzstd

import (
	"time"

	"golang.org/x/sys/unix"
)

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

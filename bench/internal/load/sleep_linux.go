//go:build linux

package load

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// sleepUntil returns at or after at. Its caller has locked its thread
// (runtime.LockOSThread). With other Ps to run the rest of the process, it
// sleeps in nanosleep(2) made with syscall.RawSyscall, which the runtime
// does not see: time.Sleep is woken through the runtime's network poller,
// whose timeout has a millisecond's granularity (a 1 ms tick lands
// anywhere in the millisecond after it), and a sleep in an ordinary system
// call hands the thread's P to another thread, which wakes; each costs
// several thread switches per tick. The sleeping goroutine keeps its P;
// a signal (the runtime's preemption) ends the sleep early, and it sleeps
// again for what is left.
func sleepUntil(at time.Time) {
	if runtime.GOMAXPROCS(0) < 2 {
		time.Sleep(time.Until(at))
		return
	}
	for d := time.Until(at); d > 0; d = time.Until(at) {
		ts := syscall.NsecToTimespec(int64(d))
		syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
}

package upstream

import (
	"syscall"
	"unsafe"
)

// rawRead is read(2) on the link's non-blocking socket as a raw system call
// (syscall.RawSyscall): the scheduler is not told that a syscall began,
// since the call cannot wait. Telling it is what costs: a syscall entered
// while every P was idle, as the stream loop's first read after each wait
// is, wakes the runtime's monitor thread (sysmon), which then sleeps in
// 20 µs steps for as long as the proxy works. With syscall.Read, that
// thread took a third of the proxy's CPU at 512 B values (1 replica, log
// off: 16,000 of the process's 30,000 context switches per 667 MB).
func rawRead(fd uintptr, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(ptr), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

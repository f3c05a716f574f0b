package downstream

import (
	"syscall"
	"unsafe"
)

// writevSupported says that replicas may be sent to inline: Linux has a
// writev the producer can call on a socket's descriptor without blocking.
const writevSupported = true

// writev is one inline write's iovecs and result, owned by whoever owns the
// socket's inline state (the inline sender while it holds the socket).
type writev struct {
	iov   []syscall.Iovec // grown once to a batch's slices, then reused
	wrote int             // bytes the last writev took
	errno syscall.Errno   // its error, EAGAIN excepted (a full socket)
}

// load points the iovecs at bufs (never empty slices: Pending hands out
// none) and returns their total.
func (v *writev) load(bufs [][]byte) int {
	v.iov = v.iov[:0]
	total := 0
	for _, b := range bufs {
		iv := syscall.Iovec{Base: &b[0]}
		iv.SetLen(len(b))
		v.iov = append(v.iov, iv)
		total += len(b)
	}
	v.wrote, v.errno = 0, 0
	return total
}

// result returns what the writev took and whether it failed, and drops the
// iovecs' pointers into the blocks, which may be reused once released.
func (v *writev) result() (n int, failed bool) {
	clear(v.iov)
	return v.wrote, v.errno != 0
}

// writeFD is the syscall.RawConn.Write callback: one writev on the
// non-blocking socket. It always returns true, so that a full socket
// (EAGAIN) returns at once instead of parking the producer in the poller.
//
// It is a raw system call (syscall.RawSyscall), which does not tell the Go
// scheduler that a syscall began: the socket is non-blocking, so the call
// cannot wait, and telling the scheduler costs more than the call. Each
// syscall entered while every P was idle wakes the runtime's monitor thread
// (sysmon), which then polls every 20 µs while the proxy works; on this
// path that thread alone would take a third of the proxy's CPU at 512 B
// values (see upstream's rawRead, the same on the read side).
func (s *inlineSender) writeFD(fd uintptr) bool {
	v := &s.vec
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&v.iov[0])), uintptr(len(v.iov)))
		switch errno {
		case 0:
			v.wrote = int(n)
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
		default:
			v.errno = errno
		}
		return true
	}
}

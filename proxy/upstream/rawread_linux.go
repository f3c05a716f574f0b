package upstream

import (
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawRead is read(2) on the link's non-blocking socket as a raw system call
// (syscall.RawSyscall): the scheduler is not told that a syscall began,
// since the call cannot wait. Telling it is what costs: a syscall entered
// while every P was idle, as the stream loop's first read after each wait
// is, wakes the runtime's monitor thread (sysmon), which then sleeps in
// 20 µs steps for as long as the proxy works: at small values, a third of
// the proxy's CPU and half its context switches would be that thread's.
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

// rawReadv is readv(2) into iov, as rawRead is read(2): a raw system call
// on the non-blocking socket.
func rawReadv(fd uintptr, iov []syscall.Iovec) (int, error) {
	n, _, errno := syscall.RawSyscall(syscall.SYS_READV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// rawWaits says that the stream loop may wait for a dense stream with
// rawWait (see flushingSource.waitRaw).
const rawWaits = true

// rawWait waits, as a raw system call, until fd is readable or d has
// passed, and reports whether it is: ppoll(2) on the one descriptor, whose
// readiness for a TCP socket honours SO_RCVLOWAT (the kernel reports it
// readable once that many bytes arrived). The scheduler is not told: the
// goroutine's P stays with it while it waits, which is why it is used only
// for waits a coalescing window bounds (see flushingSource.waitRaw). A
// signal ends it early (EINTR, never restarted for ppoll): the runtime's
// preemption reaches the goroutine as it does one running.
func rawWait(fd uintptr, d time.Duration) (ready bool, err error) {
	pfd := unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	ts := unix.NsecToTimespec(max(d, 0).Nanoseconds()) // a window already over: look once
	n, _, errno := syscall.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if errno != 0 {
		return false, errno
	}
	return n > 0, nil
}

// rawGetsockoptInt is getsockopt(2) of an int option as a raw system call,
// and rawSetsockoptInt setsockopt(2): the coalescer changes SO_RCVLOWAT
// each time the stream starts or stops coalescing, often right after every
// P was idle, and a syscall the scheduler is told of then wakes the
// runtime's monitor thread, which then polls in 20 µs steps for as long
// as the proxy works (see rawRead).
func rawGetsockoptInt(fd uintptr, level, opt int) (int, error) {
	var v int32
	l := uint32(unsafe.Sizeof(v))
	_, _, errno := syscall.RawSyscall6(syscall.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(v), nil
}

func rawSetsockoptInt(fd uintptr, level, opt, value int) error {
	v := int32(value)
	_, _, errno := syscall.RawSyscall6(syscall.SYS_SETSOCKOPT, fd, uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// A rawWriter writes to the link's plain TCP socket with one write(2) as a
// raw system call, which never waits (the socket is non-blocking): the
// session's ACK, once a second, through net.Conn's write woke the
// runtime's monitor thread from its deep sleep on an idle proxy, which
// then polled in 20 µs steps while anything ran (see rawRead). The zero
// value is ready; the descriptor is taken at the first write. Owned by
// whoever holds the session's write lock.
type rawWriter struct {
	rc    syscall.RawConn // nil until the first write; conn's
	none  bool            // conn is no plain TCP connection: nothing is written raw
	p     []byte
	wrote int
	fn    func(fd uintptr) bool
}

// write writes what one write(2) takes of p to conn without waiting, and
// returns how much that was: 0 when the socket's buffer is full, the write
// failed (the caller's write then reports it), or conn is no plain TCP
// connection.
func (w *rawWriter) write(conn net.Conn, p []byte) int {
	if w.rc == nil && !w.none {
		w.none = true
		if tc, ok := conn.(*net.TCPConn); ok {
			if rc, err := tc.SyscallConn(); err == nil {
				w.rc, w.none = rc, false
				w.fn = w.writeFD
			}
		}
	}
	if w.none || len(p) == 0 {
		return 0
	}
	w.p, w.wrote = p, 0
	w.rc.Write(w.fn) // writeFD never asks the poller to wait
	w.p = nil
	return w.wrote
}

func (w *rawWriter) writeFD(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.p[0])), uintptr(len(w.p)))
		if errno == syscall.EINTR {
			continue
		}
		if errno == 0 {
			w.wrote = int(n)
		}
		return true
	}
}

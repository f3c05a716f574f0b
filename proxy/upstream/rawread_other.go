//go:build !linux

package upstream

import (
	"net"
	"syscall"
	"time"
	"unsafe"
)

// rawRead is read(2) through the syscall package where raw system calls
// are not worth their platform details.
func rawRead(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }

// rawReadv reads into iov's first buffer alone: a short read, which the
// stream loop takes as any other.
func rawReadv(fd uintptr, iov []syscall.Iovec) (int, error) {
	return syscall.Read(int(fd), unsafe.Slice(iov[0].Base, iov[0].Len))
}

// rawWaits: elsewhere every wait is the poller's.
const rawWaits = false

func rawWait(fd uintptr, d time.Duration) (bool, error) { return false, syscall.ENOSYS }

func rawGetsockoptInt(fd uintptr, level, opt int) (int, error) {
	return syscall.GetsockoptInt(int(fd), level, opt)
}

func rawSetsockoptInt(fd uintptr, level, opt, value int) error {
	return syscall.SetsockoptInt(int(fd), level, opt, value)
}

// A rawWriter writes nothing here: every write is net.Conn's.
type rawWriter struct{}

func (w *rawWriter) write(conn net.Conn, p []byte) int { return 0 }

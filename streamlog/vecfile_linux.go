package streamlog

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// iovMax is the most slices one writev takes (Linux's IOV_MAX).
const iovMax = 1024

// vecWriter writes a record's slices to a segment file with writev, one
// system call for many blocks, straight from the caller's memory. Owned by
// the log's writer (under wmu). Its fields carry one call's arguments and
// results through RawConn.Write, whose function is made once (write) so
// that appending allocates nothing.
type vecWriter struct {
	rc    syscall.RawConn
	iov   []syscall.Iovec
	err   error
	write func(fd uintptr) bool
}

// newVecWriter returns a vecWriter for f, or nil when f is not an
// *os.File (a test's file layer): the log then writes slice by slice.
func newVecWriter(f File) *vecWriter {
	of, ok := f.(*os.File)
	if !ok {
		return nil
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return nil
	}
	w := &vecWriter{rc: rc, iov: make([]syscall.Iovec, 0, iovMax)}
	w.write = w.writev
	return w
}

// writeBuffers writes bufs in order at the file's offset.
func (w *vecWriter) writeBuffers(bufs [][]byte) error {
	for len(bufs) > 0 {
		w.iov = w.iov[:0]
		for len(bufs) > 0 && len(w.iov) < iovMax {
			if b := bufs[0]; len(b) > 0 {
				v := syscall.Iovec{Base: &b[0]}
				v.SetLen(len(b))
				w.iov = append(w.iov, v)
			}
			bufs = bufs[1:]
		}
		w.err = nil
		err := w.rc.Write(w.write)
		clear(w.iov) // hold no reference to the caller's blocks
		if err == nil {
			err = w.err
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writev writes w.iov whole, resuming after a short write. A regular file
// never makes RawConn.Write wait, so it is called once.
func (w *vecWriter) writev(fd uintptr) bool {
	iov := w.iov
	for len(iov) > 0 {
		n, _, errno := syscall.Syscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			w.err = &os.PathError{Op: "writev", Path: "segment", Err: errno}
			return true
		}
		if n == 0 {
			w.err = io.ErrShortWrite
			return true
		}
		for n > 0 {
			if l := uintptr(iov[0].Len); n >= l {
				n -= l
				iov = iov[1:]
				continue
			}
			iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
			iov[0].SetLen(int(iov[0].Len) - int(n))
			n = 0
		}
	}
	return true
}

// preallocate allocates the blocks of f's first size bytes without changing
// its size (FALLOC_FL_KEEP_SIZE), so that appends write over allocated
// blocks instead of allocating as they extend the file, and recovery still
// finds the segment's end at its size (the blocks past it are invisible to
// reads and cut when the segment is sealed). It is advice, and reports
// whether it was taken: where the file system cannot (EOPNOTSUPP), the disk
// is full, or f is a test's file, nothing is allocated and the appends
// allocate as they write, as without it (a full disk then fails the write,
// which is the log's error to report).
func preallocate(f File, size int64) bool {
	of, ok := f.(*os.File)
	if !ok {
		return false
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return false
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Fallocate(int(fd), fallocKeepSize, 0, size); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false
	}
	return ferr == nil
}

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h).
const fallocKeepSize = 0x1

// datasync makes f's bytes durable, with what reading them back needs (its
// size, its blocks): fdatasync, not fsync, whose journal commit for a new
// mtime recovery never reads. A segment written over blocks it already
// holds (a recycled one) is then synced by writing its pages alone. A file
// of a test's layer is synced by its own Sync.
func datasync(f File) error {
	of, ok := f.(*os.File)
	if !ok {
		return f.Sync()
	}
	rc, err := of.SyscallConn()
	if err != nil {
		return f.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: of.Name(), Err: serr}
	}
	return nil
}

package wire

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// ConnReader returns what a client's command reader reads conn through: a
// plain TCP connection is read by rawConnReader, anything else (TLS) as it
// is.
func ConnReader(conn net.Conn) io.Reader {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return conn
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return conn
	}
	r := &rawConnReader{rc: rc, conn: conn}
	r.fn = r.readFD
	return r
}

// RawReadConn returns the connection a TLS connection runs on: conn, read
// as ConnReader reads a plain one (a raw read(2) under the poller), so that
// the records of a TLS stream, one read each, are not system calls the
// scheduler is told of (below). Anything but a TCP connection is returned
// as it is. Its reads are not safe for concurrent use: crypto/tls makes
// one at a time.
func RawReadConn(conn net.Conn) net.Conn {
	r, ok := ConnReader(conn).(*rawConnReader)
	if !ok {
		return conn
	}
	return &rawReadConn{Conn: conn, r: r}
}

// rawReadConn is a TCP connection whose Read is a rawConnReader's.
type rawReadConn struct {
	net.Conn
	r *rawConnReader
}

func (c *rawReadConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// SyscallConn is the socket's, for its descriptor and raw writes.
func (c *rawReadConn) SyscallConn() (syscall.RawConn, error) { return c.r.rc, nil }

// A rawConnReader reads a TCP connection with read(2) as a raw system call
// (syscall.RawSyscall), waiting in the poller as net.Conn.Read does, with
// its deadlines. The socket is non-blocking, so the call cannot wait, and
// a system call the scheduler is told of, entered while every P was idle,
// wakes the runtime's monitor thread, which then polls in 20 µs steps for
// as long as the proxy works: every replica's ACK once a second would do
// that on an idle proxy. Owned by the reader's one goroutine.
type rawConnReader struct {
	rc   syscall.RawConn
	conn net.Conn // for the addresses of a read's error
	p    []byte
	n    int
	err  error
	fn   func(fd uintptr) bool // readFD, made once so that no read allocates
}

func (r *rawConnReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.err = p, 0, nil
	err := r.rc.Read(r.fn)
	r.p = nil
	if err != nil {
		return 0, err // a deadline, or a closed connection
	}
	return r.n, r.err
}

// readFD is the syscall.RawConn.Read callback: one read(2); false on EAGAIN,
// so that the poller waits.
func (r *rawConnReader) readFD(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch errno {
		case 0:
			if n == 0 {
				r.err = io.EOF
			}
			r.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			// As net.Conn.Read reports it.
			r.err = &net.OpError{Op: "read", Net: "tcp", Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(),
				Err: os.NewSyscallError("read", errno)}
			return true
		}
	}
}

package upstream

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/replproxy/replproxy/proxy/wire"
)

// flushBudget is how many published bytes the stream loop may hold back
// from Host.Published while the primary's socket still has more to read:
// the replicas then get a few large writes instead of one per read, and
// never wait for more than this.
const flushBudget = 256 << 10

// A flushingSource is the stream loop's source on a plain TCP link: what
// the handshake reader buffered, then the socket, read without blocking
// first. Only when the socket has nothing to read, and so the loop would
// wait, does it tell the host what was published (Host.Published), as
// nats-server flushes from its read loop before it waits: while the primary
// sends faster than one read takes, replicas get batches of many reads.
// Owned by the stream loop.
type flushingSource struct {
	rd      *wire.CommandReader
	rc      syscall.RawConn
	conn    net.Conn // for the addresses of a read's error
	publish func()   // Host.Published
	held    int64    // bytes published and not yet told to the host

	// The read in progress, for readFD.
	p   []byte
	n   int
	err error
	fn  func(fd uintptr) bool // s.readFD, made once so that no read allocates
}

// newFlushingSource returns conn's flushing source, or nil when conn is no
// plain socket (TLS, a pipe): the loop then tells the host after every
// publish.
func newFlushingSource(rd *wire.CommandReader, conn net.Conn, publish func()) *flushingSource {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &flushingSource{rd: rd, rc: rc, conn: conn, publish: publish}
	s.fn = s.readFD
	return s
}

// published records n bytes just published, and tells the host at once
// when more than flushBudget are held.
func (s *flushingSource) published(n int64) {
	s.held += n
	if s.held >= flushBudget {
		s.flush()
	}
}

func (s *flushingSource) flush() {
	if s.held > 0 {
		s.held = 0
		s.publish()
	}
}

// Read reads what the handshake reader buffered, then the socket; a read
// that would block first flushes.
func (s *flushingSource) Read(p []byte) (int, error) {
	if s.rd.Buffered() > 0 {
		return s.rd.Reader().Read(p)
	}
	s.p, s.n, s.err = p, 0, nil
	err := s.rc.Read(s.fn) // the read deadline applies: the poller's wait
	s.p = nil
	if err != nil {
		s.flush() // the link ends: nothing is held back from replicas
		return 0, err
	}
	return s.n, s.err
}

// readFD is the syscall.RawConn.Read callback: one read(2) (rawRead); on
// EAGAIN the held bytes go to the host before the poller waits (false).
func (s *flushingSource) readFD(fd uintptr) bool {
	for {
		n, err := rawRead(fd, s.p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			s.flush()
			return false
		case err != nil:
			// As net.Conn.Read reports it.
			s.err = &net.OpError{Op: "read", Net: "tcp", Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(),
				Err: os.NewSyscallError("read", err)}
		case n == 0 && len(s.p) > 0:
			s.err = io.EOF
		default:
			s.n = n
		}
		return true
	}
}

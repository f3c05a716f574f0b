package upstream

import (
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

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

	// The read in progress, for readFD: into p alone, or into the buffers
	// of iov (readv) when there are several, room bytes in all.
	p    []byte
	iov  []syscall.Iovec
	room int
	one  [1][]byte // Read's one buffer, as ReadBuffers takes them
	n    int
	err  error
	fn   func(fd uintptr) bool // s.readFD, made once so that no read allocates

	// drained says that the last read took less than its room: the socket
	// was empty then, so the next read would fail with EAGAIN, and a
	// coalescing wait is made without it (see readFD). parked says that
	// the wait after the next read that fails is prepared already.
	drained, parked bool
	reads           int64 // read system calls made, for tests

	co coalescer
}

// A coalescer lets the stream gather in the primary's socket before the
// stream loop reads it, while it arrives more often than once per window
// (repl-read-coalesce-usec): a primary under a steady load sends its
// replicas a packet per turn of its event loop, thousands a second, and a
// wake-up of the loop costs the proxy far more than the bytes it brings
// (the scheduler, the poller, one writev per replica). While it coalesces,
// the socket's SO_RCVLOWAT is raised to lowat, so that the kernel wakes
// the loop only once that much has arrived, and each wait is bounded by
// the window (waitRaw's ppoll, or a read deadline in the poller with one
// P): the loop then wakes about once per window however many packets came
// in it, and a byte waits at most one window. A stream is coalesced once
// its waits in the poller come less than a window apart on average
// (cycle), or a window's worth of it brings denseBytes; a window that ends
// with nothing in it ends the coalescing, and the socket is read as it
// arrives again. The window is 0 unless an operator sets one: every byte
// a window holds back reaches the replicas that much later, and a
// replica's readers feel that more than the proxy feels its CPU. Owned by
// the stream loop.
type coalescer struct {
	window func() time.Duration // Settings.ReadCoalesce, read at every wait
	dl     *deadline            // the link's repl-timeout deadline, restored when not coalescing

	lowat    int           // SO_RCVLOWAT while the stream is coalesced; 0 while it is not
	cycle    time.Duration // the stream's pace: a moving average of the time between waits in the poller
	armed    bool          // the wait is bounded by a coalescing window
	rawUntil time.Time     // when the raw wait's window ends
	deadline bool          // the bound is the conn's read deadline (a wait in the poller), not rawWait's
	rawOff   bool          // rawWait failed once (or a test chose the poller): coalescing waits are the poller's
	expired  bool          // the last wait ended at its coalescing deadline, and nothing was read since
	parkedAt time.Time     // when the last wait began
	read     int64         // bytes read since then
	waits    int64         // waits begun, for tests
	rawWaits atomic.Int64  // of them, those waitRaw made (read by tests while a wait runs)
}

const (
	// denseBytes per window make a stream coalesced whatever its pace in
	// the poller (a burst read in a few large reads).
	denseBytes = 64 << 10
	// cycleMax bounds a sample of coalescer.cycle, so that after a silence
	// a steady stream is coalesced again within a few dozen waits.
	cycleMax = time.Second
	// lowatMax bounds SO_RCVLOWAT; it is also at most a quarter of the
	// socket's receive buffer when set, which the kernel would otherwise
	// grow (and clamp the window to) to fit it.
	lowatMax = 1 << 20
)

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

// coalesce lets s coalesce reads in windows of window() (0: never); dl is
// the read deadline that holds between them.
func (s *flushingSource) coalesce(window func() time.Duration, dl *deadline) {
	s.co.window, s.co.dl = window, dl
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
	s.one[0] = p
	n, err := s.ReadBuffers(s.one[:])
	s.one[0] = nil
	return n, err
}

// ReadBuffers is Read into several buffers at once (replbuf.BuffersReader):
// one readv(2) of the socket takes what has arrived into all of them, where
// a read(2) takes one block's room, so that a fast stream costs one system
// call per wake-up rather than one per 16 KiB (64 per MiB, each of which
// may also send the primary a window update). What the handshake reader
// buffered is read first, into the first buffer.
func (s *flushingSource) ReadBuffers(bufs [][]byte) (int, error) {
	if s.rd.Buffered() > 0 {
		return s.rd.Reader().Read(bufs[0])
	}
	s.p, s.n, s.err, s.room = bufs[0], 0, nil, len(bufs[0])
	if len(bufs) > 1 {
		s.room = 0
		for _, b := range bufs {
			if len(b) > 0 {
				v := syscall.Iovec{Base: &b[0]}
				v.SetLen(len(b))
				s.iov = append(s.iov, v)
				s.room += len(b)
			}
		}
	}
	err := s.rc.Read(s.fn) // the read deadline applies: the poller's wait
	if err != nil && s.co.armed && s.co.deadline && errors.Is(err, os.ErrDeadlineExceeded) {
		// The window ended before lowat bytes arrived: read what did.
		s.co.armed, s.co.deadline = false, false
		s.co.dl.rearm()
		s.co.expired = true
		err = s.rc.Read(s.fn)
	}
	s.p = nil
	clear(s.iov) // hold no reference to the blocks
	s.iov = s.iov[:0]
	if err != nil {
		s.flush() // the link ends: nothing is held back from replicas
		return 0, err
	}
	return s.n, s.err
}

// readFD is the syscall.RawConn.Read callback: one read(2) (rawRead), or
// readv(2) (rawReadv) into several buffers; on EAGAIN the held bytes go to
// the host before the loop waits: in a coalescing window (waitRaw), or in
// the poller (false).
//
// After a read that took less than its room the socket was empty, and a
// coalescing window is waited for without reading first: ppoll sees the
// socket's level (what arrived since included), and the read would only
// have failed; that is one system call less per window. A wait in the
// poller still needs the read that fails: RawConn.Read forgets readiness
// the poller saw before it began.
func (s *flushingSource) readFD(fd uintptr) bool {
	for {
		if s.drained {
			s.drained = false
			if s.prepare(fd) {
				continue
			}
			s.parked = true
		}
		var n int
		var err error
		s.reads++
		if len(s.iov) > 0 {
			n, err = rawReadv(fd, s.iov)
		} else {
			n, err = rawRead(fd, s.p)
		}
		parked := s.parked
		s.parked = false
		switch {
		case err == syscall.EINTR:
			s.parked = parked
			continue
		case err == syscall.EAGAIN:
			if !parked && s.prepare(fd) {
				continue
			}
			return false // the poller waits
		case err != nil:
			// As net.Conn.Read reports it.
			s.err = &net.OpError{Op: "read", Net: "tcp", Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(),
				Err: os.NewSyscallError("read", err)}
		case n == 0 && (len(s.p) > 0 || len(s.iov) > 0):
			s.err = io.EOF
		default:
			s.n = n
			s.drained = n < s.room
			s.co.read += int64(n)
			s.co.expired = false
		}
		return true
	}
}

// prepare flushes what is held and prepares the loop's wait: in a
// coalescing window, made at once (waitRaw), after which it reports true
// (read again); or in the poller (false).
func (s *flushingSource) prepare(fd uintptr) bool {
	s.flush()
	if s.co.window != nil {
		s.park(fd)
	}
	if s.co.armed && !s.co.deadline {
		s.waitRaw(fd)
		return true
	}
	return false
}

// park prepares the wait that follows an empty read: it decides from the
// stream's pace and the bytes read since the last wait whether the stream
// is coalesced (see coalescer), sets SO_RCVLOWAT when that changed, and
// bounds a coalescing wait by a deadline one window away.
func (s *flushingSource) park(fd uintptr) {
	co := &s.co
	now := time.Now()
	w := co.window()
	since := now.Sub(co.parkedAt)
	// The rate of the last cycle, in bytes per window.
	perWindow := int64(0)
	if since > 0 && w > 0 {
		perWindow = int64(float64(co.read) * float64(w) / float64(since))
	}
	if co.lowat == 0 {
		// A wait in the poller ended: the stream's pace, over the last
		// few of them (a quarter's weight to the newest).
		sample := min(since, cycleMax)
		if co.waits == 0 {
			co.cycle = sample
		}
		co.cycle += (sample - co.cycle) / 4
	}
	co.parkedAt, co.read = now, 0
	co.waits++
	switch {
	case w <= 0 || co.expired:
		if co.lowat > 0 {
			s.setLowat(fd, 0)
		}
	case co.lowat == 0 && (perWindow >= denseBytes || co.cycle < w):
		s.setLowat(fd, lowatFor(fd, perWindow))
	case co.lowat > 0 && perWindow > int64(2*co.lowat) && co.lowat < lowatMax:
		// Woken by lowat much sooner than the window: raise it, as far as
		// the receive buffer (which the kernel grows for a fast stream)
		// allows.
		if l := lowatFor(fd, perWindow); l > co.lowat {
			s.setLowat(fd, l)
		}
	}
	co.expired = false
	if co.lowat > 0 {
		co.armed, co.rawUntil = true, now.Add(w)
		if raw := rawWaits && !co.rawOff && runtime.GOMAXPROCS(0) >= 2; !raw {
			s.conn.SetReadDeadline(now.Add(w))
			co.deadline = true
		} else if co.deadline {
			co.deadline = false
			co.dl.rearm()
		}
	} else if co.armed {
		co.armed = false
		if co.deadline {
			co.deadline = false
			co.dl.rearm()
		}
	}
}

// waitRaw is the wait of a coalesced stream, bounded by its window: rawWait,
// on the stream loop's thread and P, instead of a wait in Go's poller.
// Either way the thread sleeps once per wait; through the poller the
// runtime also wakes a second thread for the goroutine the poller readies
// (an idle P looks for work), which finds none and sleeps again, and
// every window's read deadline wakes the thread blocked in the poller to
// recompute its timeout: at 512 B values, 1 replica, those were about
// three quarters of the proxy's context switches. Holding the P for a
// window (repl-read-coalesce-usec, when an operator sets one) while the stream is
// coalesced costs the other goroutines that P for as long, which is why it
// is done only with two Ps or more (runtime.GOMAXPROCS) and only while the
// stream is coalesced: a stream that leaves a window empty is read as it
// arrives again, its waits the poller's. The runtime's preemption and a
// stop of the world interrupt it (EINTR; sysmon preempts a goroutine that
// has not been rescheduled for 10 ms, which one waiting raw through
// windows never is): the goroutine yields (runtime.Gosched) and then waits
// out the rest of the window, its lowat kept. After the wait the loop
// reads again: what arrived, lowat bytes or fewer at the window's end. A Close meanwhile wakes no raw wait, and the
// socket stays open until the read in progress returns: it is seen by the
// next Read, once this one has returned its bytes (at most a window and a
// read after it began) or, after an empty window, by the poller's wait.
func (s *flushingSource) waitRaw(fd uintptr) {
	s.co.rawWaits.Add(1)
	ready, err := rawWait(fd, time.Until(s.co.rawUntil))
	for err == syscall.EINTR {
		runtime.Gosched()
		ready, err = rawWait(fd, time.Until(s.co.rawUntil))
	}
	switch {
	case err != nil:
		// Never expected of ppoll on one descriptor; the poller takes the
		// dense waits from now on; this one ends as an empty window does,
		// so that lowat goes back to a byte before the poller waits.
		s.co.rawOff = true
		s.co.armed = false
		s.co.expired = true
	case !ready:
		// The window ended before lowat bytes arrived: read what did.
		s.co.armed = false
		s.co.expired = true
	}
}

// lowatFor is the SO_RCVLOWAT for a stream of perWindow bytes per window:
// that, within [denseBytes/2, lowatMax] and at most a quarter of the
// socket's receive buffer.
func lowatFor(fd uintptr, perWindow int64) int {
	l := int(min(max(perWindow, denseBytes/2), lowatMax))
	if rcvbuf, err := rawGetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF); err == nil {
		l = min(l, rcvbuf/4)
	}
	return max(l, 1)
}

// setLowat sets SO_RCVLOWAT to v (0: the default, 1 byte). A socket that
// refuses it is read as it arrives.
func (s *flushingSource) setLowat(fd uintptr, v int) {
	if err := rawSetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, max(v, 1)); err != nil || v <= 1 {
		v = 0
	}
	s.co.lowat = v
}

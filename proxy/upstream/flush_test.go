package upstream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// TestFlushingSourceFlushesBeforeWaiting: bytes published while the
// primary's socket has more to read are held; the host is told of them
// once a read finds the socket empty, before it waits, or at once past
// flushBudget; the read deadline and EOF still end reads.
func TestFlushingSourceFlushesBeforeWaiting(t *testing.T) {
	primary, conn := redistest.TCPPair(t)
	var told atomic.Int64
	s := newFlushingSource(wire.NewCommandReader(conn, wire.Limits{}), conn, func() { told.Add(1) })
	if s == nil {
		t.Fatal("no flushing source on a TCP socket")
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if newFlushingSource(nil, p, nil) != nil {
		t.Fatal("a pipe got a flushing source")
	}
	if _, err := primary.Write(make([]byte, 3000)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	// The first reads find bytes: what they publish is held.
	for got := 0; got < 3000; {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += n
		s.published(int64(n))
	}
	if told.Load() != 0 {
		t.Fatalf("told %d times while the socket had more", told.Load())
	}
	// The next read finds the socket empty: it tells the host, then waits.
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(buf)
		done <- err
	}()
	redistest.WaitFor(t, 10*time.Second, "the host told before the read waits", func() bool { return told.Load() == 1 })
	primary.Write([]byte("x"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Past the budget the host is told at once.
	s.published(flushBudget)
	if told.Load() != 2 {
		t.Fatalf("told %d times after flushBudget held, want 2", told.Load())
	}
	// The read deadline still applies, as a timeout.
	conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var ne net.Error
	if _, err := s.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	conn.SetReadDeadline(time.Time{})
	primary.Close()
	if _, err := s.Read(buf); err != io.EOF {
		t.Fatalf("read after the primary closed: %v, want EOF", err)
	}
}

// TestFlushingSourceReadsIntoSeveralBuffers: ReadBuffers takes what the
// socket holds into all the buffers it is given with one readv, in order,
// where Read takes one buffer's room; bytes the handshake reader buffered
// come first, into the first buffer; EOF ends it as it ends Read.
func TestFlushingSourceReadsIntoSeveralBuffers(t *testing.T) {
	primary, conn := redistest.TCPPair(t)
	rd := wire.NewCommandReader(conn, wire.Limits{})
	s := newFlushingSource(rd, conn, func() {})
	// A line the handshake reads, with the start of the payload behind it
	// in the same write: the reader buffers that start.
	head := []byte("+CONTINUE\r\nabc")
	if _, err := primary.Write(head); err != nil {
		t.Fatal(err)
	}
	if line, err := rd.ReadReplyLine(64); err != nil || string(line) != "+CONTINUE" {
		t.Fatalf("handshake line %q, %v", line, err)
	}
	const size = 3*16384 + 100
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*131 + i>>9)
	}
	if _, err := primary.Write(data); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // loopback has queued it all
	bufs := make([][]byte, 5)
	for i := range bufs {
		bufs[i] = make([]byte, 16384)
	}
	n, err := s.ReadBuffers(bufs)
	if err != nil || n != 3 || string(bufs[0][:3]) != "abc" {
		t.Fatalf("first read %d bytes %q, %v: want the handshake reader's 3 buffered bytes", n, bufs[0][:n], err)
	}
	var got []byte
	calls := 0
	for len(got) < size {
		n, err := s.ReadBuffers(bufs)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		for _, b := range bufs {
			k := min(n, len(b))
			got = append(got, b[:k]...)
			n -= k
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes read are not the bytes written, in order")
	}
	if calls > 2 {
		t.Fatalf("%d reads for %d bytes queued in the socket, with room for all of them in each", calls, size)
	}
	primary.Close()
	if _, err := s.ReadBuffers(bufs); err != io.EOF {
		t.Fatalf("read after the primary closed: %v, want EOF", err)
	}
}

// waitModes are the two ways a dense stream's wait is made: rawWait on
// the loop's P (with two Ps or more), or the poller under a read deadline
// (one P, or rawWait unavailable). Each coalescer test runs in both.
var waitModes = []struct {
	name string
	raw  bool
}{{"raw", true}, {"poller", false}}

// inWaitModes runs test once per wait mode; raw runs under two Ps at
// least, so that the flushing source waits with rawWait.
func inWaitModes(t *testing.T, test func(t *testing.T, raw bool)) {
	for _, m := range waitModes {
		t.Run(m.name, func(t *testing.T) {
			if m.raw {
				withRawWaits(t)
			}
			test(t, m.raw)
		})
	}
}

// withRawWaits skips t where there are no raw waits, and runs it under
// two Ps at least, which they need.
func withRawWaits(t *testing.T) {
	t.Helper()
	if !rawWaits {
		t.Skip("no raw waits on this platform")
	}
	if n := runtime.GOMAXPROCS(0); n < 2 {
		runtime.GOMAXPROCS(2)
		t.Cleanup(func() { runtime.GOMAXPROCS(n) })
	}
}

// checkWaitMode fails unless the dense waits were made the way raw says.
func checkWaitMode(t *testing.T, s *flushingSource, raw bool) {
	t.Helper()
	if n := s.co.rawWaits.Load(); raw && n == 0 {
		t.Fatal("no dense wait was a raw one")
	} else if !raw && n != 0 {
		t.Fatalf("%d raw waits with raw waits off", n)
	}
}

// coalescePair is a loopback TCP connection read through a flushing source
// that coalesces in windows of window, under a repl-timeout of timeout;
// raw says whether its dense waits may be raw ones.
func coalescePair(t *testing.T, window, timeout time.Duration, raw bool) (primary net.Conn, s *flushingSource) {
	t.Helper()
	primary, conn := redistest.TCPPair(t)
	s = newFlushingSource(wire.NewCommandReader(conn, wire.Limits{}), conn, func() {})
	dl := &deadline{conn: conn, timeout: timeout}
	dl.touch(time.Now())
	s.coalesce(func() time.Duration { return window }, dl)
	s.co.rawOff = !raw
	return primary, s
}

// TestCoalescerFastStream: a stream of 1 KiB writes arriving far faster
// than denseBytes per window is read in far fewer waits than writes, every
// byte in order; once it stops, the last bytes come within about a window,
// not at lowat, and the socket is read as it arrives again.
func TestCoalescerFastStream(t *testing.T) { inWaitModes(t, testCoalescerFastStream) }

func testCoalescerFastStream(t *testing.T, raw bool) {
	const window = 20 * time.Millisecond
	primary, s := coalescePair(t, window, time.Minute, raw)
	const writes, size = 4096, 1024
	go func() {
		chunk := make([]byte, size)
		for i := range writes {
			for j := range chunk {
				chunk[j] = byte(i + j)
			}
			if _, err := primary.Write(chunk); err != nil {
				return
			}
			if i%16 == 15 {
				time.Sleep(100 * time.Microsecond) // about 100 MB/s: dense
			}
		}
	}()
	buf := make([]byte, 16<<10)
	for got := 0; got < writes*size; {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		for k := range n {
			i, j := (got+k)/size, (got+k)%size
			if buf[k] != byte(i+j) {
				t.Fatalf("byte %d: %d, want %d", got+k, buf[k], byte(i+j))
			}
		}
		got += n
	}
	if s.co.waits*8 > writes {
		t.Fatalf("%d waits for %d writes: the reads did not coalesce", s.co.waits, writes)
	}
	if s.co.lowat == 0 {
		t.Fatal("a dense stream left SO_RCVLOWAT at the default")
	}
	checkWaitMode(t, s, raw)
	t.Logf("%d waits (%d raw) for %d writes of %d bytes; lowat %d", s.co.waits, s.co.rawWaits.Load(), writes, size, s.co.lowat)

	// One small write after the stream stopped: it comes at the window's
	// end, not when lowat bytes would have gathered (never).
	time.Sleep(3 * window)
	start := time.Now()
	primary.Write([]byte("tail"))
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "tail" {
		t.Fatalf("read after the stream stopped: %q, %v", buf[:n], err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the tail took %v, window %v", took, window)
	}
	// The next wait finds nothing: the stream is read as it arrives.
	checkLeavesWhenSilent(t, s, primary, window)
}

// TestCoalescerSlowStream: writes that arrive less often than once per
// window are read as they arrive: SO_RCVLOWAT is never raised, and no
// write waits for the window.
func TestCoalescerSlowStream(t *testing.T) { inWaitModes(t, testCoalescerSlowStream) }

func testCoalescerSlowStream(t *testing.T, raw bool) {
	const window = 10 * time.Millisecond
	primary, s := coalescePair(t, window, time.Minute, raw)
	buf := make([]byte, 16<<10)
	for range 20 {
		time.Sleep(2 * window)
		primary.Write(make([]byte, 100))
		for got := 0; got < 100; {
			n, err := s.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		if n := s.co.rawWaits.Load(); s.co.lowat != 0 || s.co.armed || n != 0 {
			t.Fatalf("a slow stream: lowat %d, armed %v, %d raw waits; want 0, false, 0", s.co.lowat, s.co.armed, n)
		}
	}
}

// TestCoalescerPacedStream: small writes that arrive many times per window
// (a primary's packets under a steady load, far below denseBytes per
// window) are coalesced: read in about one wait and one read per window,
// not one of each per write, every byte in order and none later than a
// window or so; once they stop, a window with nothing in it ends the
// coalescing.
func TestCoalescerPacedStream(t *testing.T) { inWaitModes(t, testCoalescerPacedStream) }

func testCoalescerPacedStream(t *testing.T, raw bool) {
	const window = 20 * time.Millisecond
	const writes, size, every = 200, 100, 2 * time.Millisecond // 10 writes, 1 KB per window
	primary, s := coalescePair(t, window, time.Minute, raw)
	start := time.Now()
	go func() {
		for i := range writes {
			time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
			b := make([]byte, size)
			for j := range b {
				b[j] = byte(i)
			}
			if _, err := primary.Write(b); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 16<<10)
	var late time.Duration
	for got := 0; got < writes*size; {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		for k := range n {
			if want := byte((got + k) / size); buf[k] != want {
				t.Fatalf("byte %d: %d, want %d", got+k, buf[k], want)
			}
		}
		got += n
		// The last byte read was written at about start + (its write) * every.
		sent := start.Add(time.Duration((got-1)/size) * every)
		late = max(late, time.Since(sent))
	}
	waits, reads := s.co.waits, s.reads
	t.Logf("%d waits (%d raw), %d reads for %d writes; latest byte %v after its write", waits, s.co.rawWaits.Load(), reads, writes, late)
	// 400 ms of writes are 20 windows: allow for the waits before the
	// stream is found paced (about 14 packets' worth), and for a loaded
	// machine. A wait in the poller follows a read that failed, so there
	// it costs two reads (read as it arrives, 200 writes would be 200
	// waits and 400 reads); a raw wait, one.
	readsPerWait := int64(1)
	if !raw {
		readsPerWait = 2
	}
	if waits*3 > writes || reads*3 > writes*readsPerWait {
		t.Fatalf("%d waits and %d reads for %d writes: the reads did not coalesce", waits, reads, writes)
	}
	if s.co.lowat == 0 {
		t.Fatal("a paced stream left SO_RCVLOWAT at the default")
	}
	if late > 10*window {
		t.Fatalf("a byte came %v after its write, window %v", late, window)
	}
	checkWaitMode(t, s, raw)
	// The writes stopped: the next wait's window is empty, and the one
	// after it reads as the stream arrives.
	checkLeavesWhenSilent(t, s, primary, window)
}

// checkLeavesWhenSilent writes one byte three windows from now and reads
// it: a window with nothing in it ends the coalescing, so s reads as the
// stream arrives again (no SO_RCVLOWAT, no window armed).
func checkLeavesWhenSilent(t *testing.T, s *flushingSource, primary net.Conn, window time.Duration) {
	t.Helper()
	go func() {
		time.Sleep(3 * window)
		primary.Write([]byte("x"))
	}()
	if _, err := s.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if s.co.lowat != 0 || s.co.armed {
		t.Fatalf("after a silent window: lowat %d, armed %v; want 0, false", s.co.lowat, s.co.armed)
	}
}

// TestCoalescerReplTimeout: a dense stream that goes silent still ends in
// the repl-timeout's error, not in one of the coalescing deadlines.
func TestCoalescerReplTimeout(t *testing.T) { inWaitModes(t, testCoalescerReplTimeout) }

func testCoalescerReplTimeout(t *testing.T, raw bool) {
	const window = 5 * time.Millisecond
	primary, s := coalescePair(t, window, 100*time.Millisecond, raw)
	buf := make([]byte, 16<<10)
	go func() {
		chunk := make([]byte, 32<<10)
		for range 64 {
			if _, err := primary.Write(chunk); err != nil {
				return
			}
		}
	}()
	var got int
	for got < 64*32<<10 {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += n
	}
	start := time.Now()
	_, err := s.Read(buf)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read of a silent primary: %v, want a timeout", err)
	}
	// touch set it at repl-timeout + deadlineRefresh from the start.
	if took := time.Since(start); took < window*4 {
		t.Fatalf("timed out after %v: a coalescing deadline, not the repl-timeout's", took)
	}
}

// TestRawWaitYieldsToTheWorld: a raw wait holds its P for up to a window,
// but a stop of the world (here a GC's) does not wait for the window's
// end: the runtime's signal ends the wait (EINTR) and the loop yields, as
// a goroutine that runs would. With a window of 5 s and a stream that
// stopped while dense, a GC completes within a second.
func TestRawWaitYieldsToTheWorld(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 5 s): the raw wait lasts its 5 s window")
	}
	withRawWaits(t)
	const window = 5 * time.Second
	primary, s := coalescePair(t, window, time.Minute, true)
	const burst = 4 << 20
	// As if the last wait had just begun, so that the first wait's rate
	// is the burst's, whether or not a read found the socket empty in it.
	s.co.parkedAt = time.Now()
	go primary.Write(make([]byte, burst))
	var got atomic.Int64
	var rawAtEnd atomic.Int64 // raw waits made by the time the burst was read
	rawAtEnd.Store(-1)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if got.Add(int64(n)) == burst && rawAtEnd.Load() < 0 {
				rawAtEnd.Store(s.co.rawWaits.Load())
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	// Read whole, the stream dense: the next wait is a raw one, for up to
	// the window, and nothing more comes.
	redistest.WaitFor(t, 10*time.Second, "a raw wait after the burst", func() bool {
		n := rawAtEnd.Load()
		return n >= 0 && s.co.rawWaits.Load() > n
	})
	time.Sleep(10 * time.Millisecond) // inside ppoll by now
	start := time.Now()
	runtime.GC()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a GC during a raw wait took %v: it waited for the window (%v)", took, window)
	}
	primary.Close() // the wait ends at the stream's end
	if err := <-done; err != io.EOF {
		t.Fatalf("read after the primary closed: %v, want EOF", err)
	}
}

// TestRawWaitEndsAtClose: a Close of the link while its stream is dense,
// every wait a raw one, ends the reads within about a window: the socket
// stays open until the read in progress returns, and the loop, which keeps
// finding bytes, sees the Close after its next wait.
func TestRawWaitEndsAtClose(t *testing.T) {
	withRawWaits(t)
	const window = 50 * time.Millisecond
	primary, s := coalescePair(t, window, time.Minute, true)
	go func() { // dense until the link closes
		chunk := make([]byte, 64<<10)
		for {
			if _, err := primary.Write(chunk); err != nil {
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := s.Read(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	redistest.WaitFor(t, 10*time.Second, "raw waits", func() bool { return s.co.rawWaits.Load() > 3 })
	closed := make(chan struct{})
	start := time.Now()
	go func() {
		s.conn.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close still waiting after 5 s: the dense loop never saw it")
	}
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
	t.Logf("closed after %v (window %v)", time.Since(start), window)
}

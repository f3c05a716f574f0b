package redistest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/resp"
)

// The fake primary answers as a Redis 7.0.15 primary does, byte for byte
// (PROTOCOL §1.1, §2.1, §3), and sends whatever the test scripts,
// including what Redis never sends. It serves in two ways:
//
//   - On a listener ([StartFakePrimary]), for a replica that connects by
//     itself (a running proxy, a [Client]): it accepts each link, answers
//     its handshake up to PSYNC, then plays the main or the side script on
//     it (a side link is one that said REPLCONF rdb-only 1: a snapshot
//     fetch), or hands it to the test ([FakeHandOver], [FakePrimary.Next]).
//   - On one connection the test made ([NewFakeLink]), for a test that
//     drives a replica's session by hand: the script writes every byte
//     itself, the handshake's replies too, cut where the test wants.
//
// Either way a link reads the replica's commands as they come, so a script
// that writes never blocks the replica's writes (a net.Pipe has no
// buffer), and the script takes them ([FakeLink.Take]).

const (
	// FakeReplID is the fake primary's replication ID.
	FakeReplID = "3e6f7fa1b2ac2025fc6edcca60effe8ade398925"
	// FakeOffset is the offset of the fake primary's +FULLRESYNC until a
	// streaming link moves it ([FakeLink.Ping]).
	FakeOffset = 1000
	// FakeIOTimeout bounds every read and write of the fake primary, so a
	// test whose replica misbehaves fails instead of hanging.
	FakeIOTimeout = 10 * time.Second
	// FakeKeepalive is how often a streaming main link sends a PING
	// ([FakeLink.Stream]): far below the repl-timeout of 1 s tests use.
	FakeKeepalive = 100 * time.Millisecond
	// FakePing is a PING as a primary propagates it: 14 bytes.
	FakePing = "*1\r\n$4\r\nPING\r\n"

	// fakeQueue is how many of the replica's commands a link holds for its
	// script: past that the replica is flooding the primary, and the link
	// stops reading.
	fakeQueue = 1024
)

// FakeScript plays one link of a [FakePrimary] past its PSYNC. An error it
// returns is logged, unless the primary was closed meanwhile.
type FakeScript func(l *FakeLink) error

// FakeOptions configure a [FakePrimary].
type FakeOptions struct {
	// Main and Side play each main and each side link (nil: hang up).
	Main, Side FakeScript
	// RDB is the dataset [FakeLink.FullSync] sends.
	RDB []byte
	// Reply, when set, answers a handshake command before the defaults
	// (+PONG to PING, +OK to anything else): ok false leaves it to them.
	// The command's arguments are those sent, joined by spaces.
	Reply func(cmd string) (reply string, ok bool)
}

// FakePrimary accepts a replica's links on 127.0.0.1. Its exported
// counters are read with Load.
type FakePrimary struct {
	// Mains and Sides count the main and the side links handed to a
	// script.
	Mains, Sides atomic.Int32

	t        testing.TB
	ln       net.Listener
	opts     FakeOptions
	sessions chan *FakeLink // links handed to the test by FakeHandOver
	done     chan struct{}  // closed by Close: scripts waiting on the test give up

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open links; guarded by mu
	offset int64                 // the last byte a main link wrote; guarded by mu
	closed bool                  // guarded by mu
	wg     sync.WaitGroup        // acceptLoop, and each link's script and readLoop
}

// StartFakePrimary listens on a free port of 127.0.0.1. It stops, closing
// every link and waiting for its scripts, when the test ends.
func StartFakePrimary(t testing.TB, opts FakeOptions) *FakePrimary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &FakePrimary{t: t, ln: ln, opts: opts, sessions: make(chan *FakeLink, 16), done: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, offset: FakeOffset}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the host:port the primary listens on.
func (p *FakePrimary) Addr() string { return p.ln.Addr().String() }

// Port returns the port the primary listens on.
func (p *FakePrimary) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// ReplicaOf returns the command-line arguments that name the primary:
// --replicaof 127.0.0.1 <port>.
func (p *FakePrimary) ReplicaOf() []string {
	return []string{"--replicaof", "127.0.0.1", strconv.Itoa(p.Port())}
}

// ReplID returns the primary's replication ID, [FakeReplID].
func (p *FakePrimary) ReplID() string { return FakeReplID }

// RDB returns the dataset the primary sends; the caller must not change it.
func (p *FakePrimary) RDB() []byte { return p.opts.RDB }

// Done is closed once the primary is closed: a script waiting on the test
// gives up then.
func (p *FakePrimary) Done() <-chan struct{} { return p.done }

// Close stops accepting, closes every link and waits for the scripts. It
// is safe to call more than once.
func (p *FakePrimary) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

func (p *FakePrimary) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *FakePrimary) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		l := newLink(c, p)
		l.accepted = time.Now()
		p.wg.Go(l.readLoop)
		p.wg.Go(func() {
			defer func() {
				l.hungUpAt = time.Now()
				close(l.hungUp)
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				c.Close()
			}()
			if err := l.handshake(); err != nil {
				return
			}
			script := p.opts.Main
			if l.side {
				l.n = int(p.Sides.Add(1))
				script = p.opts.Side
			} else {
				l.n = int(p.Mains.Add(1))
			}
			if script == nil {
				return
			}
			if err := script(l); err != nil && !p.isClosed() {
				p.t.Logf("fake primary: link %d (side %v): %v", l.n, l.side, err)
			}
		})
	}
}

// Next waits for the replica's next link handed over by [FakeHandOver], up
// to its PSYNC.
func (p *FakePrimary) Next(t testing.TB) *FakeLink {
	t.Helper()
	select {
	case l := <-p.sessions:
		return l
	case <-time.After(FakeIOTimeout):
		t.Fatalf("fake primary: no link connected and sent PSYNC within %v", FakeIOTimeout)
		return nil
	}
}

// FakeLink is the primary's end of one link: past its PSYNC for one a
// [FakePrimary] accepted, from its first byte for one of [NewFakeLink].
type FakeLink struct {
	primary  *FakePrimary // nil for NewFakeLink's
	conn     net.Conn
	cmds     chan []string // the replica's commands, from readLoop; closed by it
	done     chan struct{} // closed when readLoop has returned
	side     bool          // the replica sent REPLCONF rdb-only 1
	psync    string        // the PSYNC as received, arguments joined by spaces
	n        int           // 1 for the first link of its kind, and so on
	accepted time.Time

	// hungUp is closed once a FakePrimary's link is over: its script
	// returned, which for FakeHandOver is when the replica hung up (or the
	// test closed the connection). hungUpAt is set before.
	hungUp   chan struct{}
	hungUpAt time.Time

	mu  sync.Mutex
	got []string // every command taken from cmds, arguments joined by spaces; guarded by mu
}

func newLink(conn net.Conn, p *FakePrimary) *FakeLink {
	return &FakeLink{primary: p, conn: conn, cmds: make(chan []string, fakeQueue), done: make(chan struct{}),
		hungUp: make(chan struct{})}
}

// NewFakeLink plays the primary on conn, the test's end of a connection
// whose other end it gives the replica: nothing is written but what the
// script writes. The test closes conn, which ends the link's reading
// ([FakeLink.Done]).
func NewFakeLink(conn net.Conn) *FakeLink {
	l := newLink(conn, nil)
	go l.readLoop()
	return l
}

// Conn returns the link's connection, for a script that writes through a
// writer of its own (a compressor).
func (l *FakeLink) Conn() net.Conn { return l.conn }

// Primary returns the primary that accepted the link; nil for
// [NewFakeLink]'s.
func (l *FakeLink) Primary() *FakePrimary { return l.primary }

// Side reports whether the replica sent REPLCONF rdb-only 1: a snapshot
// fetch.
func (l *FakeLink) Side() bool { return l.side }

// PSYNC returns the replica's PSYNC, arguments joined by spaces.
func (l *FakeLink) PSYNC() string { return l.psync }

// N returns the link's number among those of its kind: 1 for the first
// main link, 1 for the first side link, and so on.
func (l *FakeLink) N() int { return l.n }

// Accepted returns when the link was accepted.
func (l *FakeLink) Accepted() time.Time { return l.accepted }

// HungUp is closed once the link is over (see [FakeLink.HungUpAt]).
func (l *FakeLink) HungUp() <-chan struct{} { return l.hungUp }

// HungUpAt returns when the link ended; valid once [FakeLink.HungUp] is
// closed.
func (l *FakeLink) HungUpAt() time.Time { return l.hungUpAt }

// Done is closed once the link has stopped reading: its connection ended.
func (l *FakeLink) Done() <-chan struct{} { return l.done }

// readLoop reads commands until the connection ends.
func (l *FakeLink) readLoop() {
	defer close(l.done)
	defer close(l.cmds)
	rd := resp.NewReader(l.conn)
	for {
		v, _, _, err := rd.ReadMultiBulk()
		if err != nil {
			return
		}
		vals := v.Array()
		if len(vals) == 0 {
			continue // an empty line
		}
		args := make([]string, len(vals))
		for i, a := range vals {
			args[i] = a.String()
		}
		select {
		case l.cmds <- args:
		default:
			return // a replica flooding the primary: the test fails on what is missing
		}
	}
}

// ErrFakeClosed is what [FakeLink.Take] returns once the replica's end is
// closed.
var ErrFakeClosed = errors.New("fake primary: connection closed")

// Take returns the replica's next command, waiting until deadline, and
// records it (see [FakeLink.Got]).
func (l *FakeLink) Take(deadline time.Time) ([]string, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case args, ok := <-l.cmds:
		if !ok {
			return nil, ErrFakeClosed
		}
		l.record(args)
		return args, nil
	case <-timer.C:
		return nil, os.ErrDeadlineExceeded
	}
}

func (l *FakeLink) record(args []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, strings.Join(args, " "))
}

// Got returns every command taken so far, the handshake's included,
// arguments joined by spaces.
func (l *FakeLink) Got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// Received waits until the link has stopped reading, takes every command
// still queued, and returns all the link received, in order. Only one
// goroutine takes commands: call it once the script has returned.
func (l *FakeLink) Received() []string {
	<-l.done
	for args := range l.cmds {
		l.record(args)
	}
	return l.Got()
}

// ReadCommand returns the replica's next command, waiting up to
// [FakeIOTimeout].
func (l *FakeLink) ReadCommand() ([]string, error) {
	return l.Take(time.Now().Add(FakeIOTimeout))
}

// Await takes commands until want (arguments joined by spaces) arrives,
// waiting up to timeout.
func (l *FakeLink) Await(want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		args, err := l.Take(deadline)
		switch {
		case errors.Is(err, ErrFakeClosed):
			return fmt.Errorf("connection closed before %q; got %q", want, l.Got())
		case err != nil:
			return fmt.Errorf("no %q within %v; got %q", want, timeout, l.Got())
		case strings.Join(args, " ") == want:
			return nil
		}
	}
}

// handshake answers everything up to PSYNC as a Redis primary does, or as
// the primary's Reply says.
func (l *FakeLink) handshake() error {
	for {
		args, err := l.ReadCommand()
		if err != nil {
			return err
		}
		cmd := strings.Join(args, " ")
		if strings.EqualFold(args[0], "PSYNC") {
			l.psync = cmd
			return nil
		}
		if len(args) == 3 && strings.EqualFold(args[0], "REPLCONF") && strings.EqualFold(args[1], "rdb-only") && args[2] == "1" {
			l.side = true
		}
		reply, ok := "", false
		if l.primary.opts.Reply != nil {
			reply, ok = l.primary.opts.Reply(cmd)
		}
		switch {
		case ok:
		case strings.EqualFold(args[0], "PING"):
			reply = "+PONG\r\n"
		default:
			reply = "+OK\r\n"
		}
		if err := l.Write(reply); err != nil {
			return err
		}
	}
}

// Write writes s to the replica, with the fake's deadline.
func (l *FakeLink) Write(s string) error {
	l.conn.SetWriteDeadline(time.Now().Add(FakeIOTimeout))
	_, err := io.WriteString(l.conn, s)
	return err
}

// WriteRaw is Write for bytes, which a large payload sends from one buffer
// again and again.
func (l *FakeLink) WriteRaw(p []byte) error {
	l.conn.SetWriteDeadline(time.Now().Add(FakeIOTimeout))
	_, err := l.conn.Write(p)
	return err
}

// MustWrite is Write for the test's goroutine: it fails the test on an
// error.
func (l *FakeLink) MustWrite(t testing.TB, s string) {
	t.Helper()
	if err := l.Write(s); err != nil {
		t.Fatalf("fake primary: write to the replica: %v", err)
	}
}

// Payload is "$<len>\r\n" and the primary's RDB.
func (l *FakeLink) Payload() string {
	return "$" + strconv.Itoa(len(l.primary.opts.RDB)) + "\r\n" + string(l.primary.opts.RDB)
}

// FullResync is "+FULLRESYNC <replid> <offset>\r\n" at the primary's
// current offset.
func (l *FakeLink) FullResync() string {
	l.primary.mu.Lock()
	off := l.primary.offset
	l.primary.mu.Unlock()
	return "+FULLRESYNC " + FakeReplID + " " + strconv.FormatInt(off, 10) + "\r\n"
}

// FullSync answers the PSYNC with +FULLRESYNC at the primary's current
// offset and the RDB, as a Redis primary does.
func (l *FakeLink) FullSync() error {
	return l.Write(l.FullResync() + l.Payload())
}

// GoodFetch serves a snapshot fetch well and waits for the replica to hang
// up, which it does after the payload.
func (l *FakeLink) GoodFetch() error {
	if err := l.FullSync(); err != nil {
		return err
	}
	l.AwaitHangup()
	return nil
}

// AwaitHangup takes what the replica sends until it hangs up (or
// [FakeIOTimeout] passes without a command), and reports whether it sent a
// REPLCONF ACK: on a main link, that it accepted the sync.
func (l *FakeLink) AwaitHangup() (acked bool) {
	for {
		args, err := l.ReadCommand()
		if err != nil {
			return acked
		}
		if len(args) >= 2 && strings.EqualFold(args[0], "REPLCONF") && strings.EqualFold(args[1], "ACK") {
			acked = true
		}
	}
}

// Stream plays a streaming main link: burst bytes of PINGs at once, then a
// PING every [FakeKeepalive], each accounted in the primary's offset,
// until the link fails. A second goroutine takes the replica's ACKs.
func (l *FakeLink) Stream(burst int) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.conn.Close()
	wg.Go(func() { l.AwaitHangup() })
	if err := l.Ping(burst / len(FakePing)); err != nil {
		return err
	}
	t := time.NewTicker(FakeKeepalive)
	defer t.Stop()
	for range t.C {
		if err := l.Ping(1); err != nil {
			return err
		}
	}
	return nil
}

// Ping writes n PINGs and moves the primary's offset past them; fetches
// served meanwhile see either all of them or none.
func (l *FakeLink) Ping(n int) error {
	l.primary.mu.Lock()
	defer l.primary.mu.Unlock()
	if err := l.Write(strings.Repeat(FakePing, n)); err != nil {
		return err
	}
	l.primary.offset += int64(n * len(FakePing))
	return nil
}

// WaitHangUp waits until the link is over: for [FakeHandOver], until the
// replica hangs up.
func (l *FakeLink) WaitHangUp(t testing.TB) {
	t.Helper()
	select {
	case <-l.hungUp:
	case <-time.After(FakeIOTimeout):
		t.Fatalf("fake primary: the replica did not drop the link within %v", FakeIOTimeout)
	}
}

// FakeHandOver is a main link script that hands the link to the test
// ([FakePrimary.Next]), which writes the PSYNC reply and the stream by
// hand, and takes the replica's commands until it hangs up.
func FakeHandOver(l *FakeLink) error {
	select {
	case l.primary.sessions <- l:
	case <-l.primary.done:
		return nil
	}
	l.AwaitHangup()
	return nil
}

// FakeGoodMain is a main link script that syncs well and then streams,
// first a burst of burst bytes.
func FakeGoodMain(burst int) FakeScript {
	return func(l *FakeLink) error {
		if err := l.FullSync(); err != nil {
			return err
		}
		return l.Stream(burst)
	}
}

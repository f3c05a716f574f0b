package proxy

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

	"github.com/replproxy/replproxy/proxy/wire"
)

// This file holds the tests' one fake primary. It answers as a Redis 7.0.15
// primary does, byte for byte (PROTOCOL §1.1, §2.1, §3), and sends whatever
// the test scripts, including what Redis never sends. It serves in two ways:
//
//   - On a listener (startFakePrimary), for a running proxy: it accepts each
//     link the proxy opens, answers its handshake itself up to PSYNC, then
//     plays the main or the side script on it, or hands it to the test
//     (fakeHandOver, next).
//   - On one connection the test made (newFakeLink), for a test that drives
//     the upstream's Serve by hand: the script writes every byte itself, the
//     handshake's replies too, cut where the test wants (upstream_link_test.go).
//
// Either way a link's readLoop reads the proxy's commands as they come, so a
// script that writes never blocks the proxy's writes (a net.Pipe has no
// buffer), and the script takes them from cmds.

const (
	linkReplID    = "3e6f7fa1b2ac2025fc6edcca60effe8ade398925"
	linkReplIDNew = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	linkEOFMark   = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c" // 40 random hex characters
	linkOffset    = 1000                                       // X of +FULLRESYNC <replid> X

	// fakeIOTimeout bounds every read and write of the harness, so a test
	// whose proxy misbehaves fails instead of hanging.
	fakeIOTimeout = 10 * time.Second
	// fakeKeepalive is how often a streaming main link sends a PING: far
	// below the repl-timeout of 1 s the tests use.
	fakeKeepalive = 100 * time.Millisecond
)

// fakePing is a PING as a primary propagates it: 14 bytes.
const fakePing = "*1\r\n$4\r\nPING\r\n"

// hostileDotsReplID is 40 characters that climb out of any directory.
var hostileDotsReplID = strings.Repeat("../", 13) + "x"

// linkRDB returns the bytes of testdata/rdb/small.rdb, a Redis 7.0 RDB with a
// valid CRC64 trailer: the fake primary's dataset.
func linkRDB(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakePrimary accepts the proxy's links. It answers the handshake itself
// (PING, AUTH, REPLCONF) up to PSYNC, then hands the link to the main or the
// side script by whether the proxy said REPLCONF rdb-only 1. The script
// fakeHandOver passes the link on to the test, through next.
type fakePrimary struct {
	t        testing.TB
	ln       net.Listener
	replID   string
	rdb      []byte
	main     func(hc *fakeLink) error
	side     func(hc *fakeLink) error
	sessions chan *fakeLink // links handed to the test by fakeHandOver
	done     chan struct{}  // closed by close: scripts waiting on the test give up

	mains atomic.Int32 // main links handed to the script
	sides atomic.Int32 // side links handed to the script

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open links; guarded by mu
	offset int64                 // the last byte a main link wrote; guarded by mu
	closed bool                  // guarded by mu
	wg     sync.WaitGroup        // acceptLoop, and each link's script and readLoop
}

// startFakePrimary listens on a free port; main and side play each link of
// their kind (nil: hang up). It stops, closing every link, when the test ends.
func startFakePrimary(t testing.TB, main, side func(hc *fakeLink) error) *fakePrimary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &fakePrimary{t: t, ln: ln, replID: linkReplID, rdb: linkRDB(t), main: main, side: side,
		sessions: make(chan *fakeLink, 16), done: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, offset: linkOffset}
	h.wg.Go(h.acceptLoop)
	t.Cleanup(h.close)
	return h
}

// replicaOf returns the --replicaof arguments naming h.
func (h *fakePrimary) replicaOf() []string {
	return []string{"--replicaof", "127.0.0.1", strconv.Itoa(h.ln.Addr().(*net.TCPAddr).Port)}
}

func (h *fakePrimary) close() {
	h.mu.Lock()
	h.closed = true
	close(h.done)
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.ln.Close()
	h.wg.Wait()
}

func (h *fakePrimary) acceptLoop() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			c.Close()
			return
		}
		h.conns[c] = struct{}{}
		h.mu.Unlock()
		hc := &fakeLink{primary: h, conn: c, cmds: make(chan []string, fakeQueue), done: make(chan struct{}),
			accepted: time.Now(), hungUp: make(chan struct{})}
		h.wg.Go(hc.readLoop)
		h.wg.Go(func() {
			defer func() {
				hc.hungUpAt = time.Now()
				close(hc.hungUp)
				h.mu.Lock()
				delete(h.conns, c)
				h.mu.Unlock()
				c.Close()
			}()
			if err := hc.handshake(); err != nil {
				return
			}
			script := h.main
			if hc.side {
				hc.n = int(h.sides.Add(1))
				script = h.side
			} else {
				hc.n = int(h.mains.Add(1))
			}
			if script == nil {
				return
			}
			if err := script(hc); err != nil && !h.isClosed() {
				h.t.Logf("fake primary: link %d (side %v): %v", hc.n, hc.side, err)
			}
		})
	}
}

func (h *fakePrimary) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// fakeQueue is how many of the proxy's commands a link holds for its script:
// past that the proxy is flooding the primary, and the link stops reading.
const fakeQueue = 1024

// fakeLink is the primary's end of one link from the proxy: past its PSYNC
// for one accepted by a fakePrimary, from its first byte for newFakeLink's.
type fakeLink struct {
	// primary is the fakePrimary that accepted the link, whose replid, RDB
	// and offset its helpers use; nil for newFakeLink's, whose script writes
	// every byte itself.
	primary  *fakePrimary
	conn     net.Conn
	cmds     chan []string // the proxy's commands, from readLoop; closed by it
	done     chan struct{} // closed when readLoop has returned
	side     bool          // the proxy sent REPLCONF rdb-only 1: a snapshot fetch
	psync    string        // the PSYNC as received, arguments joined by spaces
	n        int           // 1 for the first link of its kind, and so on
	accepted time.Time     // when the link was accepted

	// got is every command taken from cmds, arguments joined by spaces;
	// owned by whichever goroutine takes them (the script), then by the
	// test.
	got []string

	// hungUp is closed once the link is over: its script returned, which
	// for fakeHandOver is when the proxy hung up (or the test closed
	// conn). hungUpAt is set before.
	hungUp   chan struct{}
	hungUpAt time.Time
}

// newFakeLink plays the primary on conn, the test's end of a connection
// whose other end it gives the proxy: nothing is written but what the script
// writes. The test closes conn, which ends readLoop (done).
func newFakeLink(conn net.Conn) *fakeLink {
	f := &fakeLink{conn: conn, cmds: make(chan []string, fakeQueue), done: make(chan struct{})}
	go f.readLoop()
	return f
}

// readLoop reads commands until the connection ends.
func (f *fakeLink) readLoop() {
	defer close(f.done)
	defer close(f.cmds)
	rd := wire.NewCommandReader(f.conn, wire.Limits{})
	for {
		args, err := linkReadArgs(rd)
		if err != nil {
			return
		}
		select {
		case f.cmds <- args:
		default:
			return // a proxy flooding the primary: the test fails on what is missing
		}
	}
}

// linkReadArgs reads the next command that has arguments, as a primary
// reads its replica's, and returns them as strings.
func linkReadArgs(rd *wire.CommandReader) ([]string, error) {
	for {
		cmd, err := rd.ReadCommand()
		if err != nil {
			return nil, err
		}
		if len(cmd.Args) == 0 {
			continue
		}
		args := make([]string, len(cmd.Args))
		for i, a := range cmd.Args {
			args[i] = string(a)
		}
		return args, nil
	}
}

// errFakeClosed is what take returns once the proxy's end is closed.
var errFakeClosed = errors.New("fake primary: connection closed")

// take returns the proxy's next command, waiting until deadline, and
// records it in got.
func (f *fakeLink) take(deadline time.Time) ([]string, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case args, ok := <-f.cmds:
		if !ok {
			return nil, errFakeClosed
		}
		f.got = append(f.got, strings.Join(args, " "))
		return args, nil
	case <-timer.C:
		return nil, os.ErrDeadlineExceeded
	}
}

// readCommand returns the proxy's next command, waiting up to fakeIOTimeout.
func (f *fakeLink) readCommand() ([]string, error) {
	return f.take(time.Now().Add(fakeIOTimeout))
}

// await takes commands until want arrives, waiting up to linkTimeout.
func (f *fakeLink) await(want string) error {
	deadline := time.Now().Add(linkTimeout)
	for {
		_, err := f.take(deadline)
		switch {
		case errors.Is(err, errFakeClosed):
			return fmt.Errorf("connection closed before %q; got %q", want, f.got)
		case err != nil:
			return fmt.Errorf("no %q within %v; got %q", want, linkTimeout, f.got)
		case f.got[len(f.got)-1] == want:
			return nil
		}
	}
}

// handshake answers everything up to PSYNC as a Redis primary does.
func (f *fakeLink) handshake() error {
	for {
		args, err := f.readCommand()
		if err != nil {
			return err
		}
		var reply string
		switch strings.ToUpper(args[0]) {
		case "PING":
			reply = "+PONG\r\n"
		case "PSYNC":
			f.psync = strings.Join(args, " ")
			return nil
		case "REPLCONF":
			if len(args) == 3 && strings.EqualFold(args[1], "rdb-only") && args[2] == "1" {
				f.side = true
			}
			reply = "+OK\r\n"
		default:
			reply = "+OK\r\n"
		}
		if err := f.write(reply); err != nil {
			return err
		}
	}
}

// write writes s to the proxy as the primary, with the harness's deadline.
func (f *fakeLink) write(s string) error {
	f.conn.SetWriteDeadline(time.Now().Add(fakeIOTimeout))
	_, err := io.WriteString(f.conn, s)
	return err
}

// writeRaw is write for bytes, which a large payload sends from one buffer
// again and again.
func (f *fakeLink) writeRaw(p []byte) error {
	f.conn.SetWriteDeadline(time.Now().Add(fakeIOTimeout))
	_, err := f.conn.Write(p)
	return err
}

// mustWrite is write for the test's goroutine: it fails the test on an
// error.
func (f *fakeLink) mustWrite(t testing.TB, s string) {
	t.Helper()
	if err := f.write(s); err != nil {
		t.Fatalf("write to the proxy: %v", err)
	}
}

// payload is "$<len>\r\n" and the primary's RDB.
func (f *fakeLink) payload() string {
	return "$" + strconv.Itoa(len(f.primary.rdb)) + "\r\n" + string(f.primary.rdb)
}

// fullSync answers +FULLRESYNC with the primary's replid at its current
// offset, and the RDB, as a Redis primary does.
func (f *fakeLink) fullSync() error {
	return f.write(f.fullResync() + f.payload())
}

// fullResync is "+FULLRESYNC <replid> <offset>\r\n" at the primary's
// current offset.
func (f *fakeLink) fullResync() string {
	f.primary.mu.Lock()
	off := f.primary.offset
	f.primary.mu.Unlock()
	return "+FULLRESYNC " + f.primary.replID + " " + strconv.FormatInt(off, 10) + "\r\n"
}

// goodFetch serves a snapshot fetch well and waits for the proxy to hang up,
// which it does after the payload.
func (f *fakeLink) goodFetch() error {
	if err := f.fullSync(); err != nil {
		return err
	}
	f.awaitHangup()
	return nil
}

// awaitHangup takes what the proxy sends until it hangs up (or the harness
// gives up), and reports whether it sent a REPLCONF ACK: on a main link, that
// it accepted the sync.
func (f *fakeLink) awaitHangup() (acked bool) {
	for {
		args, err := f.readCommand()
		if err != nil {
			return acked
		}
		if len(args) >= 2 && strings.EqualFold(args[0], "REPLCONF") && strings.EqualFold(args[1], "ACK") {
			acked = true
		}
	}
}

// stream plays a streaming main link: burst bytes of PINGs at once, then a
// PING every fakeKeepalive, each accounted in the primary's offset, until
// the link fails. A second goroutine takes the proxy's ACKs.
func (f *fakeLink) stream(burst int) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer f.conn.Close()
	wg.Go(func() { f.awaitHangup() })
	if err := f.ping(burst / len(fakePing)); err != nil {
		return err
	}
	t := time.NewTicker(fakeKeepalive)
	defer t.Stop()
	for range t.C {
		if err := f.ping(1); err != nil {
			return err
		}
	}
	return nil
}

// ping writes n PINGs and moves the primary's offset past them; fetches served
// meanwhile see either all of them or none.
func (f *fakeLink) ping(n int) error {
	f.primary.mu.Lock()
	defer f.primary.mu.Unlock()
	if err := f.write(strings.Repeat(fakePing, n)); err != nil {
		return err
	}
	f.primary.offset += int64(n * len(fakePing))
	return nil
}

// fakeHandOver is a main link script that hands the link to the test
// (see next), which writes the PSYNC reply and the stream by hand, and takes
// the proxy's commands until it hangs up.
func fakeHandOver(hc *fakeLink) error {
	select {
	case hc.primary.sessions <- hc:
	case <-hc.primary.done:
		return nil
	}
	hc.awaitHangup()
	return nil
}

// next waits for the proxy's next link handed over by fakeHandOver, up to
// its PSYNC.
func (h *fakePrimary) next(t testing.TB) *fakeLink {
	t.Helper()
	select {
	case hc := <-h.sessions:
		return hc
	case <-time.After(fakeIOTimeout):
		t.Fatalf("the proxy did not connect and PSYNC within %v", fakeIOTimeout)
		return nil
	}
}

// waitHangUp waits until the link is over: for fakeHandOver, until the
// proxy hangs up.
func (f *fakeLink) waitHangUp(t testing.TB) {
	t.Helper()
	select {
	case <-f.hungUp:
	case <-time.After(fakeIOTimeout):
		t.Fatalf("the proxy did not drop the link within %v", fakeIOTimeout)
	}
}

// fakeGoodMain is a main link script that syncs well and then streams,
// first a burst of burst bytes.
func fakeGoodMain(burst int) func(hc *fakeLink) error {
	return func(hc *fakeLink) error {
		if err := hc.fullSync(); err != nil {
			return err
		}
		return hc.stream(burst)
	}
}

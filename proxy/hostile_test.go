package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// This file holds a fake primary (hostilePrimary: a listener that answers the
// handshake of each link the proxy opens, then plays a script, or hands the
// link to the test) and a raw replica (rawReplica: a TCP client that speaks
// PSYNC to the proxy and reads what comes back byte for byte). Together they
// drive a running proxy through what Redis never sends, and through streams
// the test writes by hand.

const (
	// hostileIOTimeout bounds every read and write of the harness, so a test
	// whose proxy misbehaves fails instead of hanging.
	hostileIOTimeout = 10 * time.Second
	// hostileKeepalive is how often a streaming main link sends a PING: far
	// below the repl-timeout of 1 s the tests use.
	hostileKeepalive = 100 * time.Millisecond
)

// hostilePing is a PING as a primary propagates it: 14 bytes.
const hostilePing = "*1\r\n$4\r\nPING\r\n"

// hostileDotsReplID is 40 characters that climb out of any directory.
var hostileDotsReplID = strings.Repeat("../", 13) + "x"

// hostilePrimary accepts the proxy's links. It answers the handshake itself
// (PING, AUTH, REPLCONF) up to PSYNC, then hands the link to the main or the
// side script by whether the proxy said REPLCONF rdb-only 1. The script
// hostileHandOver passes the link on to the test, through next.
type hostilePrimary struct {
	t        testing.TB
	ln       net.Listener
	replID   string
	rdb      []byte
	main     func(hc *hostileConn) error
	side     func(hc *hostileConn) error
	sessions chan *hostileConn // links handed to the test by hostileHandOver
	done     chan struct{}     // closed by close: scripts waiting on the test give up

	mains atomic.Int32 // main links handed to the script
	sides atomic.Int32 // side links handed to the script

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open links; guarded by mu
	offset int64                 // the last byte a main link wrote; guarded by mu
	closed bool                  // guarded by mu
	wg     sync.WaitGroup
}

// startHostilePrimary listens on a free port; main and side play each link of
// their kind (nil: hang up). It stops, closing every link, when the test ends.
func startHostilePrimary(t testing.TB, main, side func(hc *hostileConn) error) *hostilePrimary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostilePrimary{t: t, ln: ln, replID: linkReplID, rdb: linkRDB(t), main: main, side: side,
		sessions: make(chan *hostileConn, 16), done: make(chan struct{}),
		conns: map[net.Conn]struct{}{}, offset: linkOffset}
	h.wg.Go(h.acceptLoop)
	t.Cleanup(h.close)
	return h
}

// replicaOf returns the --replicaof arguments naming h.
func (h *hostilePrimary) replicaOf() []string {
	return []string{"--replicaof", "127.0.0.1", strconv.Itoa(h.ln.Addr().(*net.TCPAddr).Port)}
}

func (h *hostilePrimary) close() {
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

func (h *hostilePrimary) acceptLoop() {
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
		hc := &hostileConn{h: h, conn: c, rd: wire.NewCommandReader(c, wire.Limits{}),
			accepted: time.Now(), hungUp: make(chan struct{})}
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
				h.t.Logf("hostile primary: link %d (side %v): %v", hc.n, hc.side, err)
			}
		})
	}
}

func (h *hostilePrimary) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// hostileConn is one link from the proxy, past its PSYNC.
type hostileConn struct {
	h        *hostilePrimary
	conn     net.Conn
	rd       *wire.CommandReader
	side     bool      // the proxy sent REPLCONF rdb-only 1: a snapshot fetch
	psync    string    // the PSYNC as received, arguments joined by spaces
	n        int       // 1 for the first link of its kind, and so on
	accepted time.Time // when the link was accepted

	// hungUp is closed once the link is over: its script returned, which
	// for hostileHandOver is when the proxy hung up (or the test closed
	// conn). hungUpAt is set before.
	hungUp   chan struct{}
	hungUpAt time.Time
}

// handshake answers everything up to PSYNC as a Redis primary does.
func (hc *hostileConn) handshake() error {
	for {
		args, err := hc.readCommand()
		if err != nil {
			return err
		}
		var reply string
		switch strings.ToUpper(args[0]) {
		case "PING":
			reply = "+PONG\r\n"
		case "PSYNC":
			hc.psync = strings.Join(args, " ")
			return nil
		case "REPLCONF":
			if len(args) == 3 && strings.EqualFold(args[1], "rdb-only") && args[2] == "1" {
				hc.side = true
			}
			reply = "+OK\r\n"
		default:
			reply = "+OK\r\n"
		}
		if err := hc.write(reply); err != nil {
			return err
		}
	}
}

func (hc *hostileConn) readCommand() ([]string, error) {
	hc.conn.SetReadDeadline(time.Now().Add(hostileIOTimeout))
	return linkReadArgs(hc.rd)
}

func (hc *hostileConn) write(s string) error {
	hc.conn.SetWriteDeadline(time.Now().Add(hostileIOTimeout))
	_, err := io.WriteString(hc.conn, s)
	return err
}

// mustWrite is write for the test's goroutine: it fails the test on an
// error.
func (hc *hostileConn) mustWrite(t testing.TB, s string) {
	t.Helper()
	if err := hc.write(s); err != nil {
		t.Fatalf("write to the proxy: %v", err)
	}
}

// payload is "$<len>\r\n" and the primary's RDB.
func (hc *hostileConn) payload() string {
	return "$" + strconv.Itoa(len(hc.h.rdb)) + "\r\n" + string(hc.h.rdb)
}

// fullSync answers +FULLRESYNC with the primary's replid at its current
// offset, and the RDB, as a Redis primary does.
func (hc *hostileConn) fullSync() error {
	return hc.write(hc.fullResync() + hc.payload())
}

// fullResync is "+FULLRESYNC <replid> <offset>\r\n" at the primary's
// current offset.
func (hc *hostileConn) fullResync() string {
	hc.h.mu.Lock()
	off := hc.h.offset
	hc.h.mu.Unlock()
	return "+FULLRESYNC " + hc.h.replID + " " + strconv.FormatInt(off, 10) + "\r\n"
}

// goodFetch serves a snapshot fetch well and waits for the proxy to hang up,
// which it does after the payload.
func (hc *hostileConn) goodFetch() error {
	if err := hc.fullSync(); err != nil {
		return err
	}
	hc.awaitHangup()
	return nil
}

// awaitHangup reads what the proxy sends until it hangs up (or the harness
// gives up), and reports whether it sent a REPLCONF ACK: on a main link, that
// it accepted the sync.
func (hc *hostileConn) awaitHangup() (acked bool) {
	for {
		args, err := hc.readCommand()
		if err != nil {
			return acked
		}
		if len(args) >= 2 && strings.EqualFold(args[0], "REPLCONF") && strings.EqualFold(args[1], "ACK") {
			acked = true
		}
	}
}

// stream plays a streaming main link: burst bytes of PINGs at once, then a
// PING every hostileKeepalive, each accounted in the primary's offset, until
// the link fails. A second goroutine takes the proxy's ACKs.
func (hc *hostileConn) stream(burst int) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer hc.conn.Close()
	wg.Go(func() { hc.awaitHangup() })
	if err := hc.ping(burst / len(hostilePing)); err != nil {
		return err
	}
	t := time.NewTicker(hostileKeepalive)
	defer t.Stop()
	for range t.C {
		if err := hc.ping(1); err != nil {
			return err
		}
	}
	return nil
}

// ping writes n PINGs and moves the primary's offset past them; fetches served
// meanwhile see either all of them or none.
func (hc *hostileConn) ping(n int) error {
	hc.h.mu.Lock()
	defer hc.h.mu.Unlock()
	if err := hc.write(strings.Repeat(hostilePing, n)); err != nil {
		return err
	}
	hc.h.offset += int64(n * len(hostilePing))
	return nil
}

// hostileHandOver is a main link script that hands the link to the test
// (see next), which writes the PSYNC reply and the stream by hand, and takes
// the proxy's commands until it hangs up.
func hostileHandOver(hc *hostileConn) error {
	select {
	case hc.h.sessions <- hc:
	case <-hc.h.done:
		return nil
	}
	hc.awaitHangup()
	return nil
}

// next waits for the proxy's next link handed over by hostileHandOver, up to
// its PSYNC.
func (h *hostilePrimary) next(t testing.TB) *hostileConn {
	t.Helper()
	select {
	case hc := <-h.sessions:
		return hc
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not connect and PSYNC within 10s")
		return nil
	}
}

// waitHangUp waits until the link is over: for hostileHandOver, until the
// proxy hangs up.
func (hc *hostileConn) waitHangUp(t testing.TB) {
	t.Helper()
	select {
	case <-hc.hungUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not drop the link within 10s")
	}
}

// hostileGoodMain is a main link script that syncs well and then streams,
// first a burst of burst bytes.
func hostileGoodMain(burst int) func(hc *hostileConn) error {
	return func(hc *hostileConn) error {
		if err := hc.fullSync(); err != nil {
			return err
		}
		return hc.stream(burst)
	}
}

// startHostileProxy runs a proxy replicating from h with a 1 s repl-timeout
// and the smallest backlog, and waits for its link to be up.
func startHostileProxy(t testing.TB, h *hostilePrimary, args ...string) *testProxy {
	t.Helper()
	p := startProxy(t, append(append(h.replicaOf(), "--repl-timeout", "1", "--repl-backlog-size", "16kb"), args...)...)
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool { return p.up.State() == upstream.StateConnected })
	return p
}

// waitSnapshotUnservable waits until the backlog no longer holds the byte
// after the proxy's snapshot, so that a full sync needs a fetch.
func waitSnapshotUnservable(t testing.TB, p *testProxy) {
	t.Helper()
	redistest.WaitFor(t, 10*time.Second, "snapshot out of the backlog", func() bool {
		sn := p.hist.Newest()
		if sn == nil {
			return true
		}
		c, err := p.hist.Stream().Attach(sn.Offset() + 1)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
}

// fetchInFlight reports whether the proxy has a snapshot fetch in flight.
func fetchInFlight(p *testProxy) bool {
	f, _ := p.hist.InFlight()
	return f != nil
}

// rawReplica is a replica of the proxy spoken byte for byte.
type rawReplica struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader

	// kept is what keep read in the background.
	kept struct {
		sync.Mutex
		b []byte
	}
}

// newRawReplica connects to the proxy and says nothing yet.
func newRawReplica(t testing.TB, p *testProxy) *rawReplica {
	t.Helper()
	c := p.dial(t)
	return &rawReplica{t: t, conn: c, br: bufio.NewReader(c)}
}

// dialRawReplica connects to the proxy and says REPLCONF listening-port and,
// if capaEOF, REPLCONF capa eof capa psync2 (else only capa psync2).
func dialRawReplica(t testing.TB, p *testProxy, capaEOF bool) *rawReplica {
	t.Helper()
	r := newRawReplica(t, p)
	capa := []string{"REPLCONF", "capa", "psync2"}
	if capaEOF {
		capa = []string{"REPLCONF", "capa", "eof", "capa", "psync2"}
	}
	for _, cmd := range [][]string{{"REPLCONF", "listening-port", "6380"}, capa} {
		if err := r.send(cmd...); err != nil {
			t.Fatal(err)
		}
		if line, err := r.readLine(); err != nil || line != "+OK" {
			t.Fatalf("%q: %q %v", cmd, line, err)
		}
	}
	return r
}

func (r *rawReplica) send(args ...string) error {
	r.conn.SetWriteDeadline(time.Now().Add(hostileIOTimeout))
	_, err := r.conn.Write(wire.AppendCommand(nil, args...))
	return err
}

// readLine reads one line without its CRLF: "" for a keepalive newline.
func (r *rawReplica) readLine() (string, error) {
	r.conn.SetReadDeadline(time.Now().Add(hostileIOTimeout))
	line, err := r.br.ReadString('\n')
	if err != nil {
		return line, err
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
}

// psync sends PSYNC and returns the first line of the answer that is not a
// keepalive newline.
func (r *rawReplica) psync(replID, offset string) (string, error) {
	if err := r.send("PSYNC", replID, offset); err != nil {
		return "", err
	}
	return r.reply()
}

// reply returns the next line that is not a keepalive newline.
func (r *rawReplica) reply() (string, error) {
	for {
		line, err := r.readLine()
		if err != nil || line != "" {
			return line, err
		}
	}
}

// payload reads a sync payload, either form, after keepalive newlines.
func (r *rawReplica) payload() ([]byte, error) {
	header, err := r.reply()
	if err != nil {
		return nil, fmt.Errorf("payload header: %w", err)
	}
	size, mark, err := upstream.ParsePayloadHeader(header)
	if err != nil {
		return nil, err
	}
	r.conn.SetReadDeadline(time.Now().Add(hostileIOTimeout))
	if mark == nil {
		b := make([]byte, size)
		_, err := io.ReadFull(r.br, b)
		return b, err
	}
	var b []byte
	for !bytes.HasSuffix(b, mark) {
		c, err := r.br.ReadByte()
		if err != nil {
			return b, err
		}
		b = append(b, c)
	}
	return b[:len(b)-len(mark)], nil
}

// fullSync checks that the answer to PSYNC ? -1 (or to a PSYNC that cannot
// continue) is a full sync of the primary's replid and RDB.
func (r *rawReplica) fullSync(h *hostilePrimary, replID, offset string) error {
	line, err := r.psync(replID, offset)
	if err != nil {
		return fmt.Errorf("PSYNC %s %s: %w", replID, offset, err)
	}
	if f := strings.Fields(line); len(f) != 3 || f[0] != "+FULLRESYNC" || f[1] != h.replID {
		return fmt.Errorf("PSYNC %s %s answered %q, want +FULLRESYNC %s <offset>", replID, offset, line, h.replID)
	}
	rdb, err := r.payload()
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if !bytes.Equal(rdb, h.rdb) {
		return fmt.Errorf("payload of %d bytes, want the primary's %d", len(rdb), len(h.rdb))
	}
	return nil
}

// rest reads until the proxy hangs up and returns what it sent.
func (r *rawReplica) rest() (string, error) {
	r.conn.SetReadDeadline(time.Now().Add(hostileIOTimeout))
	b, err := io.ReadAll(r.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), fmt.Errorf("the proxy did not hang up: %w", err)
	}
	return string(b), nil
}

// attachRawReplica connects to the proxy and, saying nothing before,
// continues its stream at off with PSYNC <linkReplID> <off>; from then on it
// keeps every byte the proxy relays, for received.
func attachRawReplica(t testing.TB, p *testProxy, off int64) *rawReplica {
	t.Helper()
	r := newRawReplica(t, p)
	if err := r.send("PSYNC", linkReplID, itoa(off)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.readLine(); err != nil || !strings.HasPrefix(line, "+CONTINUE") {
		t.Fatalf("PSYNC %s %d answered %q, %v; want +CONTINUE", linkReplID, off, line, err)
	}
	r.keep()
	return r
}

// keep reads everything the proxy sends from now on, with no deadline, until
// the connection ends; the test's cleanup closes it and waits.
func (r *rawReplica) keep() {
	r.conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	r.t.Cleanup(func() { r.conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := r.br.Read(buf)
			r.kept.Lock()
			r.kept.b = append(r.kept.b, buf[:n]...)
			r.kept.Unlock()
			if err != nil {
				return
			}
		}
	}()
}

// received returns what keep has read so far.
func (r *rawReplica) received() []byte {
	r.kept.Lock()
	defer r.kept.Unlock()
	return bytes.Clone(r.kept.b)
}

// waitReceived waits until keep has read as many bytes as want, then checks
// that they are want.
func (r *rawReplica) waitReceived(t testing.TB, want string) {
	t.Helper()
	redistest.WaitFor(t, 10*time.Second, "the replica to receive the stream", func() bool {
		return len(r.received()) >= len(want)
	})
	if got := r.received(); string(got) != want {
		t.Fatalf("the replica received %q, want %q", got, want)
	}
}

package redistest

import (
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RelayDown copies the target's direction of the relay's connection n (1
// for the first it accepted): from src, the target's end, to dst, the
// client's, until either fails or it decides to cut the connection. It
// reports whether it injected a fault, which [Relay.Stats] counts. A nil
// RelayDown copies everything untouched.
type RelayDown func(n int, dst io.Writer, src io.Reader) (fault bool)

// Relay forwards the connections it accepts to a target (a client's to a
// server, a replica's to its primary): the client's direction untouched,
// the target's through a [RelayDown], which may alter, cut or hold what
// it relays. Its goroutines and connections end with Close, which
// t.Cleanup calls.
type Relay struct {
	ln     net.Listener
	target string
	down   RelayDown

	wg sync.WaitGroup // acceptLoop and one serveConn per connection
	mu struct {
		sync.Mutex
		conns    map[net.Conn]struct{} // both sides of every open connection
		accepted int                   // connections accepted so far
		faults   int                   // faults injected so far
		closed   bool
	}
}

// relayDialTimeout bounds the relay's dial of its target.
const relayDialTimeout = 2 * time.Second

// StartRelay listens on addr ("127.0.0.1:0" for any free port) and
// forwards each connection to target, opened when the connection is
// accepted; a connection whose target cannot be reached is closed.
func StartRelay(t testing.TB, addr, target string, down RelayDown) *Relay {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	if down == nil {
		down = func(_ int, dst io.Writer, src io.Reader) bool { io.Copy(dst, src); return false }
	}
	r := &Relay{ln: ln, target: target, down: down}
	r.mu.conns = map[net.Conn]struct{}{}
	r.wg.Go(r.acceptLoop)
	t.Cleanup(r.Close)
	return r
}

// Addr returns the host:port the relay listens on.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Port returns the port the relay listens on.
func (r *Relay) Port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// PortString is Port as a command-line argument.
func (r *Relay) PortString() string { return strconv.Itoa(r.Port()) }

// Close stops accepting, closes every connection and waits for the relay's
// goroutines. It is safe to call more than once.
func (r *Relay) Close() {
	r.mu.Lock()
	r.mu.closed = true
	r.ln.Close()
	for c := range r.mu.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// DropAll closes every open connection, as a network failure would; the
// relay still accepts new ones.
func (r *Relay) DropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.mu.conns {
		c.Close()
	}
}

// Stats returns the connections accepted and the faults injected so far.
func (r *Relay) Stats() (accepted, faults int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.accepted, r.mu.faults
}

func (r *Relay) acceptLoop() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // Close
		}
		r.mu.Lock()
		r.mu.accepted++
		n := r.mu.accepted
		r.mu.Unlock()
		r.wg.Go(func() { r.serveConn(n, c) })
	}
}

// track registers conns for Close; it reports false once the relay is
// closed.
func (r *Relay) track(conns ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return false
	}
	for _, c := range conns {
		r.mu.conns[c] = struct{}{}
	}
	return true
}

func (r *Relay) untrack(conns ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range conns {
		delete(r.mu.conns, c)
		c.Close()
	}
}

// serveConn relays connection n until either side closes or the relay's
// RelayDown returns.
func (r *Relay) serveConn(n int, client net.Conn) {
	target, err := net.DialTimeout("tcp", r.target, relayDialTimeout)
	if err != nil {
		client.Close()
		return
	}
	if !r.track(client, target) {
		client.Close()
		target.Close()
		return
	}
	defer r.untrack(client, target)
	var wg sync.WaitGroup
	wg.Go(func() { // client → target, untouched
		io.Copy(target, client)
		if tc, ok := target.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	})
	if r.down(n, client, target) {
		r.mu.Lock()
		r.mu.faults++
		r.mu.Unlock()
	}
	client.Close()
	target.Close()
	wg.Wait()
}

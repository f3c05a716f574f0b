package downstream

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// A RecordConn is the connection a TLS client's tls.Conn runs on (the
// proxy wraps every accepted TLS connection in one), so that a TLS
// replica's records can be written by the producer's inline sender: while
// it captures (capture), the records crypto/tls writes go to the socket
// by one non-blocking write each, and what the socket does not take waits
// in pending, in order, for the replica's write loop (Flush). Otherwise
// Write sends what is pending and then its own bytes, blocking, as the
// connection's Write does.
//
// mu orders every write to the socket below: all of them happen under it,
// whether crypto/tls makes them for the write loop, for the inline sender,
// or on its own from the reading goroutine (an alert, the answer to a
// peer's key update), so their records reach the socket in the order
// crypto/tls numbered them. The inline sender only tries mu (capture): it
// never waits for a write that blocks.
type RecordConn struct {
	net.Conn
	mu        sync.Mutex
	capturing bool             // guarded by mu
	write     func([]byte) int // guarded by mu: the inline sender's non-blocking write while capturing
	pending   []byte           // guarded by mu: records written to the tls.Conn but not yet to the socket
}

// NewRecordConn returns conn wrapped for a tls.Conn to run on.
func NewRecordConn(conn net.Conn) *RecordConn { return &RecordConn{Conn: conn} }

// Write sends p to the socket after what is pending, blocking under the
// connection's deadline; while the inline sender captures, it writes p
// without blocking instead and keeps what the socket did not take.
func (c *RecordConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.capturing {
		rest := p
		if len(c.pending) == 0 {
			rest = p[c.write(p):]
		}
		c.pending = append(c.pending, rest...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// Flush sends what is pending, blocking under the connection's deadline.
func (c *RecordConn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

// Pending returns how many bytes of records wait to be sent.
func (c *RecordConn) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

func (c *RecordConn) flushLocked() error {
	for len(c.pending) > 0 {
		n, err := c.Conn.Write(c.pending)
		c.pending = c.pending[:copy(c.pending, c.pending[n:])]
		if err != nil {
			return err
		}
	}
	return nil
}

// capture begins an inline write: until release, the records written go
// to write, which must not block and returns what the socket took. It
// reports false, capturing nothing, while another write holds the socket
// or records are pending: those are the write loop's to send first.
func (c *RecordConn) capture(write func([]byte) int) bool {
	if !c.mu.TryLock() {
		return false
	}
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		return false
	}
	c.capturing, c.write = true, write
	return true
}

// release ends the capture and reports whether records are left for the
// write loop: the socket did not take them all, or a write failed (which
// the write loop then meets itself).
func (c *RecordConn) release() (left bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.capturing, c.write = false, nil
	return len(c.pending) > 0
}

// SyscallConn is the socket's, for its descriptor (listen.FD).
func (c *RecordConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("downstream: a TLS connection over no socket")
	}
	return sc.SyscallConn()
}

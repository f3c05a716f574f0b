package metrics

import (
	"net"
	"sync"
)

// A limitListener accepts at most cap connections at a time, as
// x/net/netutil's LimitListener does: Accept waits for a slot before it asks
// the kernel for the next connection, and a connection gives its slot back
// when it is closed. So connections past the cap stay in the kernel's
// accept queue, holding no descriptor of the process, instead of being
// accepted and closed (a descriptor and a goroutine per attempt).
type limitListener struct {
	net.Listener
	slots     chan struct{} // one token per connection open, or being accepted
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, cap int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, cap), done: make(chan struct{})}
}

// Accept waits for a free slot (or Close), then accepts.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close ends a waiting Accept and closes the listener; connections already
// accepted stay open. It may be called more than once.
func (l *limitListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// inUse is how many slots are taken: connections open, and an Accept under
// way.
func (l *limitListener) inUse() int { return len(l.slots) }

// A limitConn gives its listener's slot back when first closed.
type limitConn struct {
	net.Conn
	releaseOnce sync.Once
	release     func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

package metrics

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// A limitListener accepts at most cap connections at a time, as
// x/net/netutil's LimitListener does: Accept waits for a slot before it asks
// the kernel for the next connection, and a connection gives its slot back
// when it is closed. So connections past the cap stay in the kernel's
// accept queue, holding no descriptor of the process, instead of being
// accepted and closed (a descriptor and a goroutine per attempt).
//
// A slot is held by a request in progress, not by a connection: when every
// slot is taken, Accept reclaims the slot of the connection that has gone
// longest with no request in progress (an idle keep-alive connection, or
// one still sending its headers), once that has lasted reclaimAfter, and
// closes it. So clients that keep their connections open (keep-alive
// clients asking every few seconds, slow-loris clients sending a header
// byte at a time) cannot keep the next connection in the accept queue, a
// liveness probe's, out for longer than about reclaimAfter. reclaimAfter
// also bounds how fast such clients can make each other's connections
// churn (at most cap per reclaimAfter), where reclaiming at once would let
// two sets of them reconnect in a loop as fast as the CPU allows. Its owner
// tells it which connections have a request in progress (connState).
type limitListener struct {
	net.Listener
	cap          int
	reclaimAfter time.Duration
	now          func() time.Time

	mu struct {
		sync.Mutex
		conns     map[*limitConn]struct{} // connections open, each holding a slot
		accepting int                     // slots held by Accepts asking the kernel
	}
	changed   chan struct{} // one token: a slot freed, or a request ended
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, cap int, reclaimAfter time.Duration) *limitListener {
	l := &limitListener{
		Listener:     ln,
		cap:          cap,
		reclaimAfter: reclaimAfter,
		now:          time.Now,
		changed:      make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	l.mu.conns = make(map[*limitConn]struct{}, cap)
	return l
}

// Accept waits for a free slot (or Close), reclaiming one when every slot
// is taken, then accepts.
func (l *limitListener) Accept() (net.Conn, error) {
	if err := l.waitSlot(); err != nil {
		return nil, err
	}
	c, err := l.Listener.Accept()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.accepting--
	if err != nil {
		l.signal()
		return nil, err
	}
	lc := &limitConn{Conn: c, l: l, since: l.now()}
	l.mu.conns[lc] = struct{}{}
	return lc, nil
}

// waitSlot returns once it holds a slot for the next Accept: a free one, or
// one it reclaimed. It returns net.ErrClosed once the listener is closed.
func (l *limitListener) waitSlot() error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l.mu.Lock()
		if len(l.mu.conns)+l.mu.accepting < l.cap {
			l.mu.accepting++
			l.mu.Unlock()
			return nil
		}
		victim, wait := l.reclaimableLocked()
		l.mu.Unlock()
		if victim != nil {
			victim.Close() // gives its slot back
			continue
		}
		var expired <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			expired = timer.C
		}
		select {
		case <-l.changed:
		case <-expired:
		case <-l.done:
			return net.ErrClosed
		}
	}
}

// reclaimableLocked returns the connection that has gone longest with no
// request in progress, if that has lasted reclaimAfter; else how long until
// it will have (0 when every connection has a request in progress: a
// request's end signals changed).
func (l *limitListener) reclaimableLocked() (*limitConn, time.Duration) {
	var oldest *limitConn
	for c := range l.mu.conns {
		if !c.busy && (oldest == nil || c.since.Before(oldest.since)) {
			oldest = c
		}
	}
	if oldest == nil {
		return nil, 0
	}
	if wait := oldest.since.Add(l.reclaimAfter).Sub(l.now()); wait > 0 {
		return nil, wait
	}
	return oldest, 0
}

// connState is the http.Server's ConnState hook: it records which
// connections have a request in progress (from its headers' end to its
// reply's), whose slots are not reclaimed. Over TLS the server's
// connection is a *tls.Conn around the limitConn.
func (l *limitListener) connState(c net.Conn, state http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateActive:
		lc.busy = true
	case http.StateIdle:
		lc.busy = false
		lc.since = l.now()
		l.signal()
	}
}

// full reports whether every slot is held by a connection: a new
// connection then waits in the accept queue until one is closed.
func (l *limitListener) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.conns) >= l.cap
}

// signal wakes a waiting Accept to look at the slots again.
func (l *limitListener) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
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
func (l *limitListener) inUse() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.mu.conns) + l.mu.accepting
}

// A limitConn gives its listener's slot back when first closed.
type limitConn struct {
	net.Conn
	l           *limitListener
	releaseOnce sync.Once

	busy  bool      // guarded by l.mu: a request is in progress
	since time.Time // guarded by l.mu: when the connection was accepted, or its last request ended
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		delete(c.l.mu.conns, c)
		c.l.signal()
	})
	return err
}

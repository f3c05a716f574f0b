package pubsub

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
)

// writeChunk is the most one write of an outbox sends: each write has its
// own deadline, and the caller counts the bytes of each.
const writeChunk = 256 << 10

// Over is Put's verdict on a subscriber's output against
// client-output-buffer-limit pubsub.
type Over uint8

const (
	// Within: the output is within the limit.
	Within Over = iota
	// OverHard: the output would reach the hard limit; what was put is not
	// queued.
	OverHard
	// OverSoft: the output has been at or over the soft limit for longer
	// than its period.
	OverSoft
)

// String names the limit, as Redis's client-output-buffer-limit classes do:
// "hard" or "soft" ("" for Within).
func (o Over) String() string {
	switch o {
	case OverHard:
		return "hard"
	case OverSoft:
		return "soft"
	}
	return ""
}

// An Outbox holds what is to be written to a subscribed client, replies and
// messages in the order they were put, for its WriteLoop. The client's own
// goroutine and publishers put into it; WriteLoop alone writes the socket.
type Outbox struct {
	mu        sync.Mutex
	pending   []byte    // guarded by mu: bytes not yet taken by WriteLoop
	inflight  int64     // guarded by mu: bytes WriteLoop is writing
	overSince time.Time // guarded by mu: since when the output is at or over the soft limit; zero below it
	closed    bool      // guarded by mu: WriteLoop ended or is told to; nothing more is queued

	size *atomic.Int64 // pending + inflight, for the caller to read; written under mu
	wake chan struct{} // one token: pending has bytes, or closed was set
	done chan struct{} // closed when WriteLoop returns
}

// NewOutbox returns an empty outbox that keeps in size how many bytes it
// holds (pending and being written), for the client's owner to read at any
// time.
func NewOutbox(size *atomic.Int64) *Outbox {
	return &Outbox{size: size, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Put queues b (copied) unless the box is stopped, and applies lim to what
// the client then has pending, as Redis's checkClientOutputBufferLimits
// does after each reply: at or over Hard (b is then not queued), or at or
// over Soft for longer than SoftPeriod, it returns the limit passed and how
// much was pending. now is the time of the put, for the soft period. Any
// goroutine.
func (o *Outbox) Put(b []byte, lim config.OutputBufferLimit, now time.Time) (Over, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return Within, 0
	}
	used := int64(len(o.pending)) + o.inflight + int64(len(b))
	if lim.Hard > 0 && used >= lim.Hard {
		// Not queued: the client is closed, so a large message costs no
		// copy per slow subscriber.
		return OverHard, used
	}
	o.pending = append(o.pending, b...)
	o.size.Store(used)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	if lim.Soft > 0 && used >= lim.Soft {
		if o.overSince.IsZero() {
			o.overSince = now
		} else if now.Sub(o.overSince) > lim.SoftPeriod {
			return OverSoft, used
		}
	} else {
		o.overSince = time.Time{}
	}
	return Within, used
}

// Stop tells WriteLoop to end once it has written what is pending, or at
// once if its connection is closed; nothing put after it is queued. Any
// goroutine; idempotent.
func (o *Outbox) Stop() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Done is closed when WriteLoop has returned.
func (o *Outbox) Done() <-chan struct{} { return o.done }

// WriteLoop writes what is put into o to conn, in the order it was put,
// until o is stopped and empty (it then returns nil) or a write fails (it
// returns the error). Each write sends at most writeChunk bytes within
// timeout, and wrote is told of it: the bytes written and the error, after
// which, when there is one, o is closed (it takes nothing more) and
// WriteLoop returns. Closing conn is the caller's. One goroutine per outbox
// runs it; Done is closed when it returns.
func (o *Outbox) WriteLoop(conn net.Conn, timeout time.Duration, wrote func(n int, err error)) error {
	defer close(o.done)
	var spare []byte
	for {
		b := o.take(spare)
		if b == nil {
			return nil
		}
		for p := b; len(p) > 0; {
			conn.SetWriteDeadline(time.Now().Add(timeout))
			n, err := conn.Write(p[:min(len(p), writeChunk)])
			if err != nil {
				o.closeWriter()
			}
			wrote(n, err)
			if err != nil {
				return err
			}
			p = p[n:]
		}
		o.written()
		if cap(b) <= 1<<20 {
			spare = b // don't keep a huge buffer around
		} else {
			spare = nil
		}
	}
}

// take waits for pending bytes and takes them, handing back spare (the
// buffer last written) for reuse. It returns nil once the box is stopped
// and empty.
func (o *Outbox) take(spare []byte) []byte {
	for {
		o.mu.Lock()
		if n := len(o.pending); n > 0 {
			b := o.pending
			o.pending = spare[:0]
			o.inflight = int64(n)
			o.mu.Unlock()
			return b
		}
		closed := o.closed
		o.mu.Unlock()
		if closed {
			return nil
		}
		<-o.wake
	}
}

// written records that WriteLoop wrote what it took.
func (o *Outbox) written() {
	o.mu.Lock()
	o.inflight = 0
	o.size.Store(int64(len(o.pending)))
	o.mu.Unlock()
}

// closeWriter marks the box closed for good: WriteLoop can write no more.
func (o *Outbox) closeWriter() {
	o.mu.Lock()
	o.closed = true
	o.pending = nil
	o.inflight = 0
	o.size.Store(0)
	o.mu.Unlock()
}

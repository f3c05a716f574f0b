package pubsub

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
)

// recConn is a connection whose writes are recorded: each write takes all
// it is given, until fail writes have been made, when it fails.
type recConn struct {
	net.Conn // nil: only Write and SetWriteDeadline are called
	got      bytes.Buffer
	writes   []int
	fail     int // the write that fails (its index in writes); -1 for none
}

var errBroken = errors.New("broken pipe")

func (c *recConn) Write(p []byte) (int, error) {
	if len(c.writes) == c.fail {
		c.writes = append(c.writes, len(p)/2)
		c.got.Write(p[:len(p)/2])
		return len(p) / 2, errBroken
	}
	c.writes = append(c.writes, len(p))
	return c.got.Write(p)
}

func (c *recConn) SetWriteDeadline(time.Time) error { return nil }

func newTestOutbox() (*Outbox, *atomic.Int64) {
	var size atomic.Int64
	return NewOutbox(&size), &size
}

// put puts n bytes and checks Put's verdict and figure.
func put(t *testing.T, o *Outbox, n int, lim config.OutputBufferLimit, now time.Time, wantOver Over, wantPending int64) {
	t.Helper()
	over, pending := o.Put(make([]byte, n), lim, now)
	if over != wantOver || pending != wantPending {
		t.Fatalf("Put(%d bytes) = %v, %d; want %v, %d", n, over, pending, wantOver, wantPending)
	}
}

// TestOutboxHardLimit: a put that would take the output to the hard limit
// is refused and not queued; what WriteLoop is writing counts until it is
// written; 0 is no limit.
func TestOutboxHardLimit(t *testing.T) {
	o, size := newTestOutbox()
	lim := config.OutputBufferLimit{Hard: 100}
	now := time.Now()
	put(t, o, 60, lim, now, Within, 60)
	put(t, o, 40, lim, now, OverHard, 100)
	if got := size.Load(); got != 60 || len(o.pending) != 60 {
		t.Fatalf("after a refused put: size %d, pending %d; want 60, 60", got, len(o.pending))
	}
	put(t, o, 39, lim, now, Within, 99)

	b := o.take(nil) // WriteLoop has taken it: still the client's output
	put(t, o, 1, lim, now, OverHard, 100)
	if size.Load() != 99 {
		t.Fatalf("size %d while 99 bytes are being written; want 99", size.Load())
	}
	o.written()
	if size.Load() != 0 {
		t.Fatalf("size %d once written; want 0", size.Load())
	}
	put(t, o, 99, lim, now, Within, 99)
	if len(b) != 99 {
		t.Fatalf("took %d bytes, want 99", len(b))
	}

	u, _ := newTestOutbox()
	put(t, u, 1<<20, config.OutputBufferLimit{}, now, Within, 1<<20)
}

// TestOutboxSoftLimit: output at or over the soft limit is allowed for the
// soft period, and closed once a put finds it there for longer; falling
// under it starts the period again.
func TestOutboxSoftLimit(t *testing.T) {
	o, _ := newTestOutbox()
	lim := config.OutputBufferLimit{Soft: 10, SoftPeriod: time.Minute}
	t0 := time.Now()
	put(t, o, 9, lim, t0, Within, 9)
	put(t, o, 1, lim, t0.Add(time.Second), Within, 10) // at the limit from now on
	put(t, o, 1, lim, t0.Add(time.Second+time.Minute), Within, 11)
	put(t, o, 1, lim, t0.Add(time.Second+time.Minute+1), OverSoft, 12)

	// Written out, the next put is under the limit: the period starts anew.
	o.take(nil)
	o.written()
	put(t, o, 1, lim, t0.Add(2*time.Minute), Within, 1)
	put(t, o, 10, lim, t0.Add(3*time.Minute), Within, 11)
	put(t, o, 1, lim, t0.Add(4*time.Minute), Within, 12)
	put(t, o, 1, lim, t0.Add(4*time.Minute+1), OverSoft, 13)

	// No period: over the soft limit at a later put is too long.
	z, _ := newTestOutbox()
	lim = config.OutputBufferLimit{Soft: 10}
	put(t, z, 10, lim, t0, Within, 10)
	put(t, z, 1, lim, t0, Within, 11)
	put(t, z, 1, lim, t0.Add(1), OverSoft, 12)

	// Hard is checked first, and a soft verdict still queues what was put.
	h, size := newTestOutbox()
	lim = config.OutputBufferLimit{Hard: 20, Soft: 10}
	put(t, h, 15, lim, t0, Within, 15)
	put(t, h, 1, lim, t0.Add(1), OverSoft, 16)
	if size.Load() != 16 {
		t.Fatalf("size %d after a soft verdict; want 16 (queued)", size.Load())
	}
	put(t, h, 4, lim, t0.Add(2), OverHard, 20)
}

// TestOutboxWriteLoop: what is put is written in order, in writes of at
// most writeChunk, each counted; Stop ends the loop once all is written,
// and nothing put after it is queued.
func TestOutboxWriteLoop(t *testing.T) {
	o, size := newTestOutbox()
	var want []byte
	for i, n := range []int{3, writeChunk + 7, 1, 2 * writeChunk} {
		b := bytes.Repeat([]byte{byte('a' + i)}, n)
		want = append(want, b...)
		if over, _ := o.Put(b, config.OutputBufferLimit{}, time.Now()); over != Within {
			t.Fatalf("Put: %v", over)
		}
	}
	o.Stop()
	if over, pending := o.Put([]byte("late"), config.OutputBufferLimit{}, time.Now()); over != Within || pending != 0 {
		t.Fatalf("Put after Stop = %v, %d; want Within, 0", over, pending)
	}
	conn := &recConn{fail: -1}
	var counted int
	if err := o.WriteLoop(conn, time.Second, func(n int, err error) {
		if err != nil {
			t.Errorf("wrote told of %v", err)
		}
		counted += n
	}); err != nil {
		t.Fatalf("WriteLoop: %v", err)
	}
	select {
	case <-o.Done():
	default:
		t.Fatal("Done not closed after WriteLoop returned")
	}
	if !bytes.Equal(conn.got.Bytes(), want) {
		t.Fatalf("wrote %d bytes, not the %d put in order", conn.got.Len(), len(want))
	}
	if counted != len(want) {
		t.Fatalf("wrote counted %d bytes, want %d", counted, len(want))
	}
	for _, n := range conn.writes {
		if n > writeChunk {
			t.Fatalf("a write of %d bytes, over writeChunk (%d)", n, writeChunk)
		}
	}
	if size.Load() != 0 {
		t.Fatalf("size %d after all was written; want 0", size.Load())
	}
}

// TestOutboxWriteLoopWaits: WriteLoop waits for puts and writes each as it
// comes, until Stop.
func TestOutboxWriteLoopWaits(t *testing.T) {
	o, _ := newTestOutbox()
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	errc := make(chan error, 1)
	go func() { errc <- o.WriteLoop(server, time.Second, func(int, error) {}) }()
	for _, m := range []string{"one", "two", "three"} {
		o.Put([]byte(m), config.OutputBufferLimit{}, time.Now())
		buf := make([]byte, len(m))
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(client, buf); err != nil || string(buf) != m {
			t.Fatalf("read %q, %v; want %q", buf, err, m)
		}
	}
	o.Stop()
	if err := <-errc; err != nil {
		t.Fatalf("WriteLoop after Stop: %v", err)
	}
}

// TestOutboxWriteError: a failed write ends WriteLoop with its error, told
// to wrote with its bytes once the box is closed; the box then takes
// nothing and holds nothing.
func TestOutboxWriteError(t *testing.T) {
	o, size := newTestOutbox()
	o.Put(make([]byte, 3*writeChunk), config.OutputBufferLimit{}, time.Now())
	o.Stop() // what is pending is still written
	conn := &recConn{fail: 1}
	var counted int
	var failed error
	err := o.WriteLoop(conn, time.Second, func(n int, err error) {
		counted += n
		if err != nil {
			failed = err
			if over, pending := o.Put([]byte("x"), config.OutputBufferLimit{}, time.Now()); over != Within || pending != 0 {
				t.Errorf("Put when wrote is told of the error = %v, %d; want the box closed", over, pending)
			}
		}
	})
	if !errors.Is(err, errBroken) || !errors.Is(failed, errBroken) {
		t.Fatalf("WriteLoop = %v, wrote told of %v; want %v", err, failed, errBroken)
	}
	if want := writeChunk + writeChunk/2; counted != want {
		t.Fatalf("counted %d bytes, want %d (the failed write's too)", counted, want)
	}
	if size.Load() != 0 || o.pending != nil {
		t.Fatalf("after a failed write: size %d, %d pending; want none", size.Load(), len(o.pending))
	}
	select {
	case <-o.Done():
	default:
		t.Fatal("Done not closed after WriteLoop returned")
	}
}

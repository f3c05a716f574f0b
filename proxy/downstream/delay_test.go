package downstream

import (
	"bufio"
	"context"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// publishDated publishes n bytes on st, as the upstream link does, dated
// at (the time the read that brought them returned).
func publishDated(t testing.TB, st *replbuf.Stream, n int, at time.Time) {
	t.Helper()
	for n > 0 {
		p, err := st.FillCopy(make([]byte, n))
		if err != nil {
			t.Fatal(err)
		}
		n -= len(p)
	}
	st.Arrived(at)
	if err := st.Publish(st.Filled()); err != nil {
		t.Fatal(err)
	}
}

// TestReplicaDelay: a replica's two ages at one moment, from where its
// cursor (or its stream log reader) stands, where its stream began and
// what it acknowledged, against when each byte arrived.
func TestReplicaDelay(t *testing.T) {
	e := newTestEnv(t)
	st := e.hist.Stream()
	now := time.Now()
	// Bytes 1..100 arrived 3 s ago, 101..200 2 s ago, 201..300 1 s ago.
	for k := 3; k >= 1; k-- {
		publishDated(t, st, 100, now.Add(-time.Duration(k)*time.Second))
	}
	r := e.replica(Handshake{}, history.Plan{Partial: true, ReplID: replid.New()})
	attach := func(off int64) *replbuf.Cursor {
		c, err := st.Attach(off)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	for _, c := range []struct {
		name         string
		cursor       int64 // its next byte; 0: none
		disk         int64 // its next byte from the stream log; 0: not on the log
		from, acked  int64 // streamFrom, ackOff
		unsent, ackd time.Duration
	}{
		{name: "syncing: no position"},
		{name: "payload: the stream waits behind it", cursor: 101, unsent: 2 * time.Second},
		{name: "sent up to 100, no ACK yet", cursor: 101, from: 1, unsent: 2 * time.Second, ackd: 3 * time.Second},
		{name: "ACKed up to 50", cursor: 101, from: 1, acked: 50, unsent: 2 * time.Second, ackd: 3 * time.Second},
		{name: "ACKed all it was sent", cursor: 101, from: 1, acked: 100, unsent: 2 * time.Second},
		{name: "caught up, ACKed up to 150", cursor: 301, from: 1, acked: 150, ackd: 2 * time.Second},
		{name: "caught up and ACKed", cursor: 301, from: 1, acked: 300},
		{name: "partial resync from 201, no ACK", cursor: 301, from: 201, ackd: time.Second},
		{name: "an ACK ahead of what was sent", cursor: 201, from: 1, acked: 250, unsent: time.Second},
		{name: "on the stream log", disk: 201, from: 1, acked: 100, unsent: time.Second, ackd: 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			r.cursor.Store(nil)
			if c.cursor > 0 {
				r.cursor.Store(attach(c.cursor))
			}
			r.onDisk.Store(c.disk > 0)
			r.diskGen.Store(st.Generation())
			r.diskOff.Store(c.disk)
			r.streamFrom.Store(c.from)
			r.ackOff.Store(c.acked)
			// The marks date a byte by its read, up to the fine ring's
			// window early: ages err high by less than 100 µs.
			d := r.Delay(now)
			for _, x := range []struct {
				what      string
				got, want time.Duration
			}{{"unsent", d.Unsent, c.unsent}, {"unacked", d.Unacked, c.ackd}} {
				if x.got < x.want || x.got-x.want >= 100*time.Microsecond {
					t.Errorf("%s %v, want %v", x.what, x.got, x.want)
				}
			}
		})
	}
}

// TestWriteDelaysBuckets: an observation lands in the first bucket whose
// bound it does not exceed, or the last past every bound, per path, and
// the sum adds up.
func TestWriteDelaysBuckets(t *testing.T) {
	var d WriteDelays
	bounds := RelayBounds()
	for i := 1; i < len(bounds); i++ {
		if bounds[i] <= bounds[i-1] {
			t.Fatalf("bounds not ascending at %d: %v", i, bounds)
		}
	}
	d.observe(WriteLoop, 100*time.Microsecond)   // on the first bound
	d.observe(WriteLoop, 100*time.Microsecond+1) // just past it
	d.observe(WriteLoop, 0)                      // nothing waited
	d.observe(WriteLoop, time.Minute)            // past every bound
	d.observe(WriteInline, 700*time.Millisecond) // another path
	got := d.Read(WriteLoop)
	want := RelayCounts{Sum: 200*time.Microsecond + 1 + time.Minute}
	want.Buckets[0], want.Buckets[1], want.Buckets[len(bounds)] = 2, 1, 1
	if got != want {
		t.Errorf("loop path %+v, want %+v", got, want)
	}
	inline := d.Read(WriteInline)
	if inline.Sum != 700*time.Millisecond || inline.Buckets[12] != 1 || bounds[12] != time.Second {
		t.Errorf("inline path %+v: want one observation under 1 s", inline)
	}
	if log := d.Read(WriteLog); log != (RelayCounts{}) {
		t.Errorf("log path %+v, want nothing", log)
	}
}

// bucketOf is the bucket of RelayCounts an observation of d lands in.
func bucketOf(d time.Duration) int {
	for i, b := range RelayBounds() {
		if d <= b {
			return i
		}
	}
	return len(RelayBounds())
}

// writes is how many observations c holds.
func writes(c RelayCounts) int64 {
	var n int64
	for _, k := range c.Buckets {
		n += k
	}
	return n
}

// TestWriteDelaysObserved: each write of the stream is observed once, on
// its path, for the oldest byte it carried: the write loop's (over a pipe,
// which the inline sender does not serve) and the inline sender's.
func TestWriteDelaysObserved(t *testing.T) {
	t.Run("loop", func(t *testing.T) {
		e := newTestEnv(t)
		var delays WriteDelays
		st := e.hist.Stream()
		// Bytes that arrived an hour ago, which the replica has, then
		// new ones: the write of the new ones is as old as its own
		// oldest byte.
		publishDated(t, st, 10, time.Now().Add(-time.Hour))
		publishDated(t, st, 10, time.Now().Add(-40*time.Millisecond))
		cur, err := st.Attach(11)
		if err != nil {
			t.Fatal(err)
		}
		r := New(Config{ID: 1, Conn: e.conn, Reader: wire.NewCommandReader(e.conn, wire.Limits{}), Addr: "127.0.0.1:1",
			Plan: history.Plan{Partial: true, ReplID: replid.New(), Cursor: cur}, Hist: e.hist, Host: e.host, Snapshots: e.host, Settings: e.host.settings(),
			Log:      hclog.NewNullLogger(),
			Counters: Counters{OutputBytes: &e.n.out, Closes: &e.n.closes, Dropped: &e.n.dropped, ToDisk: &e.n.toDisk, Delays: &delays}})
		go r.Run(context.Background())
		readN(t, bufio.NewReader(e.peer), e.peer, len("+CONTINUE\r\n")+10)
		redistest.WaitFor(t, 10*time.Second, "the write observed", func() bool { return writes(delays.Read(WriteLoop)) > 0 })
		e.peer.Close()
		<-e.host.ended
		c := delays.Read(WriteLoop)
		// 40 ms old (later buckets on a slow machine), nowhere near the
		// hour-old bytes before it.
		if writes(c) != 1 || c.Sum < 40*time.Millisecond || c.Sum > 10*time.Second || c.Buckets[bucketOf(c.Sum)] != 1 {
			t.Errorf("loop path: %d writes observed, sum %v, buckets %v; want one, 40 ms old", writes(c), c.Sum, c.Buckets)
		}
		if in := delays.Read(WriteInline); in != (RelayCounts{}) {
			t.Errorf("inline path observed %+v over a pipe", in)
		}
	})
	t.Run("inline", func(t *testing.T) {
		e := newInlineEnv(t)
		st := e.hist.Stream()
		ir := e.replica()
		go io.Copy(io.Discard, ir.br)
		redistest.WaitFor(t, 10*time.Second, "the replica parked", func() bool {
			return ir.sender().owner.Load() == ownIdle
		})
		publishDated(t, st, 100, time.Now().Add(-30*time.Millisecond))
		e.fan.Flush() // the producer's goroutine: this one
		c := e.delays.Read(WriteInline)
		if writes(c) != 1 || c.Sum < 30*time.Millisecond || c.Sum > 10*time.Second || c.Buckets[bucketOf(c.Sum)] != 1 {
			t.Errorf("inline path: %d writes, sum %v, buckets %v; want one write, 30 ms old", writes(c), c.Sum, c.Buckets)
		}
		if loop := e.delays.Read(WriteLoop); loop != (RelayCounts{}) {
			t.Errorf("loop path observed %+v for a caught-up replica", loop)
		}
	})
}

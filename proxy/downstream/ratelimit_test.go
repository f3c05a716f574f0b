package downstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/linkzstd"
)

// paceConn is the connection under a pacer in the tests: it records each
// write's size and when it came by the test's clock, and what its ReadFrom
// (sendfile's way, for a TCP socket) was handed.
type paceConn struct {
	net.Conn
	clock     *fakeClock
	start     time.Time
	total     int64
	writes    []int
	over      int64 // the most bytes written beyond rate × elapsed
	waited    int   // writes that came later than the one before (or the start), by the clock
	last      time.Time
	rate      *atomic.Int64
	deadlines int
	readFrom  int64
}

func (c *paceConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, len(b))
	c.total += int64(len(b))
	if c.clock != nil {
		if c.clock.t.After(c.last) {
			c.waited++
		}
		c.last = c.clock.t
		allowed := int64(c.clock.t.Sub(c.start).Seconds() * float64(c.rate.Load()))
		c.over = max(c.over, c.total-allowed)
	}
	return len(b), nil
}

func (c *paceConn) SetWriteDeadline(time.Time) error { c.deadlines++; return nil }

func (c *paceConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(io.Discard, r)
	c.readFrom += n
	return n, err
}

// fakeClock is a pacer's time in the tests: its sleeps move it on at once.
// longest is the longest sleep asked for.
type fakeClock struct {
	t       time.Time
	slept   int
	longest time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.slept++
	c.longest = max(c.longest, d)
	c.t = c.t.Add(d)
	return ctx.Err()
}

func newFakePacer(rate int64) (*pacer, *paceConn, *fakeClock, *atomic.Int64) {
	clock := &fakeClock{t: time.Unix(1e9, 0)}
	var r, slept atomic.Int64
	r.Store(rate)
	conn := &paceConn{clock: clock, start: clock.t, last: clock.t, rate: &r}
	p := newPacer(conn, r.Load, time.Minute, &slept)
	p.now, p.sleep = clock.now, clock.sleep
	return p, conn, clock, &r
}

// TestPacerHoldsRate: a payload written in stream-sized blocks through a
// pacer takes its size over the rate, less one burst, by the pacer's clock;
// never more than one burst (100 ms of bytes) is ahead of the rate; every
// piece is at most a burst; the time slept is counted; the deadline is
// renewed after each wait, which sleeps in slices of at most throttleTick.
func TestPacerHoldsRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  int64
		size  int
		block int
	}{
		{"4mb-at-2mb", 2 << 20, 4 << 20, 16 << 10},
		{"one-write", 1 << 20, 3 << 20, 3 << 20},
		{"slow-link", 100 << 10, 1 << 20, 16 << 10}, // below minPaceBurst per 100 ms
		{"small-writes", 1 << 20, 1 << 20, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, conn, clock, _ := newFakePacer(tc.rate)
			p.begin(context.Background())
			start := clock.t
			block := make([]byte, tc.block)
			for sent := 0; sent < tc.size; sent += tc.block {
				if n, err := p.Write(block); n != tc.block || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			p.end()
			burst := max(tc.rate/10, minPaceBurst)
			elapsed := clock.t.Sub(start)
			want := time.Duration(float64(int64(tc.size)-burst) / float64(tc.rate) * float64(time.Second))
			if elapsed < want-time.Millisecond || elapsed > want+want/100+time.Millisecond {
				t.Errorf("%d bytes at %d B/s took %v; want %v (the size over the rate, less one burst)", tc.size, tc.rate, elapsed, want)
			}
			// Within rounding: each piece's time is cut to whole nanoseconds.
			if conn.over > burst+burst/100 {
				t.Errorf("%d bytes ahead of the rate at one point; at most one burst, %d", conn.over, burst)
			}
			for _, n := range conn.writes {
				if int64(n) > burst {
					t.Fatalf("a write of %d bytes; at most one burst, %d", n, burst)
				}
			}
			if got := time.Duration(p.slept.Load()); got != elapsed {
				t.Errorf("throttled %v; want the time slept, %v", got, elapsed)
			}
			if conn.deadlines != conn.waited {
				t.Errorf("%d deadlines renewed for %d pieces that waited", conn.deadlines, conn.waited)
			}
			if clock.slept < conn.waited || clock.longest > throttleTick {
				t.Errorf("%d sleeps, the longest %v, for %d pieces that waited; each at most %v", clock.slept, clock.longest, conn.waited, throttleTick)
			}
		})
	}
}

// TestPacerOffAndUnlimited: off (the stream) or at rate 0 a pacer is the
// connection below: no sleep, one write per Write, and ReadFrom is the
// connection's own (sendfile).
func TestPacerOffAndUnlimited(t *testing.T) {
	p, conn, clock, rate := newFakePacer(1 << 20)
	big := make([]byte, 8<<20)
	p.Write(big) // off: before begin
	p.begin(context.Background())
	rate.Store(0)
	p.Write(big)
	p.ReadFrom(bytes.NewReader(big))
	rate.Store(1 << 20)
	p.end()
	p.Write(big)
	p.ReadFrom(bytes.NewReader(big))
	if clock.slept != 0 || len(conn.writes) != 3 || conn.readFrom != 2*int64(len(big)) {
		t.Errorf("%d sleeps, writes %v, %d bytes by ReadFrom; want none, three whole writes, %d", clock.slept, conn.writes, conn.readFrom, 2*len(big))
	}
	if p.slept.Load() != 0 {
		t.Errorf("throttled %v with nothing paced", time.Duration(p.slept.Load()))
	}
}

// TestPacerReadFromPaced: a file handed to a paced pacer (sendFile's
// io.Copy) goes through Write, paced, never by the connection's ReadFrom.
func TestPacerReadFromPaced(t *testing.T) {
	p, conn, clock, _ := newFakePacer(1 << 20)
	p.begin(context.Background())
	start := clock.t
	n, err := io.Copy(p, io.LimitReader(bytes.NewReader(make([]byte, 4<<20)), 3<<20))
	if n != 3<<20 || err != nil {
		t.Fatalf("io.Copy: %d, %v", n, err)
	}
	if conn.readFrom != 0 || conn.total != 3<<20 {
		t.Errorf("%d bytes by ReadFrom, %d by Write; want all by Write", conn.readFrom, conn.total)
	}
	if elapsed := clock.t.Sub(start); elapsed < 2800*time.Millisecond {
		t.Errorf("3 MiB at 1 MiB/s took %v; want about 2.9 s", elapsed)
	}
}

// TestPacerRateChange: a new rate applies from the next piece of a payload
// in progress, which CONFIG SET relies on.
func TestPacerRateChange(t *testing.T) {
	p, _, clock, rate := newFakePacer(1 << 20)
	p.begin(context.Background())
	block := make([]byte, 16<<10)
	write := func(n int) time.Duration {
		start := clock.t
		for i := 0; i < n; i += len(block) {
			p.Write(block)
		}
		return clock.t.Sub(start)
	}
	write(1 << 20)
	slow := write(2 << 20) // 2 MiB at 1 MiB/s
	rate.Store(8 << 20)
	fast := write(2 << 20) // 2 MiB at 8 MiB/s
	rate.Store(0)
	none := write(2 << 20)
	if slow < 1900*time.Millisecond || fast > 300*time.Millisecond || fast < 200*time.Millisecond || none != 0 {
		t.Errorf("2 MiB took %v at 1 MiB/s, %v at 8 MiB/s, %v unlimited; want about 2 s, 250 ms, 0", slow, fast, none)
	}
}

// TestPacerContext: a sleep ends with the write loop's context, and the
// write with its error, sending nothing more.
func TestPacerContext(t *testing.T) {
	var slept atomic.Int64
	conn := &paceConn{}
	p := newPacer(conn, func() int64 { return 1 << 10 }, time.Minute, &slept)
	ctx, cancel := context.WithCancel(context.Background())
	p.begin(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, 1<<20)) // 1 MiB at 1 KiB/s: 17 minutes
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Write: %v; want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a paced Write did not end with its context")
	}
	if conn.total > minPaceBurst {
		t.Errorf("%d bytes written; at most the first burst, %d", conn.total, minPaceBurst)
	}
}

// newPipePacer returns a pacer at rate, by the wall clock, over a pipe
// whose other end reads as fast as it can, and the time it slept; the pipe
// is closed when the test ends.
func newPipePacer(t testing.TB, rate int64) (*pacer, *atomic.Int64) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	go io.Copy(io.Discard, b)
	slept := new(atomic.Int64)
	return newPacer(a, func() int64 { return rate }, time.Minute, slept), slept
}

// TestPacerRealClock: by the wall clock, 4 MB through a pacer at 2 MB/s
// to a socket that reads as fast as it can take at least 1.5 s: a cap that
// is not applied fails this (it is no performance goal: the bound is what
// the rate makes, with generous room, and a loaded machine only makes it
// longer). The time slept is not bounded below: writes that are slow
// already need less of it.
func TestPacerRealClock(t *testing.T) {
	p, slept := newPipePacer(t, 2<<20)
	p.begin(context.Background())
	start := time.Now()
	block := make([]byte, 16<<10)
	for sent := 0; sent < 4<<20; sent += len(block) {
		if _, err := p.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if elapsed := time.Since(start); elapsed < 1500*time.Millisecond {
		t.Errorf("4 MiB at 2 MiB/s took %v; want at least 1.5 s", elapsed)
	}
	if time.Duration(slept.Load()) > time.Since(start) {
		t.Errorf("throttled %v in %v", time.Duration(slept.Load()), time.Since(start))
	}
}

// TestPacerCountsWhileThrottled: the time a pacer holds a payload back is
// counted as it passes, not when the sleep ends: at 4 KiB/s the second
// 16 KiB piece waits 4 s, and within the first second of that wait the
// throttled time (INFO's throttled_ms) already shows it, never more than
// the time that passed, never going back; then the write ends with its
// context, the time slept so far counted.
func TestPacerCountsWhileThrottled(t *testing.T) {
	p, slept := newPipePacer(t, 4<<10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.begin(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.Write(make([]byte, 2*minPaceBurst))
		done <- err
	}()
	var last time.Duration
	redistest.WaitFor(t, 2*time.Second, "throttled time counted during the sleep", func() bool {
		got := time.Duration(slept.Load())
		if got < last || got > time.Since(start) {
			t.Fatalf("throttled %v after %v (%v before)", got, time.Since(start), last)
		}
		last = got
		return got >= 300*time.Millisecond
	})
	select {
	case err := <-done:
		t.Fatalf("the paced write ended (%v) before the 4 s its second piece waits", err)
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Write: %v; want context.Canceled", err)
	}
	if got := time.Duration(slept.Load()); got < last || got > time.Since(start) {
		t.Errorf("throttled %v in all after %v (%v seen during the sleep)", got, time.Since(start), last)
	}
}

// TestReplicaPacedPayload: with a rate limit, a downstream proxy's payload
// (from memory) is paced, taking at least its size over the rate less a
// burst, and its throttled time counted, while a real replica's is not
// paced at all; the stream after the payload is never paced (the throttled
// time stays as it was).
func TestReplicaPacedPayload(t *testing.T) {
	for _, proxy := range []bool{true, false} {
		name := "real-replica"
		if proxy {
			name = "proxy"
		}
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t)
			e.host.rate.Store(2 << 20)
			st := e.hist.Stream()
			payload := redistest.RDBWith(bytes.Repeat([]byte("0123456789abcdef"), 1<<16)) // an RDB of 1 MiB
			plan := e.fullSyncPlan(t, payload)
			id := plan.ReplID
			hs := Handshake{CapaEOF: true, CapaPSync2: true, CapaReplproxy: proxy}
			r := e.replica(hs, plan)
			if r.IsProxy() != proxy {
				t.Fatalf("IsProxy %v with capa replproxy %v", r.IsProxy(), proxy)
			}
			start := time.Now()
			go r.Run(context.Background())
			br := bufio.NewReader(e.peer)
			head := "+FULLRESYNC " + id + " 10\r\n$" + strconv.Itoa(len(payload)) + "\r\n"
			if got := readN(t, br, e.peer, len(head)+len(payload)); !bytes.Equal(got, append([]byte(head), payload...)) {
				t.Fatalf("payload differs (%d bytes)", len(got))
			}
			elapsed := time.Since(start)
			redistest.WaitFor(t, 10*time.Second, "online", func() bool { return r.State() == Online })
			throttled := r.Throttled()
			// (1 MiB - a burst of 200 KiB) at 2 MiB/s: 400 ms at least.
			if proxy && elapsed < 350*time.Millisecond {
				t.Errorf("1 MiB at 2 MiB/s took %v, throttled %v; want at least 400 ms", elapsed, throttled)
			}
			if !proxy && throttled != 0 {
				t.Errorf("a real replica's payload throttled %v", throttled)
			}
			stream := bytes.Repeat([]byte("s"), 4<<20)
			st.Append(stream)
			if got := readN(t, br, e.peer, len(stream)); !bytes.Equal(got, stream) {
				t.Fatal("stream differs")
			}
			if r.Throttled() != throttled {
				t.Errorf("the stream after the payload throttled %v", r.Throttled()-throttled)
			}
			e.peer.Close()
			<-e.host.ended
		})
	}
}

// TestReplicaPacedCompressedPayload: on a compressed link the pacer sits
// under the encoder, so that the cap holds bytes on the wire: a payload
// that compresses a hundredfold goes through a cap its raw size would take
// 16 s at almost unthrottled, while one that does not compress is paced
// as on a plain link. What the peer decodes is the payload as sent.
func TestReplicaPacedCompressedPayload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rate    int64
		payload []byte
		min     time.Duration // taking at least, by the wall clock (what the cap makes)
		max     time.Duration // throttled at most
	}{
		{"compressible", 64 << 10, bytes.Repeat([]byte("0123456789abcdef"), 1<<16), 0, 500 * time.Millisecond},
		// (256 KiB - a burst of 16 KiB) at 128 KiB/s: 1.87 s at least.
		{"incompressible", 128 << 10, randomBytes(256 << 10), 1700 * time.Millisecond, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			e.host.rate.Store(tc.rate)
			payload := redistest.RDBWith(tc.payload)
			plan := e.fullSyncPlan(t, payload)
			id := plan.ReplID
			hs := Handshake{CapaEOF: true, CapaPSync2: true, CapaReplproxy: true, Compression: "zstd"}
			r := e.replica(hs, plan)
			start := time.Now()
			go r.Run(context.Background())
			br := bufio.NewReader(e.peer)
			e.peer.SetReadDeadline(time.Now().Add(time.Minute))
			line, err := br.ReadString('\n')
			if want := "+FULLRESYNC " + id + " 10\r\n"; line != want || err != nil {
				t.Fatalf("reply line %q, %v; want %q", line, err, want)
			}
			zr := linkzstd.NewReader(br)
			defer zr.Close()
			want := append([]byte("$"+strconv.Itoa(len(payload))+"\r\n"), payload...)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(zr, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("decoded payload differs (%v)", err)
			}
			elapsed := time.Since(start)
			redistest.WaitFor(t, 10*time.Second, "online", func() bool { return r.State() == Online })
			th := r.Throttled()
			ls := r.Compression()
			t.Logf("%d raw bytes, %d on the wire in %v, throttled %v at %d B/s", ls.Stats.Raw, ls.Stats.Wire, elapsed, th, tc.rate)
			if elapsed < tc.min || th > tc.max {
				t.Errorf("took %v, throttled %v; want at least %v, throttled at most %v: the cap holds wire bytes", elapsed, th, tc.min, tc.max)
			}
			e.peer.Close()
			<-e.host.ended
		})
	}
}

// randomBytes returns n bytes that do not compress, the same each run.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

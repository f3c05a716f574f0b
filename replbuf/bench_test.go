package replbuf

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// The fan-out benchmarks measure one thing two ways on the same kind of
// sockets: delivering a stream to N replicas over loopback TCP. An op is one
// 16 KiB block of stream delivered to every replica, so b.SetBytes is
// BlockSize×N in both and ns/op and MB/s compare directly:
//
//	BenchmarkFanout/replicas=N     the engine: a producer fills the stream
//	                               as the proxy's stream loop does and
//	                               publishes each read, N cursors send it
//	                               with writev
//	BenchmarkRawWritev/replicas=N  N goroutines send pre-filled 16 KiB
//	                               buffers with writev, 1 MiB per call
//
// The producer fills through FillBuffers, offering twice what its last read
// took (one block to MaxFillBlocks, as the proxy's fillWant), from a reader
// that returns fanoutRead bytes per read, as a socket holding a window of
// stream does, and publishes once per read. Both send pre-filled buffers:
// the reader returns at once, its bytes being those already in the blocks,
// so the two differ only by the engine's own work (filling, publication,
// wake-ups, refs, trimming, block reuse). Filling costs one copy of the
// bytes, in the proxy the kernel's recv copy; BenchmarkAppend measures it on
// its own.
//
// Receivers are the same in both: one goroutine per socket reading into a
// 256 KiB buffer until it has the whole stream. The ratio engine/raw is read
// from one run of `go test -bench . ./replbuf/`.
//
// The engine's stream keeps arrival times, as the proxy's does, and its
// producer dates every read (Arrived) with a time a millisecond after the
// last one's, the proxy's coalesced pace, so that every read opens a mark.
// The time is made up rather than read: the proxy's stream loop reads the
// clock once per read whether or not the stream keeps arrival times, so
// what the benchmark adds is the marks' own work.

var fanoutSizes = []int{1, 8, 64}

// rig is N loopback connections with a receiver on each far end.
type rig struct {
	send []*net.TCPConn
	done sync.WaitGroup // receivers that have their whole stream
}

func newRig(b *testing.B, n int, want int64) *rig {
	r := &rig{}
	for range n {
		s, recv := redistest.TCPPair(b)
		r.send = append(r.send, s)
		r.done.Add(1)
		buf := make([]byte, 256<<10)
		go func() {
			defer r.done.Done()
			var got int64
			for got < want {
				k, err := recv.Read(buf)
				got += int64(k)
				if err != nil {
					return
				}
			}
		}()
	}
	return r
}

func BenchmarkFanout(b *testing.B) {
	for _, n := range fanoutSizes {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
}

func BenchmarkRawWritev(b *testing.B) {
	for _, n := range fanoutSizes {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) { benchRawWritev(b, n) })
	}
}

// window bounds how far the producer runs ahead of the slowest cursor (the
// proxy itself never waits: it has output-buffer limits instead).
const window = 4 << 20

// fanoutRead is what one read of BenchmarkFanout's producer returns: 16
// blocks, a millisecond's coalescing window (the proxy's default
// repl-read-coalesce-usec) of a stream of 256 MB/s.
const fanoutRead = 16 * BlockSize

// fanoutProducer fills a stream as BenchmarkFanout's producer does.
type fanoutProducer struct {
	s    *Stream
	read limitedPrefilled
	want int       // the room the next FillBuffers offers
	at   time.Time // the date of the last read (Arrived)
}

// benchReadEvery is how far apart in time the benchmarks' producers date
// their reads: the proxy's default coalescing window.
const benchReadEvery = time.Millisecond

// fill does one read of at most limit bytes (fanoutRead at most) into the
// stream with FillBuffers, publishes it, and returns its length. The room
// it offers the next read is twice what this one took, from one block to
// MaxFillBlocks blocks, as the proxy's stream loop offers (fillWant in
// proxy/upstream).
func (p *fanoutProducer) fill(limit int) (int, error) {
	p.read.n = min(limit, fanoutRead)
	ps, err := p.s.FillBuffers(&p.read, max(p.want, BlockSize))
	if err != nil {
		return 0, err
	}
	p.at = p.at.Add(benchReadEvery)
	p.s.Arrived(p.at)
	if err := p.s.Publish(p.s.Filled()); err != nil {
		return 0, err
	}
	n := 0
	for _, b := range ps {
		n += len(b)
	}
	p.want = min(max(2*n, BlockSize), MaxFillBlocks*BlockSize)
	return n, nil
}

func benchFanout(b *testing.B, n int) {
	warm := int64(2*(window+DefaultBacklogSize)/BlockSize) * BlockSize
	total := int64(b.N)*BlockSize + warm
	r := newRig(b, n, total)
	s := NewStream(0, &Config{Pool: NewPool(1024), Arrivals: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cursors := make([]*Cursor, n)
	progress := make(chan struct{}, 1)
	var writers sync.WaitGroup
	var failed atomic.Value
	for i := range n {
		c, err := s.Attach(1)
		if err != nil {
			b.Fatal(err)
		}
		cursors[i] = c
		conn := r.send[i]
		writers.Add(1)
		go func() {
			defer writers.Done()
			defer c.Close()
			for c.Offset() <= total {
				k, err := c.Send(conn)
				if err != nil {
					failed.Store(err)
					return
				}
				select {
				case progress <- struct{}{}:
				default:
				}
				if k == 0 {
					if err := c.Wait(ctx); err != nil {
						return
					}
				}
			}
		}()
	}
	slowest := func() int64 {
		m := cursors[0].Offset()
		for _, c := range cursors[1:] {
			m = min(m, c.Offset())
		}
		return m
	}

	// produce fills and publishes blocks' worth of stream, a read at a
	// time, the last read cut to what is left, and returns the reads.
	p := &fanoutProducer{s: s, at: time.Now()}
	produce := func(blocks int) (reads int) {
		for left := blocks * BlockSize; left > 0; reads++ {
			n, err := p.fill(left)
			if err != nil {
				b.Fatal(err)
			}
			left -= n
			for s.Offset()-slowest() > window {
				<-progress
			}
		}
		return reads
	}
	// Warm up: fill the pool with the blocks the window and the backlog
	// need, so that the timed loop measures the steady state.
	warmBlocks := int(warm / BlockSize)
	produce(warmBlocks)
	for slowest() <= s.Offset() {
		<-progress
	}
	b.SetBytes(int64(BlockSize * n))
	b.ReportAllocs()
	b.ResetTimer()
	reads := produce(b.N)
	r.done.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(reads), "blocks/read")
	cancel()
	writers.Wait()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
}

// prefilled is a reader whose bytes are already in the buffer it is handed.
type prefilled struct{}

func (prefilled) Read(p []byte) (int, error) { return len(p), nil }

func benchRawWritev(b *testing.B, n int) {
	total := int64(b.N) * BlockSize
	r := newRig(b, n, total)
	const perCall = DefaultMaxBatchBytes / BlockSize
	blocks := make([][]byte, perCall)
	for i := range blocks {
		blocks[i] = pattern(int64(i)*BlockSize+1, BlockSize)
	}
	start := make(chan struct{})
	var senders sync.WaitGroup
	var failed atomic.Value
	for i := range n {
		conn := r.send[i]
		senders.Add(1)
		go func() {
			defer senders.Done()
			// The slice header array is the sender's own, reset before every
			// call (WriteTo consumes it), as a cursor's is.
			iov := make([][]byte, perCall)
			var bufs net.Buffers
			<-start
			for left := b.N; left > 0; {
				k := min(left, perCall)
				copy(iov, blocks[:k])
				bufs = iov[:k]
				if _, err := bufs.WriteTo(conn); err != nil {
					failed.Store(err)
					return
				}
				left -= k
			}
		}()
	}
	b.SetBytes(int64(BlockSize * n))
	b.ReportAllocs()
	b.ResetTimer()
	close(start)
	senders.Wait()
	r.done.Wait()
	b.StopTimer()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
}

// BenchmarkAppend is the producer alone: 16 KiB appended per op into a stream
// that trims behind it, blocks reused from the pool.
func BenchmarkAppend(b *testing.B) {
	s := NewStream(0, nil)
	chunk := pattern(1, BlockSize)
	b.SetBytes(BlockSize)
	b.ReportAllocs()
	for b.Loop() {
		s.Append(chunk)
	}
}

// BenchmarkFillPublish is the producer as the proxy drives it: 16 KiB per op
// filled in reads of 4 KiB, each dated (Arrived, see BenchmarkFanout) and
// published up to a point inside it (the last whole command) and the rest
// with the next, into a stream that trims behind and keeps arrival times.
// Reads are dated either a millisecond apart, the proxy's coalesced pace,
// where every read opens a mark (stores that are full barriers), or 20 µs
// apart, a fast stream read as it comes, where most only extend one (no
// store). Opening marks is bounded in time, not in bytes: at most 10,100 a
// second (the rings' windows), whatever the stream's rate.
func BenchmarkFillPublish(b *testing.B) {
	for _, pace := range []struct {
		name  string
		every time.Duration
	}{{"1ms", time.Millisecond}, {"20us", 20 * time.Microsecond}} {
		every := pace.every
		b.Run("read-every="+pace.name, func(b *testing.B) {
			s := NewStream(0, &Config{Arrivals: true})
			r := &limitedPrefilled{n: 4 << 10}
			at := time.Now()
			b.SetBytes(BlockSize)
			b.ReportAllocs()
			for b.Loop() {
				for range 4 {
					s.Fill(r)
					at = at.Add(every)
					s.Arrived(at)
					s.Publish(s.Filled() - 100)
				}
			}
		})
	}
}

// BenchmarkCursorCycle is one replica's bookkeeping per batch without a
// socket: Pending, Advance, and the ref moves across blocks.
func BenchmarkCursorCycle(b *testing.B) {
	s := NewStream(0, nil)
	c, _ := s.Attach(1)
	chunk := pattern(1, BlockSize)
	b.SetBytes(BlockSize)
	b.ReportAllocs()
	for b.Loop() {
		s.Append(chunk)
		bufs, _ := c.Pending()
		var n int64
		for _, p := range *bufs {
			n += int64(len(p))
		}
		c.Advance(n)
	}
}

// TestSteadyStateAllocs asserts the zero-allocation goal of the receive and
// send paths: once blocks are being reused, producing a block and sending it
// to a replica over TCP with writev allocates nothing.
func TestSteadyStateAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	s, c, send := allocRig(t)
	step := func() {
		if _, err := s.ReadOnce(prefilled{}); err != nil {
			t.Fatal(err)
		}
		sendAll(t, c, send)
	}
	expectNoAllocs(t, "block produced and sent", step)
}

// TestFanoutProducer: BenchmarkFanout's producer publishes each read whole;
// its reads grow from one block to fanoutRead as the room it offers grows
// (the pool holding free blocks, as after the benchmark's warm-up); a read
// is cut to what is asked; and, once blocks are being reused, producing
// and sending a read to a replica allocates nothing.
func TestFanoutProducer(t *testing.T) {
	s, c, send := allocRig(t)
	// Blocks the backlog lets go: the pool's free blocks, the room past
	// two blocks that FillBuffers may offer.
	appendPattern(t, s, 2*fanoutRead)
	sendAll(t, c, send)
	p := &fanoutProducer{s: s, at: time.Now()}
	var reads []int
	for len(reads) < 64 && (len(reads) == 0 || reads[len(reads)-1] < fanoutRead) {
		n, err := p.fill(fanoutRead)
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, n)
		if s.Offset() != s.Filled() {
			t.Fatalf("published %d of %d filled", s.Offset(), s.Filled())
		}
		sendAll(t, c, send)
	}
	if reads[0] != BlockSize || reads[len(reads)-1] != fanoutRead {
		t.Errorf("reads %v: want %d first, growing to %d", reads, BlockSize, fanoutRead)
	}
	if n, err := p.fill(100); err != nil || n != 100 {
		t.Errorf("a read cut to 100 bytes took %d, %v", n, err)
	}
	if testing.Short() {
		return
	}
	step := func() {
		if _, err := p.fill(fanoutRead); err != nil {
			t.Fatal(err)
		}
		sendAll(t, c, send)
	}
	expectNoAllocs(t, "read of fanoutRead produced and sent", step)
}

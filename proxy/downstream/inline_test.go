package downstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// inlineEnv is a stream, a Fanout and replicas of it over real loopback
// TCP, each with small socket buffers so that writes block often.
type inlineEnv struct {
	t      testing.TB
	hist   *history.History
	fan    *Fanout
	delays WriteDelays // every replica's writes observed, as the proxy's are
	id     string
	host   *fakeHost
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newInlineEnv(t testing.TB) *inlineEnv {
	t.Helper()
	hist := history.New(replbuf.NewPool(0), 1<<20, history.Counters{EvictedSnapshots: new(atomic.Int64), EvictedBytes: new(atomic.Int64)}, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	e := &inlineEnv{t: t, hist: hist, fan: &Fanout{}, id: replid.New(), ctx: ctx, cancel: cancel,
		host: &fakeHost{timeout: time.Minute, window: 1 << 20, ended: make(chan *Replica, 64)}}
	t.Cleanup(func() {
		e.cancel()
		e.wg.Wait()
		hist.Close()
	})
	return e
}

// inlineReplica is one replica under test and its peer's end.
type inlineReplica struct {
	r    *Replica
	peer *net.TCPConn
	br   *bufio.Reader
	out  atomic.Int64
}

// replica connects a replica at the stream's end over loopback TCP and
// runs it; the peer has read +CONTINUE when it returns.
func (e *inlineEnv) replica() *inlineReplica {
	e.t.Helper()
	return e.replicaWith(Handshake{CapaPSync2: true})
}

// replicaWith is replica for a replica whose handshake was hs.
func (e *inlineEnv) replicaWith(hs Handshake) *inlineReplica {
	t := e.t
	t.Helper()
	peer, conn := redistest.TCPPair(t)
	// Small buffers on both sides: the socket fills after some tens of
	// KiB, so that the inline sender meets EAGAIN and short writes often.
	// (Smaller ones make loopback TCP crawl, at one window per delayed ACK.)
	conn.SetWriteBuffer(32 << 10)
	peer.SetReadBuffer(32 << 10)
	return e.run(peer, conn, peer, hs)
}

// run runs a replica on conn, whose peer's end is peer (read through
// from: peer itself, or a TLS client on it), and returns once the peer
// has read +CONTINUE and the replica streams.
func (e *inlineEnv) run(peer *net.TCPConn, conn net.Conn, from io.Reader, hs Handshake) *inlineReplica {
	t := e.t
	t.Helper()
	st := e.hist.Stream()
	cur, err := st.Attach(st.Offset() + 1)
	if err != nil {
		t.Fatal(err)
	}
	ir := &inlineReplica{peer: peer, br: bufio.NewReaderSize(from, 64<<10)}
	ir.r = New(Config{ID: 1, Conn: conn, Reader: wire.NewCommandReader(conn, wire.Limits{}), Addr: "127.0.0.1:1",
		Handshake: hs, Plan: history.Plan{Partial: true, ReplID: e.id, Cursor: cur},
		Hist: e.hist, Host: e.host, Snapshots: e.host, Settings: e.host.settings(), Log: hclog.NewNullLogger(), Fanout: e.fan,
		Counters: Counters{OutputBytes: &ir.out, Closes: new(CloseCounts), Dropped: new(atomic.Int64), ToDisk: new(atomic.Int64),
			Delays: &e.delays}})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ir.r.Run(e.ctx)
	}()
	want := "+CONTINUE " + e.id + "\r\n"
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(ir.br, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v; want %q", got, err, want)
	}
	peer.SetReadDeadline(time.Time{})
	redistest.WaitFor(t, 10*time.Second, "the replica streaming", func() bool {
		return ir.r.Cursor() != nil && (e.fan == nil || ir.r.inline.Load() != nil)
	})
	return ir
}

// progress is how far each test reader has read, and a wait for all of them
// to reach an offset.
type progress struct {
	mu   sync.Mutex
	cond *sync.Cond
	off  []int64 // guarded by mu
	late bool    // guarded by mu: the wait's deadline passed
}

func newProgress(n int) *progress {
	p := &progress{off: make([]int64, n)}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *progress) set(i int, off int64) {
	p.mu.Lock()
	p.off[i] = off
	p.mu.Unlock()
	p.cond.Broadcast()
}

// wait returns once every reader has read up to end (the offset after
// the last byte published), or an error after timeout.
func (p *progress) wait(end int64, timeout time.Duration) error {
	t := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.late = true
		p.mu.Unlock()
		p.cond.Broadcast()
	})
	defer t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.late && slices.Min(p.off) < end {
		p.cond.Wait()
	}
	if p.late {
		return fmt.Errorf("readers at %v after %v, want all at %d", p.off, timeout, end)
	}
	return nil
}

// sender is the replica's inline sender.
func (ir *inlineReplica) sender() *inlineSender { return ir.r.inline.Load() }

// readChecked is test reader i of replica ir: it reads the stream's
// [start, start+total) from src in reads of random size (rng), each after
// pause, checks every byte against byteAt, and reports its progress.
func readChecked(ir *inlineReplica, src io.Reader, i int, start, total int64, byteAt func(int64) byte,
	prog *progress, pause func(), rng *rand.Rand) error {
	buf := make([]byte, 32<<10)
	for off := start; off < start+total; {
		pause()
		k := min(int64(1+rng.IntN(len(buf))), start+total-off)
		ir.peer.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := src.Read(buf[:k]) // what is there: the producer may wait for it
		if err != nil {
			return fmt.Errorf("replica %d at offset %d: %w", i, off, err)
		}
		if err := checkBytes(buf[:n], off, byteAt); err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		off += int64(n)
		prog.set(i, off)
	}
	return nil
}

// checkBytes reports the first byte of p, read from offset off, that is not
// byteAt's.
func checkBytes(p []byte, off int64, byteAt func(int64) byte) error {
	for j := range int64(len(p)) {
		if got, want := p[j], byteAt(off+j); got != want {
			return fmt.Errorf("offset %d is %#x, want %#x", off+j, got, want)
		}
	}
	return nil
}

// streamByte is the stream's byte at offset off: a pattern no shift of
// itself matches, so that a byte lost, repeated or interleaved shows.
func streamByte(off int64) byte { return byte(off*7 + off>>8 + off>>16) }

// fill returns the stream bytes at offsets [from, from+len(p)).
func fill(p []byte, from int64) []byte {
	for i := range p {
		p[i] = streamByte(from + int64(i))
	}
	return p
}

// TestInlineOneWriterPerSocket: many replicas over
// loopback TCP with small buffers, their readers pausing at random, while
// the producer publishes chunks of random size and flushes inline after
// each. Every replica receives exactly the published bytes in order, and
// no write to a socket ever began while another was in flight on it; both
// paths, inline writes and hand-overs to the write loop, were taken.
func TestInlineOneWriterPerSocket(t *testing.T) {
	const replicas = 8
	total := int64(8 << 20)
	if testing.Short() {
		total = 2 << 20
	}
	e := newInlineEnv(t)
	st := e.hist.Stream()
	start := st.Offset() + 1
	rs := make([]*inlineReplica, replicas)
	for i := range rs {
		rs[i] = e.replica()
	}
	prog := newProgress(replicas)
	errs := make(chan error, replicas)
	for i, ir := range rs {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			errs <- readChecked(ir, ir.br, i, start, total, streamByte, prog, func() {
				if rng.IntN(8) == 0 {
					// A reader that stops for a while: its socket fills and
					// its write loop takes over, then hands back.
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				}
			}, rng)
		}()
	}
	rng := rand.New(rand.NewPCG(99, 2))
	chunk := make([]byte, 64<<10)
	for off := start; off < start+total; {
		k := min(int64(1+rng.IntN(len(chunk))), start+total-off)
		if err := st.Append(fill(chunk[:k], off)); err != nil {
			t.Fatal(err)
		}
		e.fan.Flush()
		off += k
		if rng.IntN(4) == 0 {
			// Now and then every replica catches up and parks, so that
			// the next publishes go inline, until a socket fills again.
			if err := prog.wait(off, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var inline, handed int64
	for i, ir := range rs {
		s := ir.sender()
		if n := s.overlaps.Load(); n != 0 {
			t.Errorf("replica %d: %d writes began while another was in flight", i, n)
		}
		inline += s.inline.Load()
		handed += s.handed.Load()
	}
	if inline == 0 || handed == 0 {
		t.Fatalf("%d inline writes, %d hand-overs to the write loop: both paths must be taken", inline, handed)
	}
	t.Logf("%d inline writes, %d hand-overs", inline, handed)
}

// TestInlineBlockedReplicaDelaysNoOne: one replica
// never reads, and its socket fills; the others, caught up, receive every
// publish from the producer's own Flush, before the next publish: a
// blocked replica delays them by no batch at all (its inline write fails
// at once with EAGAIN, and its write loop takes it). Once it reads again,
// it receives everything too.
func TestInlineBlockedReplicaDelaysNoOne(t *testing.T) {
	e := newInlineEnv(t)
	st := e.hist.Stream()
	start := st.Offset() + 1
	blocked := e.replica()
	others := []*inlineReplica{e.replica(), e.replica(), e.replica()}
	const chunk, publishes = 16 << 10, 64 // 1 MiB: far more than the blocked socket holds
	total := int64(chunk * publishes)
	var got [3]atomic.Int64
	errs := make(chan error, len(others))
	for i, ir := range others {
		go func() {
			buf := make([]byte, chunk)
			for off := start; off < start+total; {
				ir.peer.SetReadDeadline(time.Now().Add(30 * time.Second))
				n, err := ir.br.Read(buf)
				if err != nil {
					errs <- fmt.Errorf("replica %d at offset %d: %w", i, off, err)
					return
				}
				for j := range int64(n) {
					if buf[j] != streamByte(off+j) {
						errs <- fmt.Errorf("replica %d: offset %d wrong", i, off+j)
						return
					}
				}
				off += int64(n)
				got[i].Store(off - start)
			}
			errs <- nil
		}()
	}
	p := make([]byte, chunk)
	for k := range publishes {
		off := start + int64(k*chunk)
		// Each reading replica is caught up and parked before the next
		// publish: the condition, not a time, orders the steps.
		redistest.WaitFor(t, 10*time.Second, "the reading replicas caught up and parked", func() bool {
			for i, ir := range others {
				if got[i].Load() != off-start || ir.sender().owner.Load() != ownIdle {
					return false
				}
			}
			return true
		})
		if err := st.Append(fill(p, off)); err != nil {
			t.Fatal(err)
		}
		e.fan.Flush()
		// Flush returned: each reading replica, parked with an empty
		// socket, was sent the whole publish (one batch) by Flush itself,
		// whatever the blocked one's socket did.
		for i, ir := range others {
			if at := ir.r.Cursor().Offset(); at != off+chunk {
				t.Fatalf("publish %d: reading replica %d at %d after Flush, want %d", k, i, at, off+chunk)
			}
		}
	}
	for range others {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if lag := blocked.r.Cursor().Lag(); lag == 0 {
		t.Fatal("the replica that reads nothing received everything: its socket never blocked")
	}
	if s := blocked.sender(); s.owner.Load() != ownWriter || s.handed.Load() == 0 {
		t.Fatal("the blocked replica was not handed to its write loop")
	}
	// The blocked replica reads now and receives every byte in order.
	buf := make([]byte, total)
	blocked.peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(blocked.br, buf); err != nil {
		t.Fatal(err)
	}
	for j := range total {
		if buf[j] != streamByte(start+j) {
			t.Fatalf("the blocked replica: offset %d wrong", start+j)
		}
	}
	for i, ir := range append(others, blocked) {
		if n := ir.sender().overlaps.Load(); n != 0 {
			t.Errorf("replica %d: %d overlapping writes", i, n)
		}
	}
}

// TestInlineFlushAllocs: the producer's Flush allocates nothing, sending or
// finding nothing to send.
func TestInlineFlushAllocs(t *testing.T) {
	e := newInlineEnv(t)
	e.checkFlushAllocs(e.replica())
}

// checkFlushAllocs fails the test unless 512 B publishes, each flushed
// inline to ir, whose peer reads everything, allocate nothing, and unless
// they were written inline.
func (e *inlineEnv) checkFlushAllocs(ir *inlineReplica) {
	t := e.t
	t.Helper()
	st := e.hist.Stream()
	go io.Copy(io.Discard, ir.br)
	p := make([]byte, 512)
	off := st.Offset() + 1
	allocs := testing.AllocsPerRun(200, func() {
		st.Append(fill(p, off))
		off += int64(len(p))
		e.fan.Flush()
	})
	if allocs != 0 {
		t.Fatalf("Append and Flush: %v allocs per run, want 0", allocs)
	}
	if ir.sender().inline.Load() == 0 {
		t.Fatal("no publish was written inline")
	}
}

// TestInlineEndsParked: a parked replica ends with its context (the socket
// taken back first, so that its cursor may close), and Wake hands a parked
// replica to its write loop, which sees a new generation at once.
func TestInlineEndsParked(t *testing.T) {
	e := newInlineEnv(t)
	st := e.hist.Stream()
	ir := e.replica()
	redistest.WaitFor(t, 10*time.Second, "parked", func() bool { return ir.sender().owner.Load() == ownIdle })
	st.Reset(st.Offset() + 100)
	e.fan.Wake()
	r := <-e.host.ended
	if r != ir.r || r.Reason() != CloseGenerationChanged {
		t.Fatalf("ended for %s, want %s", r.Reason(), CloseGenerationChanged)
	}
}

// TestInlineOnlyPlainSockets: a pipe keeps its write loop, and so does TLS
// over anything but a RecordConn on a socket; a TCP socket gets a plain
// inline sender, TLS on a RecordConn over TCP a TLS one.
func TestInlineOnlyPlainSockets(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var out atomic.Int64
	if newInlineSender(a, &out) != nil {
		t.Error("a pipe got an inline sender")
	}
	if newInlineSender(tls.Client(a, &tls.Config{}), &out) != nil {
		t.Error("a TLS connection got an inline sender")
	}
	c, _ := redistest.TCPPair(t)
	if newInlineSender(c, &out) == nil && writevSupported {
		t.Error("a TCP socket got no inline sender")
	}
	if newInlineSender(tls.Client(c, &tls.Config{}), &out) != nil {
		t.Error("TLS over TCP got a plain inline sender")
	}
	if newTLSInlineSender(tls.Client(c, &tls.Config{}), &out) != nil {
		t.Error("TLS over TCP, no RecordConn, got an inline sender")
	}
	if newTLSInlineSender(tls.Client(NewRecordConn(a), &tls.Config{}), &out) != nil {
		t.Error("TLS on a RecordConn over a pipe got an inline sender")
	}
	if s := newTLSInlineSender(tls.Client(NewRecordConn(c), &tls.Config{}), &out); (s == nil || s.tc == nil) && writevSupported {
		t.Error("TLS on a RecordConn over TCP got no TLS inline sender")
	}
}

// TestInlineCompressedLink: downstream proxies whose links are compressed
// are sent small publishes inline, one chunk each, and larger ones by
// their write loops; their readers pause at random, so that chunks are
// cut short by a full socket and finished by the write loop. Every peer
// decodes exactly the published bytes in order, no two writes overlapped,
// and all three paths were taken: inline chunks, hand-overs, and a chunk's
// rest sent by the write loop.
func TestInlineCompressedLink(t *testing.T) {
	e := newInlineEnv(t)
	rs := make([]*inlineReplica, 3)
	for i := range rs {
		rs[i] = e.replicaWith(Handshake{CapaPSync2: true, CapaReplproxy: true, Compression: "zstd"})
		if rs[i].sender().z == nil {
			t.Fatalf("replica %d: the inline sender is not the compressed link's", i)
		}
	}
	e.cutShort(rs, noisyByte, 3, func(ir *inlineReplica) (io.Reader, func()) {
		zr := linkzstd.NewReader(ir.br)
		return zr, zr.Close
	})
}

// cutShort publishes 6 MiB (2 in -short) of the stream, whose byte at an
// offset is byteAt's, in chunks of random size, each flushed inline, to
// rs, whose test readers read it through decode and pause at random.
// Halfway the readers stop and small publishes go on until every socket
// has cut an inline write short, so that its write loop has the rest to
// send first, whatever the timing. Every reader must read exactly the
// published bytes in order, no two writes may have overlapped, and every
// path must have been taken: inline writes, hand-overs, and rests sent by
// the write loop. seed varies the sizes and pauses between tests.
func (e *inlineEnv) cutShort(rs []*inlineReplica, byteAt func(int64) byte, seed uint64, decode func(*inlineReplica) (io.Reader, func())) {
	t := e.t
	t.Helper()
	total := int64(6 << 20)
	if testing.Short() {
		total = 2 << 20
	}
	st := e.hist.Stream()
	start := st.Offset() + 1
	prog := newProgress(len(rs))
	errs := make(chan error, len(rs))
	var hold atomic.Bool // readers stop while it is set
	for i, ir := range rs {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(i), seed))
			src, done := decode(ir)
			defer done()
			errs <- readChecked(ir, src, i, start, total, byteAt, prog, func() {
				for hold.Load() {
					time.Sleep(time.Millisecond)
				}
				if rng.IntN(16) == 0 {
					// Long enough for the producer to fill the socket.
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				}
			}, rng)
		}()
	}
	rng := rand.New(rand.NewPCG(100-seed, seed))
	chunk := make([]byte, 64<<10)
	fillAt := func(p []byte, from int64) []byte {
		for i := range p {
			p[i] = byteAt(from + int64(i))
		}
		return p
	}
	cut := func() bool {
		for _, ir := range rs {
			if ir.sender().rests.Load() == 0 {
				return false
			}
		}
		return true
	}
	for off, held := start, false; off < start+total; {
		if !held && off > start+total/2 {
			held = true
			if err := prog.wait(off, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			hold.Store(true)
			for ; !cut() && off < start+total; off += 2 << 10 {
				if err := st.Append(fillAt(chunk[:2<<10], off)); err != nil {
					t.Fatal(err)
				}
				e.fan.Flush()
			}
			hold.Store(false)
		}
		size := 1 + rng.IntN(4<<10)
		if rng.IntN(16) == 0 {
			size = 1 + rng.IntN(len(chunk))
		}
		k := min(int64(size), start+total-off)
		if err := st.Append(fillAt(chunk[:k], off)); err != nil {
			t.Fatal(err)
		}
		e.fan.Flush()
		off += k
		if rng.IntN(64) == 0 {
			if err := prog.wait(off, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var inline, handed, rests int64
	for i, ir := range rs {
		s := ir.sender()
		if n := s.overlaps.Load(); n != 0 {
			t.Errorf("replica %d: %d writes began while another was in flight", i, n)
		}
		inline += s.inline.Load()
		handed += s.handed.Load()
		rests += s.rests.Load()
	}
	if inline == 0 || handed == 0 || rests == 0 {
		t.Fatalf("%d inline writes, %d hand-overs, %d rests sent by the write loop: every path must be taken", inline, handed, rests)
	}
	t.Logf("%d inline writes, %d hand-overs, %d rests sent by the write loop", inline, handed, rests)
}

// noisyByte is the compressed test's stream byte at off: a hash of it,
// which zstd cannot shrink, so that chunks fill the small socket buffers.
func noisyByte(off int64) byte {
	z := uint64(off) * 0x9e3779b97f4a7c15 // splitmix64's finaliser
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return byte(z ^ z>>31)
}

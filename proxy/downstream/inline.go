package downstream

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/replbuf"
)

// Fan-out without wake-ups: the goroutine that publishes new stream bytes
// (the upstream link's) sends them itself to the replicas that are caught
// up, one non-blocking writev each (Fanout.Flush), instead of waking each
// replica's write loop to write a few KiB and park again. A write loop is
// woken only when its socket would block, when its replica is behind, or
// when it has to end. See the package documentation, "Fan-out".

// The owner of a replica's socket, and with it of its stream cursor
// (inlineSender.owner). Exactly one of the write loop and the inline sender
// writes the socket at any moment; idle means neither does.
const (
	ownWriter  int32 = iota // the write loop writes, or will: the inline sender keeps off
	ownIdle                 // the replica is caught up and its write loop parked: the inline sender may take it
	ownInline               // the inline sender is writing
	ownReclaim              // the inline sender is writing and the write loop, ending, waits for it (kick)
)

// A Fanout is the set of replicas the stream's producer sends to inline.
// The proxy holds one, hands it to every replica (Config.Fanout) and calls
// Flush on the upstream link's goroutine after each publish. A replica's
// write loop adds itself when it starts streaming from memory over a socket
// that allows it (plain TCP, compressed or not; not TLS) and removes
// itself when it stops.
type Fanout struct {
	mu   sync.Mutex                      // serialises add and remove; a leaf
	list atomic.Pointer[[]*inlineSender] // copy on write under mu; Flush reads it without a lock
}

// add makes s one of the senders Flush visits.
func (f *Fanout) add(s *inlineSender) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next []*inlineSender
	if p := f.list.Load(); p != nil {
		next = append(next, *p...)
	}
	next = append(next, s)
	f.list.Store(&next)
}

// remove takes s out. A Flush that loaded the list before may still visit
// it: the owner flag keeps that visit off a socket its write loop holds.
func (f *Fanout) remove(s *inlineSender) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.list.Load()
	if p == nil {
		return
	}
	next := make([]*inlineSender, 0, len(*p))
	for _, x := range *p {
		if x != s {
			next = append(next, x)
		}
	}
	f.list.Store(&next)
}

// Flush sends what was just published to every caught-up replica: at most
// one batch (MaxBatchBytes) each, by one non-blocking writev, so that the
// producer never waits for a replica and a replica whose socket is full
// delays the others by one failed writev. A replica whose socket would
// block, that is behind by more than that batch, or whose write failed is
// handed to its write loop. Called by the stream's producer after it
// published (the proxy: when upstream's Host.Published is told); it
// allocates nothing.
func (f *Fanout) Flush() {
	p := f.list.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		s.flush()
	}
}

// Wake hands every parked replica back to its write loop, which then sees
// what changed in the stream (a new generation, the stream's end) as its
// cursor reports it. The proxy calls it when the stream changes without a
// publish.
func (f *Fanout) Wake() {
	p := f.list.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		if s.owner.CompareAndSwap(ownIdle, ownInline) {
			s.handOver()
		}
	}
}

// An inlineSender is the part of one replica the producer may write from:
// the owner flag, the socket's raw descriptor and the iovecs. Made by the
// write loop when it starts streaming (newInlineSender).
type inlineSender struct {
	owner atomic.Int32  // an own* state: who may write the socket and use cur
	kick  chan struct{} // capacity 1: the inline sender hands the socket back to the write loop
	rc    syscall.RawConn
	out   *atomic.Int64 // total_net_repl_output_bytes

	// cur is the stream cursor. The write loop sets it before it parks
	// (ownIdle); after that whoever owns the socket uses it, and the CAS
	// or Store that passes ownership on orders every use before it with
	// every use after.
	cur *replbuf.Cursor

	vec   writev                // owned by the inline sender while it holds the socket
	write func(fd uintptr) bool // s.writeFD, made once

	// writing counts the writes in flight on the socket, from either
	// side; overlaps counts the times one began while another was in
	// flight, which the owner flag forbids (tests assert it stays 0).
	writing  atomic.Int32
	overlaps atomic.Int64
	inline   atomic.Int64  // writes the inline sender made
	sent     *atomic.Int64 // the replica's own bytes sent (Replica.sent), or nil
	handed   atomic.Int64  // times it handed the socket to the write loop

	// delays observes each inline write's delay (WriteInline), from the
	// arrival marks of st, the stream cur reads; set with sent, read-only
	// after. delays may be nil.
	delays *WriteDelays
	st     *replbuf.Stream

	// A downstream proxy's compressed link (newCompressedInlineSender):
	// z is its encoder, and each batch is one chunk, written raw to the
	// socket below it; what the socket did not take of a chunk is rest,
	// which the write loop sends (sendRest) before anything else once it
	// has the socket back. coalesce is the link's setting in force: a
	// link told to gather chunks (repl-link-compression-coalesce-usec) is
	// handed to its write loop, which waits for more. z and rest belong to
	// whoever owns the socket; nil z is a plain link.
	z        *linkzstd.Writer
	rest     []byte
	rests    atomic.Int64 // chunks, or batches of TLS records, the socket took only part of
	chunk    [1][]byte
	coalesce func() time.Duration

	// A TLS replica (newTLSInlineSender): tc encrypts each batch, under
	// tlsInlineMax, into records that rec, the connection below it, hands
	// to writeRecord while the inline sender captures them (rec.capture);
	// what the socket did not take of them waits in rec for the write
	// loop, which sends it (RecordConn.Flush) before anything else. nil tc
	// is no TLS replica.
	tc          *tls.Conn
	rec         *RecordConn
	writeRecord func([]byte) int // s.writeRaw, made once
}

// tlsInlineMax bounds a TLS replica's inline batch: encrypting a larger
// one is its write loop's work, on its own goroutine, so that the
// producer's time per publish stays a small batch's per TLS replica.
const tlsInlineMax = 16 << 10

// newInlineSender returns conn's inline sender, or nil when conn is no
// socket the producer can write without blocking: a pipe, or a tls.Conn
// (whose records only crypto/tls builds: newTLSInlineSender).
func newInlineSender(conn net.Conn, out *atomic.Int64) *inlineSender {
	if !writevSupported {
		return nil
	}
	sc, ok := conn.(interface {
		net.Conn
		syscall.Conn
	})
	if !ok {
		return nil // *tls.Conn, net.Pipe
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	s := &inlineSender{kick: make(chan struct{}, 1), rc: rc, out: out}
	s.owner.Store(ownWriter)
	s.write = s.writeFD // one method value, so that no write allocates
	return s
}

// newTLSInlineSender returns the inline sender of a TLS replica, or nil
// when tc does not run on a RecordConn over a socket.
func newTLSInlineSender(tc *tls.Conn, out *atomic.Int64) *inlineSender {
	rec, ok := tc.NetConn().(*RecordConn)
	if !ok {
		return nil
	}
	s := newInlineSender(rec.Conn, out)
	if s != nil {
		s.tc, s.rec = tc, rec
		s.writeRecord = s.writeRaw
	}
	return s
}

// newCompressedInlineSender returns the inline sender of a compressed link
// whose encoder is z and whose socket is conn (below the encoder), or nil
// when conn is no socket the producer can write without blocking.
func newCompressedInlineSender(conn net.Conn, z *linkzstd.Writer, coalesce func() time.Duration, out *atomic.Int64) *inlineSender {
	s := newInlineSender(conn, out)
	if s != nil {
		s.z, s.coalesce = z, coalesce
	}
	return s
}

// flush takes the socket if it is idle and sends one batch.
func (s *inlineSender) flush() {
	if !s.owner.CompareAndSwap(ownIdle, ownInline) {
		return // the write loop has it: it sends the new bytes itself
	}
	if s.sendBatch() {
		s.handOver()
		return
	}
	if !s.owner.CompareAndSwap(ownInline, ownIdle) {
		s.handOver() // ownReclaim: the write loop waits for it
	}
}

// handOver gives the socket to the write loop and wakes it.
func (s *inlineSender) handOver() {
	s.handed.Add(1)
	s.owner.Store(ownWriter)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sendBatch writes the cursor's next batch without blocking and reports
// whether the write loop must take over: the socket would block or took
// only part, the cursor is further behind than the batch, or something
// failed (the write loop meets the same error and closes for it).
func (s *inlineSender) sendBatch() (handOver bool) {
	if s.z != nil {
		return s.sendChunk()
	}
	if s.tc != nil {
		return s.sendRecords()
	}
	c := s.cur
	bufs, err := c.Pending()
	if err != nil {
		return true
	}
	if len(*bufs) == 0 {
		return false
	}
	total := s.vec.load(*bufs)
	from := c.Offset()
	n, failed := s.writeVec()
	if n > 0 && s.advance(c, from, n) != nil {
		return true
	}
	return failed || n < total || c.Lag() > 0
}

// writeVec makes the one non-blocking writev of the iovecs loaded, and
// returns what it took and whether it failed.
func (s *inlineSender) writeVec() (n int, failed bool) {
	s.enter()
	rerr := s.rc.Write(s.write)
	s.leave()
	n, failed = s.vec.result()
	s.inline.Add(1)
	return n, failed || rerr != nil
}

// advance counts n stream bytes, from offset from, as sent (the delay of
// their write, the output counters) and moves the cursor past them.
func (s *inlineSender) advance(c *replbuf.Cursor, from int64, n int) error {
	if s.st != nil {
		s.delays.wrote(WriteInline, s.st, c.Generation(), from)
	}
	s.out.Add(int64(n))
	if s.sent != nil {
		s.sent.Add(int64(n))
	}
	return c.Advance(int64(n))
}

// sendChunk is sendBatch on a compressed link: the cursor's next batch,
// when it is a small one (under linkChunkMin), compressed into one chunk
// and written by one non-blocking write. The batch is the encoder's once
// compressed, so the cursor moves past it whatever the socket took; the
// rest of the chunk waits for the write loop (rest). A larger batch is
// the write loop's to compress, on its own goroutine: the producer's time
// per publish stays a small chunk's per compressed link.
func (s *inlineSender) sendChunk() (handOver bool) {
	if s.coalesce() > 0 {
		return true
	}
	c := s.cur
	bufs, from, took, ok, handOver := s.smallBatch(linkChunkMin)
	if !ok {
		return handOver
	}
	if s.z.Buffered() > 0 {
		return true
	}
	for _, b := range bufs {
		if _, err := s.z.Write(b); err != nil {
			return true // the write loop meets the encoder's error
		}
	}
	chunk, err := s.z.FlushChunk()
	if err != nil || len(chunk) == 0 {
		return true
	}
	s.chunk[0] = chunk
	s.vec.load(s.chunk[:])
	s.chunk[0] = nil
	n, failed := s.writeVec()
	if n < len(chunk) {
		s.rest = append(s.rest[:0], chunk[n:]...)
		s.rests.Add(1)
	}
	if s.advance(c, from, took) != nil {
		return true
	}
	return failed || len(s.rest) > 0 || c.Lag() > 0
}

// smallBatch returns the cursor's next batch, its first offset and its
// size, when it is under limit (ok). Otherwise handOver is sendBatch's
// answer: false when there is nothing to send, true on an error or for a
// batch the write loop is to send.
func (s *inlineSender) smallBatch(limit int) (bufs [][]byte, from int64, took int, ok, handOver bool) {
	from = s.cur.Offset()
	p, err := s.cur.Pending()
	if err != nil {
		return nil, 0, 0, false, true
	}
	if len(*p) == 0 {
		return nil, 0, 0, false, false
	}
	for _, b := range *p {
		took += len(b)
	}
	if took >= limit {
		return nil, 0, 0, false, true
	}
	return *p, from, took, true, false
}

// sendRecords is sendBatch for a TLS replica: the cursor's next batch,
// when under tlsInlineMax, written to the tls.Conn while its RecordConn
// captures, so that each record goes to the socket by one non-blocking
// write (writeRaw). The batch is the records' once encrypted, so the cursor
// moves past it whatever the socket took; the records' rest waits in the
// RecordConn for the write loop.
func (s *inlineSender) sendRecords() (handOver bool) {
	c := s.cur
	bufs, from, took, ok, handOver := s.smallBatch(tlsInlineMax)
	if !ok {
		return handOver
	}
	if !s.rec.capture(s.writeRecord) {
		return true
	}
	for _, b := range bufs {
		if _, err := s.tc.Write(b); err != nil {
			// A tls.Conn's write errors are for good: the write loop meets
			// this one, with nothing more sent.
			s.rec.release()
			return true
		}
	}
	left := s.rec.release()
	if left {
		s.rests.Add(1)
	}
	if s.advance(c, from, took) != nil {
		return true
	}
	return left || c.Lag() > 0
}

// writeRaw is a TLS replica's record write while captured: one
// non-blocking write, returning what the socket took (nothing on an error,
// which the write loop meets on its next write).
func (s *inlineSender) writeRaw(p []byte) int {
	s.chunk[0] = p
	s.vec.load(s.chunk[:])
	s.chunk[0] = nil
	n, _ := s.writeVec()
	return n
}

// enter and leave bracket every write of the stream to the socket.
func (s *inlineSender) enter() {
	if s.writing.Add(1) != 1 {
		s.overlaps.Add(1)
	}
}

func (s *inlineSender) leave() { s.writing.Add(-1) }

// park lends the socket to the inline sender while the replica is caught
// up on cur, and returns once the write loop owns it again (nil), or ctx
// ended (its error, the socket taken back first). conn's write deadline is
// cleared: the inline writes never wait, and an expired one would fail
// them.
func (s *inlineSender) park(ctx context.Context, conn net.Conn, cur *replbuf.Cursor) error {
	s.cur = cur
	conn.SetWriteDeadline(time.Time{})
	s.owner.Store(ownIdle)
	// Released first, checked second: a publish (or a Reset and Wake) after
	// the write loop's last look found the socket still the write loop's and
	// did nothing; its change is seen here (both sides use sequentially
	// consistent atomics). Moved reads no state of the cursor's owner, which
	// the inline sender may be from the Store on.
	if cur.Moved() && s.owner.CompareAndSwap(ownIdle, ownWriter) {
		return nil
	}
	select {
	case <-s.kick:
		return nil
	case <-ctx.Done():
		s.reclaim()
		return ctx.Err()
	}
}

// reclaim takes the socket back for the write loop, which ends: at once
// when it is idle, else once the inline sender's write in flight returned.
// The cursor may be closed after it.
func (s *inlineSender) reclaim() {
	for {
		switch s.owner.Load() {
		case ownWriter:
			return
		case ownIdle:
			if s.owner.CompareAndSwap(ownIdle, ownWriter) {
				return
			}
		case ownInline:
			if s.owner.CompareAndSwap(ownInline, ownReclaim) {
				<-s.kick // flush hands over: one non-blocking writev away
				return
			}
		}
	}
}

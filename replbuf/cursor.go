package replbuf

import (
	"context"
	"io"
	"net"
	"slices"
	"sync/atomic"
)

// A Cursor is one reader's position in a Stream: the next byte it has to send.
// It holds one reference, on the block that byte is in, and so keeps that block
// and every later one alive.
//
// A Cursor belongs to one goroutine at a time (a replica's writer, or the
// producer sending for it): Pending, Advance, Send, Wait and Close must not be
// called concurrently with each other, and a cursor handed from one goroutine
// to another must be handed with a happens-before edge (a channel, a mutex, an
// atomic the receiver reads). Offset, Lag and OutputBufferSize may be called
// from any goroutine.
type Cursor struct {
	s   *Stream
	gen uint64 // the stream's generation at Attach

	// cur is the block holding the next byte, on which the cursor holds its
	// ref. The owner moves it in Advance; for a cursor attached beyond the end
	// the producer sets it once, when the stream reaches the offset. Anyone may
	// read it.
	cur atomic.Pointer[block]
	off atomic.Int64 // offset of the next byte to send; owner-only writes

	// Owned by the cursor's goroutine.
	pos      int         // index of the next byte in cur; -1 until placed
	iov      [][]byte    // backing array of bufs, cap <= maxIOV
	bufs     net.Buffers // the batch handed out by Pending
	batch    int64       // bytes in that batch not yet advanced over
	maxBatch int
	closed   atomic.Bool // owner-only writes; OutputBufferSize reads it

	wake    chan struct{} // capacity 1; the producer's non-blocking send ends a Wait
	waiting bool          // guarded by s.mu: the cursor is on s.mu.waiters
}

// Attach returns a cursor whose next byte has the given offset. The offset may
// be anything from the first byte the stream still holds to one past its end;
// it may also lie further ahead (a replica waiting for a snapshot taken ahead
// of the stream), in which case the cursor pins nothing and starts when the
// stream reaches it. An older offset gives ErrOffsetOutOfRange.
func (s *Stream) Attach(offset int64) (*Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs := s.closed.Load(); cs != nil && s.mu.blocks.len() == 0 {
		return nil, ErrReleased
	}
	if s.mu.blocks.len() == 0 || offset < s.mu.blocks.front().start {
		return nil, ErrOffsetOutOfRange
	}
	c := &Cursor{
		s:        s,
		gen:      s.gen.Load(),
		pos:      -1,
		maxBatch: s.maxBatch,
		wake:     make(chan struct{}, 1),
	}
	c.iov = make([][]byte, 0, min(maxIOV, s.maxBatch/BlockSize+2))
	c.off.Store(offset)
	if offset <= s.end.Load()+1 {
		b := s.locateLocked(offset)
		b.refs.Add(1)
		c.cur.Store(b)
		s.mu.attached++
	} else {
		s.mu.pending = append(s.mu.pending, c)
		s.npending.Add(1)
	}
	return c, nil
}

// Offset returns the offset of the next byte the cursor will hand out.
func (c *Cursor) Offset() int64 { return c.off.Load() }

// Generation returns the stream generation the cursor reads (the stream's at
// Attach): once the stream's is another, the cursor fails with ErrReset.
func (c *Cursor) Generation() uint64 { return c.gen }

// Lag returns how many published bytes the cursor has not yet advanced over.
func (c *Cursor) Lag() int64 {
	return max(0, c.s.end.Load()+1-c.off.Load())
}

// Moved reports whether the cursor has something new for its owner: bytes
// published that it has not advanced over, or a stream that moved to another
// generation or was closed. It reads only atomics, so that a goroutine that
// has just handed the cursor to another (see Cursor) may still ask it.
func (c *Cursor) Moved() bool {
	return c.Lag() > 0 || c.gen != c.s.gen.Load() || c.s.closed.Load() != nil
}

// OutputBufferSize is the cursor's share of memory as Redis 7 counts a
// replica's output buffer: every block from the one holding its next byte to
// the tail, each at its full footprint (payload and node), whatever part of it
// was sent or is still empty. Zero while the cursor pins nothing. O(1).
func (c *Cursor) OutputBufferSize() int64 {
	if c.closed.Load() {
		return 0
	}
	b := c.cur.Load()
	t := c.s.tail.Load()
	if b == nil || t == nil || c.gen != c.s.gen.Load() {
		return 0
	}
	// NB: b or t may have been released and reused since they were loaded
	// (the cursor moved on, the tail filled); the ids are atomics, and a
	// figure from such a moment is discarded below or is one block off.
	bid, tid := b.id.Load(), t.id.Load()
	if bid > tid {
		return 0
	}
	return int64(tid-bid+1) * BlockFootprint
}

// Pending returns the cursor's next batch: slices of the shared blocks, in
// order, covering at most MaxBatchBytes and 1024 slices of the bytes published
// so far. An empty batch means the cursor is caught up (see Wait).
//
// The batch is a field of the cursor, returned by pointer so that writing it
// with (*net.Buffers).WriteTo allocates nothing. WriteTo modifies the batch
// (the slice and its elements, never the bytes); that is expected. The batch
// stays valid until the next Pending or Close; the bytes must not be modified.
//
// Pending returns ErrReset or ErrReleased once the stream moved to another
// generation, the stream's close error once it was closed with one, and io.EOF
// once it was closed and every byte was handed out and advanced over.
func (c *Cursor) Pending() (*net.Buffers, error) {
	c.bufs = c.iov[:0]
	c.batch = 0
	if err := c.check(); err != nil {
		return &c.bufs, err
	}
	cs := c.s.closed.Load() // before looking at the bytes: see below
	if cs != nil && cs.err != nil {
		return &c.bufs, cs.err
	}
	b := c.cur.Load()
	if b != nil {
		c.fill(b)
	}
	// A closed stream publishes nothing after Close, and the closed state was
	// loaded before the bytes, so an empty batch now means the end.
	if c.batch == 0 && cs != nil {
		return &c.bufs, io.EOF
	}
	return &c.bufs, nil
}

// fill gathers the published bytes from the cursor's position into c.bufs.
func (c *Cursor) fill(b *block) {
	if c.pos < 0 {
		c.pos = int(c.off.Load() - b.start)
	}
	pos, total := c.pos, 0
	for {
		used := int(b.used.Load())
		if pos < used {
			k := min(used-pos, c.maxBatch-total)
			c.bufs = append(c.bufs, b.buf[pos:pos+k:pos+k])
			total += k
			pos += k
			if total == c.maxBatch || len(c.bufs) == cap(c.bufs) {
				break
			}
		}
		if pos < BlockSize {
			break
		}
		next := b.next.Load()
		if next == nil {
			break
		}
		b, pos = next, 0
	}
	c.batch = int64(total)
}

// check reports why the cursor can no longer be used, if it cannot.
func (c *Cursor) check() error {
	if c.closed.Load() {
		return ErrCursorClosed
	}
	if c.gen != c.s.gen.Load() {
		if cs := c.s.closed.Load(); cs != nil && cs.err == ErrReleased {
			return ErrReleased
		}
		return ErrReset
	}
	return nil
}

// Advance moves the cursor forward by n bytes of the last batch, typically the
// count a write returned (partial writes included). When the cursor leaves a
// block it takes its ref on the next block before dropping the old one, and a
// block left with no ref may be trimmed.
func (c *Cursor) Advance(n int64) error {
	if n < 0 || n > c.batch {
		return ErrAdvance
	}
	if err := c.check(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	c.batch -= n
	b, pos := c.cur.Load(), c.pos
	released := false
	for rem := n; ; {
		room := int64(BlockSize - pos)
		next := b.next.Load()
		if rem < room || (rem == room && next == nil) {
			pos += int(rem)
			break
		}
		if next == nil {
			panic("replbuf: cursor advanced past the published end") // n <= batch forbids it
		}
		rem -= room
		next.refs.Add(1) // first the new ref, then drop the old: the trimmer never sees a gap
		c.cur.Store(next)
		if b.refs.Add(-1) == 0 {
			released = true
		}
		b, pos = next, 0
	}
	c.pos = pos
	c.off.Add(n)
	if released {
		c.s.trim()
	}
	return nil
}

// Send writes one batch to w and advances by what was written. With a
// *net.TCPConn the batch goes out in one writev. It returns the bytes written
// and the write's error; (0, nil) means there was nothing to send.
func (c *Cursor) Send(w io.Writer) (int64, error) {
	bufs, err := c.Pending()
	if err != nil || len(*bufs) == 0 {
		return 0, err
	}
	n, werr := bufs.WriteTo(w)
	if err := c.Advance(n); err != nil {
		return n, err
	}
	return n, werr
}

// ready reports whether Pending would return something now: bytes, an error or
// the end.
func (c *Cursor) ready() bool {
	if c.closed.Load() || c.gen != c.s.gen.Load() || c.s.closed.Load() != nil {
		return true
	}
	b := c.cur.Load()
	if b == nil {
		return false
	}
	pos := c.pos
	if pos < 0 {
		pos = int(c.off.Load() - b.start)
	}
	if pos < int(b.used.Load()) {
		return true
	}
	next := b.next.Load()
	return pos == BlockSize && next != nil && next.used.Load() > 0
}

// Wait blocks until Pending has something to return (bytes, an error or the
// end) or ctx is done, in which case it returns ctx.Err(). It never polls: the
// producer wakes it.
func (c *Cursor) Wait(ctx context.Context) error {
	for {
		if c.ready() {
			return nil
		}
		s := c.s
		s.mu.Lock()
		if !c.waiting {
			c.waiting = true
			s.mu.waiters = append(s.mu.waiters, c)
			s.nwaiters.Add(1)
		}
		s.mu.Unlock()
		// Registered first, checked second: a publish in between wakes us.
		if c.ready() {
			return nil
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close drops the cursor's ref, so that the blocks it pinned may be trimmed.
// It must be called by the cursor's goroutine once its last write returned.
// Safe to call more than once.
func (c *Cursor) Close() {
	if c.closed.Load() {
		return
	}
	c.closed.Store(true)
	c.bufs, c.batch = nil, 0
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.waiting {
		for i, w := range s.mu.waiters {
			if w == c {
				last := len(s.mu.waiters) - 1
				s.mu.waiters[i] = s.mu.waiters[last]
				s.mu.waiters[last] = nil
				s.mu.waiters = s.mu.waiters[:last]
				s.nwaiters.Add(-1)
				break
			}
		}
		c.waiting = false
	}
	if c.gen != s.gen.Load() {
		return // the generation's blocks and counts are gone already
	}
	if b := c.cur.Load(); b != nil {
		s.mu.attached--
		if b.refs.Add(-1) == 0 {
			s.trimLocked()
		}
		return
	}
	for i, p := range s.mu.pending {
		if p == c {
			s.mu.pending = slices.Delete(s.mu.pending, i, i+1)
			s.npending.Add(-1)
			break
		}
	}
}

package replbuf

import (
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBacklogSize is Redis's default repl-backlog-size: 1 MiB.
const DefaultBacklogSize = 1 << 20

// DefaultMaxBatchBytes bounds one writev of a cursor: about 1 MiB.
const DefaultMaxBatchBytes = 1 << 20

// maxIOV is Linux's IOV_MAX: the most slices one writev takes.
const maxIOV = 1024

// Config configures a Stream. The zero value is usable: every zero field means
// its default.
type Config struct {
	// BacklogSize is repl-backlog-size: how many bytes of history are kept for
	// partial resynchronisation when no cursor needs them. Zero means
	// DefaultBacklogSize; negative means keep everything (snapshots).
	BacklogSize int64

	// MaxBatchBytes bounds the bytes a cursor hands out per batch (one writev).
	// Zero means DefaultMaxBatchBytes.
	MaxBatchBytes int

	// Pool supplies the blocks. Nil means a private NewPool(0).
	Pool *Pool

	// Arrivals keeps when the bytes arrived (Stream.Arrived, Arrival): the
	// replication stream's, whose readers report how long bytes wait for
	// them. It costs two rings of marks (192 KiB) per generation; false,
	// for a snapshot's stream, keeps none and costs nothing.
	Arrivals bool

	// Now is the clock that dates what the producer published without
	// dating it (Arrived), and the base of the marks' times. Nil means
	// time.Now.
	Now func() time.Time
}

// A Stream is one replication stream held once in 16 KiB blocks and read by any
// number of cursors. See the package documentation for its rules.
type Stream struct {
	pool     *Pool
	maxBatch int

	backlogSize atomic.Int64               // repl-backlog-size; math.MaxInt64 keeps everything
	tail        atomic.Pointer[block]      // the block being filled; producer-only writes
	end         atomic.Int64               // offset of the last published byte; producer-only writes
	gen         atomic.Uint64              // generation; written under mu by the producer
	closed      atomic.Pointer[closeState] // non-nil once no more bytes come in this generation

	npending atomic.Int32 // len(mu.pending), read without the lock by the producer
	nwaiters atomic.Int32 // len(mu.waiters), read without the lock by the producer

	// Bytes filled but not yet published (Fill, FillBuffers, Publish,
	// Discard) lie after end: in the tail's free space, then in the blocks
	// of unpublished, which no reader can reach (they are neither in the
	// index nor linked from the tail), so Discard can take them back
	// without asking anyone.
	filled      atomic.Int64 // offset of the last filled byte, >= end; producer-only writes
	unpublished []*block     // blocks after the tail holding filled bytes; owned by the producer

	// FillBuffers' scratch, owned by the producer: the free space offered
	// to one read, and the new bytes it returns.
	fillSpaces [][]byte
	fillBytes  [][]byte
	fillFree   []*block

	// Arrival times (arrival.go), with Config.Arrivals: arrivals is the
	// current generation's marks, read by anyone (Arrival), replaced by
	// the producer at Reset; arr is the same pointer, the producer's own
	// (nil without Config.Arrivals); fillDates are the dates of the bytes
	// filled and not yet published, the producer's. Marks hold times as
	// nanoseconds since base, read from now.
	arrivals  atomic.Pointer[arrivals]
	arr       *arrivals
	fillDates fillDates
	now       func() time.Time
	base      time.Time

	// mu guards the index and the cursor lists. The producer takes it when it
	// publishes into new blocks and when it has cursors to place or wake;
	// cursors take it to attach, to wait, to close, and when they release a
	// block.
	// Lock order: Stream.mu, then Pool.mu.
	mu struct {
		sync.Mutex
		blocks   ring      // every block from the backlog's head to the tail
		pending  []*Cursor // cursors attached beyond the end, not yet placed
		waiters  []*Cursor // cursors blocked in Wait
		attached int       // cursors of this generation holding a block ref
	}
}

// closeState says how a stream ended: err nil means cursors drain and then
// see io.EOF; otherwise they fail with err at once.
type closeState struct{ err error }

// NewStream returns a stream whose next byte has offset start+1: start is the X
// of "+FULLRESYNC <replid> X". A nil cfg means the defaults.
func NewStream(start int64, cfg *Config) *Stream {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Pool == nil {
		c.Pool = NewPool(0)
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	s := &Stream{pool: c.Pool, maxBatch: c.MaxBatchBytes, now: c.Now}
	if s.now == nil {
		s.now = time.Now
	}
	s.SetBacklogSize(c.BacklogSize)
	s.startLocked(start)
	if c.Arrivals {
		s.base = s.now()
		s.arr = newArrivals(0, &s.end)
		s.arrivals.Store(s.arr)
	}
	return s
}

// startLocked begins a generation whose first byte is start+1, with one empty
// block. REQUIRES: mu held, or the stream not yet shared.
func (s *Stream) startLocked(start int64) {
	b := s.pool.get()
	b.start = start + 1
	b.id.Store(0)
	s.mu.blocks.push(b)
	s.tail.Store(b)
	s.end.Store(start)
	s.filled.Store(start)
}

// SetBacklogSize changes repl-backlog-size (0: the default; negative: keep
// everything) and trims at once if the backlog shrank. Safe for concurrent use.
func (s *Stream) SetBacklogSize(n int64) {
	switch {
	case n == 0:
		n = DefaultBacklogSize
	case n < 0:
		n = math.MaxInt64
	}
	s.backlogSize.Store(n)
	s.trim()
}

// BacklogSize returns repl-backlog-size as set (math.MaxInt64 for "everything").
func (s *Stream) BacklogSize() int64 { return s.backlogSize.Load() }

// Fill does one Read from r straight into the free space after the last
// filled byte: the tail's, or a new block's when that is full. The bytes are
// not published: cursors, Offset, the backlog and the accounting of what
// replicas hold do not see them until Publish, and Discard drops them. It
// returns the new bytes and Read's error.
//
// The returned slice aliases a block: the producer may scan it but must not
// modify it, and it is valid only until the next call of a producer method.
// Fill, FillCopy, FillBuffers, Publish, Discard, ReadOnce, ReadFrom, Append,
// Reset and Close are the producer's methods: they must not be called
// concurrently with each other.
func (s *Stream) Fill(r io.Reader) ([]byte, error) {
	if s.closed.Load() != nil {
		return nil, ErrClosed
	}
	b, pos := s.fillSpace()
	n, err := r.Read(b.buf[pos:])
	if n < 0 || n > BlockSize-pos {
		return nil, ErrShortRead
	}
	s.filled.Add(int64(n))
	return b.buf[pos : pos+n : pos+n], err
}

// MaxFillBlocks bounds the blocks one FillBuffers reads into: 1 MiB, the
// most a coalesced read of the proxy's stream loop waits for.
const MaxFillBlocks = 64

// A BuffersReader reads into several buffers with one call, in order, as
// readv(2) does: bufs[0] first, then bufs[1], and so on. It returns the
// bytes read in all of them, at most their total length, and may return
// an error with bytes, as io.Reader does.
type BuffersReader interface {
	ReadBuffers(bufs [][]byte) (int, error)
}

// FillBuffers is Fill with one ReadBuffers into up to want bytes of free
// space (at least the last block's, at most MaxFillBlocks blocks'): the
// last filled block's room, then new blocks: one as Fill takes it, and
// past it only blocks the pool has free, so that room the read may leave
// unused costs no allocation. One read then takes what a fast upstream has
// buffered, however many blocks it spans, where Fill takes one block's
// room per read. Blocks the read did not reach go back to the pool at once. It returns the new bytes as slices of the blocks,
// in order (none when nothing was read), and ReadBuffers' error; the
// slices and the outer slice follow Fill's aliasing rules (valid until the
// next producer call). FillBuffers is a producer method.
func (s *Stream) FillBuffers(r BuffersReader, want int) ([][]byte, error) {
	if s.closed.Load() != nil {
		return nil, ErrClosed
	}
	b, pos := s.fillSpace()
	s.fillSpaces = append(s.fillSpaces[:0], b.buf[pos:])
	room := BlockSize - pos
	// One block past the last's room is allocated when the pool has none
	// free, as Fill would when that room is full; beyond it, room the read
	// may leave unused is only the pool's free blocks (taken under one
	// lock), so that what it does not reach goes back without having been
	// allocated (each such block would otherwise be garbage once the free
	// list is full, and a heap that grows with it).
	if room < want {
		b = s.linkUnpublished(b, s.pool.get())
		s.fillSpaces = append(s.fillSpaces, b.buf)
		room += BlockSize
	}
	if room < want {
		extra := min((want-room+BlockSize-1)/BlockSize, MaxFillBlocks-len(s.fillSpaces))
		s.fillFree = s.pool.takeFree(s.fillFree[:0], extra)
		for _, nb := range s.fillFree {
			b = s.linkUnpublished(b, nb)
			s.fillSpaces = append(s.fillSpaces, b.buf)
			room += BlockSize
		}
		clear(s.fillFree)
	}
	n, err := r.ReadBuffers(s.fillSpaces)
	if n < 0 || n > room {
		s.returnFillBlocks(len(s.fillSpaces) - 1) // the first holds what it held
		clear(s.fillSpaces)
		return nil, ErrShortRead
	}
	s.filled.Add(int64(n))
	s.fillBytes = s.fillBytes[:0]
	reached := 1
	for i, space := range s.fillSpaces {
		k := min(n, len(space))
		if k == 0 {
			break
		}
		s.fillBytes = append(s.fillBytes, space[:k:k])
		n -= k
		reached = i + 1
	}
	s.returnFillBlocks(len(s.fillSpaces) - reached)
	clear(s.fillSpaces)
	return s.fillBytes, err
}

// returnFillBlocks gives the last k unpublished blocks back to the pool: the
// new blocks a FillBuffers read did not reach, which nobody else ever saw.
func (s *Stream) returnFillBlocks(k int) {
	last := len(s.unpublished) - k
	s.pool.putAll(s.unpublished[last:])
	clear(s.unpublished[last:])
	s.unpublished = s.unpublished[:last]
}

// fillSpace returns the block the next filled byte goes to and its index
// there, starting an unpublished block when the last one is full.
func (s *Stream) fillSpace() (*block, int) {
	b := s.tail.Load()
	if k := len(s.unpublished); k > 0 {
		b = s.unpublished[k-1]
	}
	if pos := int(s.filled.Load() + 1 - b.start); pos < BlockSize {
		return b, pos
	}
	return s.linkUnpublished(b, s.pool.get()), 0
}

// linkUnpublished makes nb, an empty block, the unpublished block whose
// first byte follows b's last, and returns it.
func (s *Stream) linkUnpublished(b, nb *block) *block {
	nb.start = b.start + BlockSize
	nb.id.Store(b.id.Load() + 1)
	s.unpublished = append(s.unpublished, nb)
	return nb
}

// Filled returns the offset of the last byte filled, published or not. Safe
// for concurrent use.
func (s *Stream) Filled() int64 { return s.filled.Load() }

// Publish makes the filled bytes up to offset end visible: cursors may send
// them, Offset reports end, and the backlog is trimmed behind them. end must
// lie in [Offset(), Filled()]; otherwise Publish returns ErrPublish and
// changes nothing. Publishing nothing new is allowed and does nothing. It
// returns ErrClosed on a closed stream. Publish is a producer method.
func (s *Stream) Publish(end int64) error {
	if s.closed.Load() != nil {
		return ErrClosed
	}
	cur := s.end.Load()
	if end < cur || end > s.filled.Load() {
		return ErrPublish
	}
	if end == cur {
		return nil
	}
	s.markPublished(end)
	t := s.tail.Load()
	if end < t.start+BlockSize {
		s.publish(t, int(end+1-t.start), end)
		return nil
	}
	s.publishBlocks(t, end)
	return nil
}

// Discard drops the filled bytes that were not published: the next Fill
// starts again right after Offset(). Blocks that held only such bytes go back
// to the pool; the tail, on which cursors may hold references, stays, and its
// published bytes are untouched. Discard is a producer method.
func (s *Stream) Discard() {
	s.dropUnpublished()
	s.filled.Store(s.end.Load())
	s.fillDates.clear()
}

// dropUnpublished gives the unpublished blocks back to the pool: nobody else
// ever saw them.
func (s *Stream) dropUnpublished() {
	if len(s.unpublished) == 0 {
		return
	}
	for _, b := range s.unpublished {
		s.pool.put(b)
	}
	clear(s.unpublished)
	s.unpublished = s.unpublished[:0]
}

// ReadOnce is Fill followed by Publish of everything filled (bytes an earlier
// Fill left unpublished included): one Read from r straight into the blocks,
// published at once. It returns the new bytes, with Fill's aliasing rules,
// and Read's error.
func (s *Stream) ReadOnce(r io.Reader) ([]byte, error) {
	p, err := s.Fill(r)
	if len(p) > 0 {
		if perr := s.Publish(s.filled.Load()); perr != nil {
			return nil, perr
		}
	}
	return p, err
}

// ReadFrom reads r until EOF or an error, like io.ReaderFrom: every read goes
// straight into the blocks. It returns the bytes added and any error but EOF.
func (s *Stream) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		p, err := s.ReadOnce(r)
		total += int64(len(p))
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Append copies p into the stream and publishes everything filled, like
// ReadOnce. It is for tests and for payloads that arrive already in memory;
// the receive path uses Fill or ReadOnce.
func (s *Stream) Append(p []byte) error {
	if s.closed.Load() != nil {
		return ErrClosed
	}
	if len(p) == 0 {
		return s.Publish(s.filled.Load())
	}
	for len(p) > 0 {
		q, err := s.FillCopy(p)
		if err != nil {
			return err
		}
		p = p[len(q):]
		// Block by block, so that readers follow a long payload as it is
		// copied and the backlog is trimmed as it goes.
		if err := s.Publish(s.filled.Load()); err != nil {
			return err
		}
	}
	return nil
}

// FillCopy is Fill from bytes already in memory: it copies as much of p as
// the free space after the last filled byte takes (the rest of the tail,
// or a new block), without publishing it, and returns the filled bytes,
// with Fill's rules for the slice.
func (s *Stream) FillCopy(p []byte) ([]byte, error) {
	if s.closed.Load() != nil {
		return nil, ErrClosed
	}
	b, pos := s.fillSpace()
	n := copy(b.buf[pos:], p)
	s.filled.Add(int64(n))
	return b.buf[pos : pos+n : pos+n], nil
}

// publish makes t's bytes up to used visible, end being the offset of the
// last of them, and wakes whoever waits for them.
func (s *Stream) publish(t *block, used int, end int64) {
	t.used.Store(int64(used))
	s.end.Store(end)
	// The cursor side registers (npending/nwaiters) and then re-checks the
	// published level; we publish and then check the counts. Both are
	// sequentially consistent atomics, so one of the two sees the other.
	if s.npending.Load() > 0 {
		s.placePending(end)
	}
	if s.nwaiters.Load() > 0 {
		s.wake()
	}
}

// publishBlocks publishes up to end, which lies past the tail t: t becomes
// full, and the unpublished blocks end reaches join the index, each linked
// from its predecessor before any of its bytes is visible. Pending cursors are
// placed before the trim, so that none of the bytes they wait for is trimmed
// before they hold a ref.
func (s *Stream) publishBlocks(t *block, end int64) {
	k := 0
	for k < len(s.unpublished) && s.unpublished[k].start <= end {
		k++
	}
	s.mu.Lock()
	prev := t
	for _, b := range s.unpublished[:k] {
		s.mu.blocks.push(b)
		prev.next.Store(b)
		prev = b
	}
	s.tail.Store(prev)
	if t.used.Load() != BlockSize {
		t.used.Store(BlockSize)
	}
	for _, b := range s.unpublished[:k-1] {
		b.used.Store(BlockSize)
	}
	prev.used.Store(min(BlockSize, end+1-prev.start))
	s.end.Store(end)
	rest := copy(s.unpublished, s.unpublished[k:])
	for i := rest; i < len(s.unpublished); i++ {
		s.unpublished[i] = nil // usually one: no call to clear
	}
	s.unpublished = s.unpublished[:rest]
	if s.npending.Load() > 0 {
		s.placePendingLocked(end)
	}
	// Trim as each block had been linked when its predecessor filled up, as
	// the history then was: the last such moment is prev's start.
	s.trimToLocked(prev.start - 1)
	if s.nwaiters.Load() > 0 {
		s.wakeLocked()
	}
	s.mu.Unlock()
}

// placePending gives a block ref to every pending cursor that the stream has
// reached. It runs on the producer, before the next trim, so no byte a pending
// cursor needs can be trimmed before the cursor holds it.
func (s *Stream) placePending(end int64) {
	s.mu.Lock()
	s.placePendingLocked(end)
	s.mu.Unlock()
}

// placePendingLocked is placePending. REQUIRES: mu held.
func (s *Stream) placePendingLocked(end int64) {
	kept := s.mu.pending[:0]
	for _, c := range s.mu.pending {
		off := c.off.Load()
		if off > end+1 {
			kept = append(kept, c)
			continue
		}
		b := s.locateLocked(off)
		b.refs.Add(1)
		c.cur.Store(b)
		s.mu.attached++
	}
	clear(s.mu.pending[len(kept):])
	s.mu.pending = kept
	s.npending.Store(int32(len(kept)))
}

// wake releases every cursor blocked in Wait.
func (s *Stream) wake() {
	s.mu.Lock()
	s.wakeLocked()
	s.mu.Unlock()
}

func (s *Stream) wakeLocked() {
	for _, c := range s.mu.waiters {
		c.waiting = false
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	clear(s.mu.waiters)
	s.mu.waiters = s.mu.waiters[:0]
	s.nwaiters.Store(0)
}

// locateLocked returns the block holding offset off, which must lie in
// [first byte, end+1]. Every block but the tail is full, so this is
// arithmetic. For off == end+1 with a full tail it is the tail itself (a
// cursor there sits at its end until the next block exists).
// REQUIRES: mu held.
func (s *Stream) locateLocked(off int64) *block {
	i := int((off - s.mu.blocks.front().start) / BlockSize)
	if i == s.mu.blocks.len() {
		i--
	}
	return s.mu.blocks.at(i)
}

// trim releases blocks from the head that neither the backlog nor any cursor
// needs. Safe for concurrent use.
func (s *Stream) trim() {
	s.mu.Lock()
	s.trimLocked()
	s.mu.Unlock()
}

// trimLocked is Redis's incrementalTrimReplicationBacklog: drop the head while
// it is not the tail, no cursor's next byte is in it, and the history without
// it would still exceed the backlog size.
// REQUIRES: mu held.
func (s *Stream) trimLocked() { s.trimToLocked(s.end.Load()) }

// trimToLocked is trimLocked with the history measured up to end, which must
// not lie past the published end. REQUIRES: mu held.
func (s *Stream) trimToLocked(end int64) {
	backlog := s.backlogSize.Load()
	for s.mu.blocks.len() > 1 {
		h := s.mu.blocks.front()
		if h.refs.Load() != 0 {
			return
		}
		histlen := end + 1 - h.start
		if histlen-BlockSize <= backlog {
			return
		}
		s.mu.blocks.pop()
		s.pool.put(h)
	}
}

// Reset starts a new generation whose next byte has offset start+1 (a new
// "+FULLRESYNC <replid> start"). Every cursor attached before fails from now on
// with ErrReset. The old blocks go back to the pool when no cursor is attached;
// otherwise they are left to the garbage collector, since a cursor may be in the
// middle of a write from them. Bytes filled and not published are dropped.
func (s *Stream) Reset(start int64) {
	var arr *arrivals
	if s.arr != nil {
		arr = newArrivals(0, &s.end) // made before the lock: 192 KiB to clear
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gen := s.gen.Add(1)
	if arr != nil {
		// The new generation's offsets may repeat the old one's: its
		// marks start anew, and a reader still asking about the old
		// generation is told that nothing is known.
		arr.gen = gen
		s.arr = arr
		s.arrivals.Store(arr)
		s.fillDates.clear()
	}
	s.dropBlocksLocked()
	s.dropUnpublished()
	clear(s.mu.pending)
	s.mu.pending = s.mu.pending[:0]
	s.npending.Store(0)
	s.mu.attached = 0
	s.startLocked(start)
	s.closed.Store(nil)
	s.wakeLocked()
}

// dropBlocksLocked empties the index. REQUIRES: mu held.
func (s *Stream) dropBlocksLocked() {
	if s.mu.attached == 0 {
		s.mu.blocks.drain(s.pool.put)
		return
	}
	s.mu.blocks.drain(func(*block) {})
}

// Close ends the stream. With a nil err, cursors first receive every byte
// published before Close and then io.EOF; with a non-nil err they fail with it
// at once. No bytes can be added or published afterwards (Fill and Publish
// return ErrClosed): bytes filled and not published never reach a cursor, and
// Discard gives their blocks back. Close is a producer method.
func (s *Stream) Close(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() != nil {
		return
	}
	s.closed.Store(&closeState{err: err})
	s.wakeLocked()
}

// Release closes the stream and gives its blocks back (to the pool when no
// cursor is attached, else to the garbage collector). Cursors fail with
// ErrReleased. Safe to call more than once.
func (s *Stream) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.blocks.len() == 0 {
		return
	}
	s.gen.Add(1)
	s.dropBlocksLocked()
	s.mu.attached = 0
	s.mu.pending = nil
	s.npending.Store(0)
	s.closed.Store(&closeState{err: ErrReleased})
	s.wakeLocked()
	s.tail.Store(nil)
}

// Offset returns the offset of the last byte published: Redis's
// master_repl_offset. Safe for concurrent use.
func (s *Stream) Offset() int64 { return s.end.Load() }

// Generation counts Resets (and Release). Safe for concurrent use.
func (s *Stream) Generation() uint64 { return s.gen.Load() }

// Backlog returns the offset of the first byte still held (Redis's
// repl_backlog_first_byte_offset) and the number of bytes held from there to
// the end (repl_backlog_histlen). Safe for concurrent use.
func (s *Stream) Backlog() (first, histlen int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.blocks.len() == 0 {
		return 0, 0
	}
	first = s.mu.blocks.front().start
	return first, s.end.Load() + 1 - first
}

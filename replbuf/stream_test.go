package replbuf

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
	"unsafe"
)

func TestStreamStartsAtOffset(t *testing.T) {
	s := NewStream(1000, nil)
	if got := s.Offset(); got != 1000 {
		t.Fatalf("Offset() = %d, want 1000", got)
	}
	if first, hist := s.Backlog(); first != 1001 || hist != 0 {
		t.Fatalf("Backlog() = %d, %d; want 1001, 0", first, hist)
	}
	appendPattern(t, s, 37)
	if got := s.Offset(); got != 1037 {
		t.Fatalf("Offset() = %d after 37 bytes, want 1037", got)
	}
	c, err := s.Attach(1001)
	if err != nil {
		t.Fatal(err)
	}
	expectBytes(t, "cursor", drain(t, c), 1001)
	checkInvariants(t, s, c)
}

// TestTailFilledFirst: bytes fill the tail's free space before a block is
// started, so every block but the tail is full whatever the write sizes.
func TestTailFilledFirst(t *testing.T) {
	s := NewStream(0, &Config{BacklogSize: -1})
	total := 0
	for _, n := range []int{1, 100, BlockSize - 101, 1, BlockSize*3 + 5, 7, BlockSize - 12, 40000} {
		appendPattern(t, s, n)
		total += n
		checkInvariants(t, s)
		if got, want := s.Usage().Blocks, int64((total+BlockSize-1)/BlockSize); got != want {
			t.Fatalf("after %d bytes: %d blocks, want %d", total, got, want)
		}
	}
}

// recordingReader hands out chunks and remembers the buffers it was given.
type recordingReader struct {
	chunks [][]byte
	given  [][]byte
}

func (r *recordingReader) Read(p []byte) (int, error) {
	r.given = append(r.given, p)
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	if len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// TestReadOnceReadsIntoTail: the reader is handed the tail's free space itself,
// no intermediate buffer, and ReadOnce returns those same bytes.
func TestReadOnceReadsIntoTail(t *testing.T) {
	s := NewStream(0, nil)
	r := &recordingReader{chunks: [][]byte{pattern(1, 10), pattern(11, BlockSize)}}
	for i := 0; ; i++ {
		tail := s.tail.Load()
		used := tail.used.Load()
		if used == BlockSize {
			used = 0 // ReadOnce starts a block first
		}
		p, err := s.ReadOnce(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		given := r.given[len(r.given)-1]
		tail = s.tail.Load()
		if unsafe.SliceData(given) != &tail.buf[used] || len(given) != BlockSize-int(used) {
			t.Fatalf("read %d: reader got a buffer that is not the tail's free space", i)
		}
		if len(p) > 0 && unsafe.SliceData(p) != &tail.buf[used] {
			t.Fatalf("read %d: returned bytes are not the block's", i)
		}
	}
	c, _ := s.Attach(1)
	expectBytes(t, "stream", drain(t, c), 1)
	if s.Offset() != 10+BlockSize {
		t.Fatalf("offset %d", s.Offset())
	}
}

func TestReadFromCountsAndStopsAtEOF(t *testing.T) {
	s := NewStream(5, nil)
	r := &recordingReader{chunks: [][]byte{pattern(6, 40000), pattern(40006, 3)}}
	n, err := s.ReadFrom(r)
	if err != nil || n != 40003 {
		t.Fatalf("ReadFrom = %d, %v", n, err)
	}
	c, _ := s.Attach(6)
	expectBytes(t, "stream", drain(t, c), 6)
}

type badReader struct{}

func (badReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

func TestReadOnceRejectsBadCount(t *testing.T) {
	s := NewStream(0, nil)
	if _, err := s.ReadOnce(badReader{}); !errors.Is(err, ErrShortRead) {
		t.Fatalf("err = %v", err)
	}
}

func TestAttachRange(t *testing.T) {
	s := NewStream(100, &Config{BacklogSize: BlockSize})
	appendPattern(t, s, 5*BlockSize+10) // trims down to the backlog
	first, hist := s.Backlog()
	if first <= 101 || hist < BlockSize {
		t.Fatalf("backlog first %d histlen %d: nothing was trimmed", first, hist)
	}
	end := s.Offset()
	cases := []struct {
		name    string
		off     int64
		wantErr error
		placed  bool
	}{
		{"before first byte", first - 1, ErrOffsetOutOfRange, false},
		{"long gone", 1, ErrOffsetOutOfRange, false},
		{"negative", -5, ErrOffsetOutOfRange, false},
		{"first byte", first, nil, true},
		{"middle of a block", first + BlockSize + 30, nil, true},
		{"block boundary", first + BlockSize, nil, true},
		{"last byte", end, nil, true},
		{"one past the end", end + 1, nil, true},
		{"ahead of the end", end + 1000, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := s.Attach(tc.off)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Attach(%d) err = %v, want %v", tc.off, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			defer c.Close()
			if placed := c.cur.Load() != nil; placed != tc.placed {
				t.Fatalf("placed = %v, want %v", placed, tc.placed)
			}
			got := drain(t, c)
			if tc.off <= end+1 && int64(len(got)) != end+1-tc.off {
				t.Fatalf("got %d bytes, want %d", len(got), end+1-tc.off)
			}
			expectBytes(t, "cursor", got, tc.off)
			checkInvariants(t, s, c)
		})
	}
}

// TestAttachAhead: a cursor attached beyond the end pins nothing, lets the
// backlog trim past older data, and starts exactly at its offset once the
// stream gets there, even if the stream then runs far beyond it at once.
func TestAttachAhead(t *testing.T) {
	s := NewStream(0, &Config{BacklogSize: BlockSize})
	appendPattern(t, s, 100)
	target := int64(10*BlockSize + 77)
	c, err := s.Attach(target)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.OutputBufferSize() != 0 || c.Lag() != 0 {
		t.Fatalf("ahead cursor: cob %d lag %d", c.OutputBufferSize(), c.Lag())
	}
	appendPattern(t, s, int(target)-200) // still short of the target
	if got := drain(t, c); len(got) != 0 {
		t.Fatalf("cursor ahead of the stream got %d bytes", len(got))
	}
	if first, _ := s.Backlog(); first == 1 {
		t.Fatal("a cursor ahead of the stream pinned the head")
	}
	checkInvariants(t, s, c)
	appendPattern(t, s, 50*BlockSize) // jump well past the target in one call
	got := drain(t, c)
	if int64(len(got)) != s.Offset()+1-target {
		t.Fatalf("got %d bytes, want %d", len(got), s.Offset()+1-target)
	}
	expectBytes(t, "ahead cursor", got, target)
	checkInvariants(t, s, c)
}

func TestAttachAheadAtBlockBoundary(t *testing.T) {
	s := NewStream(0, &Config{BacklogSize: 1})
	c, _ := s.Attach(BlockSize + 1) // first byte of the second block
	appendPattern(t, s, BlockSize)  // exactly up to it: placed at the end of the full tail
	if c.cur.Load() == nil {
		t.Fatal("cursor at end+1 not placed")
	}
	checkInvariants(t, s, c)
	appendPattern(t, s, 10)
	expectBytes(t, "cursor", drain(t, c), BlockSize+1)
	checkInvariants(t, s, c)
}

// TestMultiBlockBatch follows Valkey's test_writeToReplica: one batch spans
// several blocks, a start position inside a block, a partial write that ends
// inside another block, and the tail never freed while a cursor is in it.
func TestMultiBlockBatch(t *testing.T) {
	s := NewStream(0, &Config{BacklogSize: -1})
	appendPattern(t, s, 3*BlockSize+100)
	c, err := s.Attach(30 + 1) // position 30 of the first block
	if err != nil {
		t.Fatal(err)
	}
	s.SetBacklogSize(1) // from now on only the cursor keeps blocks
	bufs, err := c.Pending()
	if err != nil {
		t.Fatal(err)
	}
	wantLens := []int{BlockSize - 30, BlockSize, BlockSize, 100}
	if len(*bufs) != len(wantLens) {
		t.Fatalf("batch has %d slices, want %d", len(*bufs), len(wantLens))
	}
	off := int64(31)
	for i, b := range *bufs {
		if len(b) != wantLens[i] {
			t.Fatalf("slice %d has %d bytes, want %d", i, len(b), wantLens[i])
		}
		expectBytes(t, "slice", b, off)
		off += int64(len(b))
	}
	// A partial write that ends 50 bytes into the second block: the ref moves
	// there and the first block is released to the pool.
	if err := c.Advance(BlockSize - 30 + 50); err != nil {
		t.Fatal(err)
	}
	if c.pos != 50 || c.cur.Load().id.Load() != 1 {
		t.Fatalf("cursor at block %d pos %d, want block 1 pos 50", c.cur.Load().id.Load(), c.pos)
	}
	checkInvariants(t, s, c)
	if first, _ := s.Backlog(); first != BlockSize+1 {
		t.Fatalf("first block not trimmed: backlog starts at %d", first)
	}
	// The rest, then the cursor sits in the tail: it is never freed.
	expectBytes(t, "rest", drain(t, c), BlockSize+51)
	checkInvariants(t, s, c)
	if s.Usage().Blocks != 1 || c.cur.Load() != s.tail.Load() {
		t.Fatalf("%d blocks left; cursor in tail: %v", s.Usage().Blocks, c.cur.Load() == s.tail.Load())
	}
	// Filling the tail exactly: the cursor stays on the full tail until the
	// next block exists, then moves on.
	appendPattern(t, s, BlockSize-100)
	drain(t, c)
	if c.pos != BlockSize {
		t.Fatalf("pos %d, want the end of the full tail", c.pos)
	}
	appendPattern(t, s, 1)
	got := drain(t, c)
	if len(got) != 1 || c.cur.Load() != s.tail.Load() || c.pos != 1 {
		t.Fatalf("after one more byte: %d bytes, pos %d", len(got), c.pos)
	}
	checkInvariants(t, s, c)
}

func TestBatchLimits(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		s := NewStream(0, &Config{MaxBatchBytes: 3*BlockSize + 5, BacklogSize: -1})
		appendPattern(t, s, 10*BlockSize)
		c, _ := s.Attach(1)
		bufs, _ := c.Pending()
		if n := buffersLen(*bufs); n != 3*BlockSize+5 {
			t.Fatalf("batch of %d bytes", n)
		}
		if len(*bufs) != 4 {
			t.Fatalf("batch of %d slices", len(*bufs))
		}
	})
	t.Run("slices", func(t *testing.T) {
		s := NewStream(0, &Config{MaxBatchBytes: 64 << 20, BacklogSize: -1})
		appendPattern(t, s, 1100*BlockSize)
		c, _ := s.Attach(1)
		bufs, _ := c.Pending()
		if len(*bufs) != maxIOV {
			t.Fatalf("batch of %d slices, want %d", len(*bufs), maxIOV)
		}
		expectBytes(t, "all", drain(t, c), 1)
	})
	t.Run("advance beyond batch", func(t *testing.T) {
		s := NewStream(0, nil)
		appendPattern(t, s, 100)
		c, _ := s.Attach(1)
		if err := c.Advance(1); !errors.Is(err, ErrAdvance) {
			t.Fatalf("advance without a batch: %v", err)
		}
		c.Pending()
		if err := c.Advance(101); !errors.Is(err, ErrAdvance) {
			t.Fatalf("advance beyond the batch: %v", err)
		}
		if err := c.Advance(-1); !errors.Is(err, ErrAdvance) {
			t.Fatalf("negative advance: %v", err)
		}
		if err := c.Advance(60); err != nil {
			t.Fatal(err)
		}
		if err := c.Advance(41); !errors.Is(err, ErrAdvance) {
			t.Fatalf("advance beyond the rest of the batch: %v", err)
		}
	})
}

func buffersLen(b net.Buffers) int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// TestBacklogTrim: history is kept down to the backlog size and never below
// it; a slow cursor pins older blocks (replica memory, not backlog), and once
// it moves on or closes the backlog shrinks back.
func TestBacklogTrim(t *testing.T) {
	const backlog = 4*BlockSize + 100
	pool := NewPool(3)
	s := NewStream(0, &Config{BacklogSize: backlog, Pool: pool})
	for range 40 {
		appendPattern(t, s, 3000)
		_, hist := s.Backlog()
		if s.Offset() >= backlog && hist < backlog {
			t.Fatalf("histlen %d fell below the backlog size %d", hist, backlog)
		}
		// Trimming runs when a block is started (as in Redis), so the tail
		// may fill once more on top of a trimmed history.
		if hist > backlog+2*BlockSize {
			t.Fatalf("histlen %d: more than the backlog %d and two blocks", hist, backlog)
		}
	}
	slow, err := s.Attach(s.Offset() - backlog + 1)
	if err != nil {
		t.Fatal(err)
	}
	pinned := slow.Offset()
	appendPattern(t, s, 20*BlockSize)
	first, _ := s.Backlog()
	if first > pinned || pinned-first >= BlockSize {
		t.Fatalf("slow cursor did not pin: backlog starts at %d, cursor at %d", first, pinned)
	}
	u := s.Usage()
	if u.Replicas == 0 || u.Backlog != backlog+u.Index || u.NotCountedForEvict == 0 {
		t.Fatalf("usage with a slow replica: %+v", u)
	}
	if got, want := slow.OutputBufferSize(), u.Blocks*BlockFootprint; got != want {
		t.Fatalf("slow cursor's output buffer %d, want %d (all %d blocks)", got, want, u.Blocks)
	}
	checkInvariants(t, s, slow)
	// Moving the slow cursor halfway releases what it no longer needs.
	bufs, _ := slow.Pending()
	if err := slow.Advance(int64(buffersLen(*bufs))); err != nil {
		t.Fatal(err)
	}
	if moved, _ := s.Backlog(); moved <= first {
		t.Fatal("nothing released after the slow cursor moved")
	}
	checkInvariants(t, s, slow)
	slow.Close()
	_, hist := s.Backlog()
	if hist > backlog+2*BlockSize {
		t.Fatalf("after close histlen %d, backlog %d", hist, backlog)
	}
	if st := pool.Stats(); st.FreeBlocks != 3 {
		t.Fatalf("free list holds %d blocks, bound is 3", st.FreeBlocks)
	}
	u = s.Usage()
	if u.Replicas != 0 || u.Cursors != 0 {
		t.Fatalf("usage after close: %+v", u)
	}
	checkInvariants(t, s)
}

func TestSetBacklogSizeTrims(t *testing.T) {
	s := NewStream(0, &Config{BacklogSize: 20 * BlockSize})
	appendPattern(t, s, 20*BlockSize)
	s.SetBacklogSize(2 * BlockSize)
	if _, hist := s.Backlog(); hist > 3*BlockSize {
		t.Fatalf("histlen %d after shrinking the backlog", hist)
	}
	checkInvariants(t, s)
}

func TestResetFailsCursors(t *testing.T) {
	pool := NewPool(100)
	s := NewStream(0, &Config{Pool: pool, BacklogSize: -1})
	appendPattern(t, s, 3*BlockSize)
	c, _ := s.Attach(1)
	ahead, _ := s.Attach(10 * BlockSize)
	bufs, _ := c.Pending() // a batch in flight while the stream resets
	inFlight := (*bufs)[0]
	before := append([]byte(nil), inFlight...)
	s.Reset(5000)
	if s.Offset() != 5000 || s.Generation() != 1 {
		t.Fatalf("after reset: offset %d generation %d", s.Offset(), s.Generation())
	}
	appendPattern(t, s, 4*BlockSize) // would overwrite recycled blocks
	if string(inFlight) != string(before) {
		t.Fatal("a block in flight was recycled and overwritten after reset")
	}
	for name, cur := range map[string]*Cursor{"attached": c, "ahead": ahead} {
		if _, err := cur.Pending(); !errors.Is(err, ErrReset) {
			t.Fatalf("%s cursor after reset: %v", name, err)
		}
		if err := waitCtx(t, cur, time.Second); err != nil {
			t.Fatalf("%s cursor wait after reset: %v", name, err)
		}
		cur.Close()
	}
	n, _ := s.Attach(5001)
	expectBytes(t, "new generation", drain(t, n), 5001)
	checkInvariants(t, s, n)
	if _, err := s.Attach(1); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("old offset after reset: %v", err)
	}
	// With no cursor attached the old blocks go back to the pool.
	n.Close()
	s.Reset(9000)
	if pool.Stats().FreeBlocks < 3 {
		t.Fatalf("blocks not recycled on reset without cursors: %+v", pool.Stats())
	}
}

func TestCloseDrainsThenEOF(t *testing.T) {
	s := NewStream(0, nil)
	appendPattern(t, s, 1000)
	c, _ := s.Attach(1)
	s.Close(nil)
	if err := s.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	expectBytes(t, "before close", drain2(t, c), 1)
	if _, err := c.Pending(); !isEOF(err) {
		t.Fatalf("after draining a closed stream: %v", err)
	}
}

// drain2 is drain that stops at io.EOF.
func drain2(t testing.TB, c *Cursor) []byte {
	t.Helper()
	var out []byte
	for {
		bufs, err := c.Pending()
		if isEOF(err) || (err == nil && len(*bufs) == 0) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range *bufs {
			out = append(out, b...)
		}
		c.Advance(int64(buffersLen(*bufs)))
	}
}

func TestCloseWithError(t *testing.T) {
	s := NewStream(0, nil)
	appendPattern(t, s, 1000)
	c, _ := s.Attach(1)
	boom := errors.New("boom")
	s.Close(boom)
	if _, err := c.Pending(); !errors.Is(err, boom) {
		t.Fatalf("pending after Close(err): %v", err)
	}
}

func TestWait(t *testing.T) {
	s := NewStream(0, nil)
	c, _ := s.Attach(1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with nothing published: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- waitCtx(t, c, 5*time.Second) }()
	// Not synchronisation: the test passes whether or not the goroutine is
	// blocked in Wait yet (the cursor is already a registered waiter, so a
	// publish before Wait blocks is seen at once); the pause only makes the
	// wake-up from a blocked Wait the likely path.
	time.Sleep(10 * time.Millisecond)
	appendPattern(t, s, 1)
	if err := <-done; err != nil {
		t.Fatalf("wait woken by publish: %v", err)
	}
	expectBytes(t, "woken", drain(t, c), 1)
	// At the end of a full tail, a new empty block is not "data".
	appendPattern(t, s, BlockSize-1)
	drain(t, c)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := c.Wait(ctx2); err == nil {
		t.Fatal("wait returned with nothing new")
	}
	go func() { done <- waitCtx(t, c, 5*time.Second) }()
	time.Sleep(10 * time.Millisecond) // as above: the likely path, not a condition
	s.Close(nil)
	if err := <-done; err != nil {
		t.Fatalf("wait woken by close: %v", err)
	}
	c.Close()
	if _, err := c.Pending(); !errors.Is(err, ErrCursorClosed) {
		t.Fatalf("pending after cursor close: %v", err)
	}
}

// TestMoved: Moved says a cursor has something new for its owner (bytes
// not advanced over, a new generation, a closed stream) and nothing else.
func TestMoved(t *testing.T) {
	s := NewStream(0, nil)
	c, _ := s.Attach(1)
	if c.Moved() {
		t.Fatal("moved with nothing published")
	}
	appendPattern(t, s, 10)
	if !c.Moved() {
		t.Fatal("not moved with 10 bytes published")
	}
	drain(t, c)
	if c.Moved() {
		t.Fatal("moved once drained")
	}
	s.Reset(100)
	if !c.Moved() {
		t.Fatal("not moved after a Reset")
	}
	c.Close()
	d, _ := s.Attach(101)
	s.Close(nil)
	if !d.Moved() {
		t.Fatal("not moved after Close")
	}
}

func TestOutputBufferSize(t *testing.T) {
	s := NewStream(0, &Config{BacklogSize: 1})
	c, _ := s.Attach(1)
	appendPattern(t, s, 10)
	if got := c.OutputBufferSize(); got != BlockFootprint {
		t.Fatalf("one block: cob %d", got)
	}
	appendPattern(t, s, 4*BlockSize)
	if got := c.OutputBufferSize(); got != 5*BlockFootprint {
		t.Fatalf("five blocks: cob %d", got)
	}
	if c.Lag() != 4*BlockSize+10 {
		t.Fatalf("lag %d", c.Lag())
	}
	drain(t, c)
	if got := c.OutputBufferSize(); got != BlockFootprint || c.Lag() != 0 {
		t.Fatalf("caught up: cob %d lag %d", got, c.Lag())
	}
}

// TestUsageFormulas checks Redis 7's figures on known values (PROTOCOL §7:
// with the default 1 MiB backlog, the counted part is 1,052,736 bytes).
func TestUsageFormulas(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name           string
		blocks         int64
		cursors        int
		backlog        int64
		wantBacklog    int64
		wantReplicas   int64
		wantNotCounted int64
	}{
		{"empty", 1, 0, mib, BlockFootprint, 0, 0},
		{"backlog full, no replica", 65, 0, mib, 65 * BlockFootprint, 0, 65*BlockFootprint - 1052736},
		{"slow replica", 200, 1, mib, mib, 200*BlockFootprint - mib, 200*BlockFootprint - 1052736},
		{"replica within backlog", 10, 3, mib, 10 * BlockFootprint, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := usageOf(tc.blocks, 0, tc.cursors, tc.backlog)
			if u.Total != tc.blocks*BlockFootprint || u.Backlog != tc.wantBacklog ||
				u.Replicas != tc.wantReplicas || u.NotCountedForEvict != tc.wantNotCounted {
				t.Fatalf("usage %+v; want backlog %d replicas %d not-counted %d",
					u, tc.wantBacklog, tc.wantReplicas, tc.wantNotCounted)
			}
		})
	}
}

func TestReleaseFailsCursors(t *testing.T) {
	pool := NewPool(10)
	s := NewStream(0, &Config{Pool: pool})
	appendPattern(t, s, 3*BlockSize)
	c, _ := s.Attach(1)
	s.Release()
	s.Release()
	if _, err := c.Pending(); !errors.Is(err, ErrReleased) {
		t.Fatalf("pending after release: %v", err)
	}
	if _, err := s.Attach(1); !errors.Is(err, ErrReleased) {
		t.Fatalf("attach after release: %v", err)
	}
	c.Close()
	if u := s.Usage(); u.Blocks != 0 {
		t.Fatalf("usage after release: %+v", u)
	}
}

func TestPoolDropFree(t *testing.T) {
	pool := NewPool(10)
	s := NewStream(0, &Config{Pool: pool, BacklogSize: 1})
	appendPattern(t, s, 8*BlockSize)
	if st := pool.Stats(); st.FreeBlocks == 0 {
		t.Fatal("nothing on the free list")
	}
	n := pool.Stats().FreeBlocks
	if got := pool.DropFree(); got != int64(n)*BlockFootprint {
		t.Fatalf("DropFree returned %d for %d blocks", got, n)
	}
	if st := pool.Stats(); st.FreeBlocks != 0 {
		t.Fatalf("free list after DropFree: %+v", st)
	}
	appendPattern(t, s, 3*BlockSize) // the pool still works
	checkInvariants(t, s)
}

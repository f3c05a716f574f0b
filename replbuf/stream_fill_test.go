package replbuf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fillAll fills data into s with as many Fill calls as it takes, reads of at
// most step bytes, and checks that each call returns the bytes just read.
func fillAll(t testing.TB, s *Stream, data []byte, step int) {
	t.Helper()
	r := &chunkReader{data: data}
	for len(r.data) > 0 {
		r.sizes = append(r.sizes[:0], step)
		want := r.data
		p, err := s.Fill(r)
		if err != nil {
			t.Fatalf("fill: %v", err)
		}
		if !bytes.Equal(p, want[:len(p)]) {
			t.Fatal("Fill returned other bytes than it read")
		}
	}
}

// fillAllBuffers is fillAll with FillBuffers, each offering room for want
// bytes; it checks that the slices returned are the bytes just read, in
// order, none empty.
func fillAllBuffers(t testing.TB, s *Stream, data []byte, step, want int) {
	t.Helper()
	r := &chunkReader{data: data}
	for len(r.data) > 0 {
		r.sizes = append(r.sizes[:0], step)
		rest := r.data
		ps, err := s.FillBuffers(r, want)
		if err != nil {
			t.Fatalf("fill: %v", err)
		}
		for _, p := range ps {
			if len(p) == 0 || !bytes.Equal(p, rest[:len(p)]) {
				t.Fatal("FillBuffers returned other bytes than it read")
			}
			rest = rest[len(p):]
		}
	}
}

// spacesReader records the room FillBuffers offers it and reads n bytes
// of a pattern into it (n < 0: claims -n bytes more than it was offered).
type spacesReader struct {
	from   int64 // the offset of the next byte
	n      int
	err    error
	spaces []int // the length of each buffer offered, last call
}

func (r *spacesReader) ReadBuffers(bufs [][]byte) (int, error) {
	r.spaces = r.spaces[:0]
	room := 0
	for _, b := range bufs {
		r.spaces = append(r.spaces, len(b))
		room += len(b)
	}
	if r.n < 0 {
		return room - r.n, nil
	}
	data := pattern(r.from, r.n)
	got := 0
	for _, b := range bufs {
		got += copy(b, data[got:])
	}
	r.from += int64(got)
	return got, r.err
}

// TestFillBuffers: one FillBuffers offers the last block's room and as many
// new blocks as want needs (MaxFillBlocks at most; past the first, only
// blocks the pool has free), returns the bytes read as one slice per block
// they reached, keeps those blocks unpublished and gives the others back
// to the pool at once; an impossible count fills nothing, and a closed
// stream refuses.
func TestFillBuffers(t *testing.T) {
	pool := NewPool(2 * MaxFillBlocks)
	pool.poison = true
	s := NewStream(0, &Config{BacklogSize: 64 * BlockSize, Pool: pool})
	appendPattern(t, s, BlockSize-100) // the tail has 100 bytes of room
	c, err := s.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	end := s.Offset()
	drain(t, c)
	// With no free block in the pool, the room offered past the tail's is
	// one new block, however much is wanted: room the read may not reach
	// is never allocated for it.
	r := &spacesReader{from: end + 1}
	if _, err := s.FillBuffers(r, 10*BlockSize); err != nil {
		t.Fatal(err)
	}
	if want := []int{100, BlockSize}; !slices.Equal(r.spaces, want) {
		t.Fatalf("room offered with no free block %v, want %v", r.spaces, want)
	}
	// Warm the pool, so that the blocks FillBuffers takes come from its
	// free list and those it gives back show there.
	fillAll(t, s, bytes.Repeat([]byte{0xee}, (MaxFillBlocks+4)*BlockSize), BlockSize)
	s.Discard()
	free := pool.Stats().FreeBlocks

	r.n = BlockSize + 300

	ps, err := s.FillBuffers(r, 3*BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100, BlockSize, BlockSize, BlockSize}; !slices.Equal(r.spaces, want) {
		t.Fatalf("room offered %v, want %v (the tail's, then new blocks up to 3 blocks' worth)", r.spaces, want)
	}
	var lens []int
	for _, p := range ps {
		lens = append(lens, len(p))
	}
	if want := []int{100, BlockSize, 200}; !slices.Equal(lens, want) {
		t.Fatalf("slices of %v bytes, want %v", lens, want)
	}
	expectBytes(t, "filled", slices.Concat(ps...), end+1)
	if s.Offset() != end || s.Filled() != end+BlockSize+300 {
		t.Fatalf("offset %d filled %d, want %d and %d", s.Offset(), s.Filled(), end, end+BlockSize+300)
	}
	if got := pool.Stats().FreeBlocks; got != free-2 {
		t.Fatalf("%d free blocks after the fill, want %d: the block no byte reached goes back", got, free-2)
	}
	if u := s.Usage(); u.Unpublished != 2*BlockFootprint {
		t.Fatalf("unpublished %d, want two blocks", u.Unpublished)
	}
	checkInvariants(t, s, c)
	if err := s.Publish(s.Filled()); err != nil {
		t.Fatal(err)
	}
	got := drain(t, c)
	if len(got) != BlockSize+300 {
		t.Fatalf("cursor got %d bytes, want %d", len(got), BlockSize+300)
	}
	expectBytes(t, "published", got, end+1)

	// Room for more than MaxFillBlocks is capped there, and a read that
	// fits in the tail's room gives every new block back.
	r.n = 5
	before := pool.Stats()
	if _, err := s.FillBuffers(r, 1<<30); err != nil {
		t.Fatal(err)
	}
	if len(r.spaces) != MaxFillBlocks {
		t.Fatalf("%d buffers offered for a huge want, want %d", len(r.spaces), MaxFillBlocks)
	}
	after := pool.Stats()
	if after.FreeBlocks-before.FreeBlocks != int(after.Allocated-before.Allocated) || s.Usage().Unpublished != 0 {
		t.Fatalf("pool %+v before a 5-byte read, %+v after, unpublished %d: every new block should be free again",
			before, after, s.Usage().Unpublished)
	}
	free = after.FreeBlocks

	// Nothing read, with an error: no slice, the error, nothing kept.
	r.n, r.err = 0, io.EOF
	filled := s.Filled()
	ps, err = s.FillBuffers(r, 4*BlockSize)
	if len(ps) != 0 || err != io.EOF || s.Filled() != filled || pool.Stats().FreeBlocks != free {
		t.Fatalf("empty read: %d slices, %v, filled %d (was %d), %d free", len(ps), err, s.Filled(), filled, pool.Stats().FreeBlocks)
	}
	// A count larger than the room offered fills nothing.
	r.n, r.err = -1, nil
	if _, err := s.FillBuffers(r, 4*BlockSize); !errors.Is(err, ErrShortRead) {
		t.Fatalf("count past the room: %v, want ErrShortRead", err)
	}
	if s.Filled() != filled || pool.Stats().FreeBlocks != free {
		t.Fatalf("after an impossible count: filled %d (was %d), %d free blocks", s.Filled(), filled, pool.Stats().FreeBlocks)
	}
	checkInvariants(t, s, c)
	s.Close(nil)
	if _, err := s.FillBuffers(r, BlockSize); !errors.Is(err, ErrClosed) {
		t.Fatalf("FillBuffers after Close: %v, want ErrClosed", err)
	}
}

// TestFillIsNotPublished: filled bytes, in the tail and in blocks beyond it,
// stay invisible to every reader and every figure (Offset, Backlog, Lag,
// OutputBufferSize, a waiting cursor, one attached past the end) until they
// are published, and then exactly up to the published offset.
func TestFillIsNotPublished(t *testing.T) {
	pool := NewPool(16)
	pool.poison = true
	s := NewStream(0, &Config{BacklogSize: 8 * BlockSize, Pool: pool})
	appendPattern(t, s, BlockSize-100) // the tail has 100 bytes of room
	c, err := s.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectBytes(t, "before the fill", drain(t, c), 1)
	ahead, err := s.Attach(BlockSize + 50) // starts in the first unpublished block
	if err != nil {
		t.Fatal(err)
	}
	defer ahead.Close()
	end := s.Offset()
	first, hist := s.Backlog()
	obs := c.OutputBufferSize()
	usage := s.Usage()

	fillAll(t, s, pattern(end+1, BlockSize+400), 5000) // the tail's room, a full block, part of another
	if s.Offset() != end || s.Filled() != end+BlockSize+400 {
		t.Fatalf("offset %d filled %d, want %d and %d", s.Offset(), s.Filled(), end, end+BlockSize+400)
	}
	if f, h := s.Backlog(); f != first || h != hist {
		t.Fatalf("backlog (%d, %d) after a fill, was (%d, %d)", f, h, first, hist)
	}
	if got := c.OutputBufferSize(); got != obs {
		t.Fatalf("OutputBufferSize %d after a fill, was %d", got, obs)
	}
	if c.Lag() != 0 {
		t.Fatalf("lag %d after a fill", c.Lag())
	}
	if got := drain(t, c); len(got) != 0 {
		t.Fatalf("a cursor got %d filled bytes before any publish", len(got))
	}
	if ahead.cur.Load() != nil {
		t.Fatal("a cursor waiting past the end was placed on an unpublished block")
	}
	if err := waitCtx(t, c, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait returned %v after a fill, want it to wait", err)
	}
	u := s.Usage()
	if u.Total != usage.Total || u.Unpublished != 2*BlockFootprint || u.Allocated() != usage.Allocated()+2*BlockFootprint {
		t.Fatalf("usage after a fill %+v, before %+v: want the two new blocks as Unpublished only", u, usage)
	}
	checkInvariants(t, s, c, ahead)

	// Publish up to the middle of the second new block: exactly that much
	// becomes visible, to both cursors.
	mid := end + 100 + BlockSize + 200
	waited := make(chan error, 1)
	go func() { waited <- waitCtx(t, c, 10*time.Second) }()
	if err := s.Publish(mid); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Wait after Publish: %v", err)
	}
	checkInvariants(t, s, c, ahead)
	got := drain(t, c)
	if int64(len(got)) != mid-end {
		t.Fatalf("cursor got %d bytes after publishing to %d, want %d", len(got), mid, mid-end)
	}
	expectBytes(t, "published", got, end+1)
	got = drain(t, ahead)
	if int64(len(got)) != mid-BlockSize-49 {
		t.Fatalf("cursor ahead got %d bytes, want %d", len(got), mid-BlockSize-49)
	}
	expectBytes(t, "ahead", got, BlockSize+50)
	// The second new block is the tail now, 200 of its 300 filled bytes
	// published: no block is left that holds only unpublished bytes.
	if s.Offset() != mid || s.Filled() != mid+100 || s.Usage().Unpublished != 0 {
		t.Fatalf("offset %d filled %d unpublished %d, want %d, %d, 0", s.Offset(), s.Filled(), s.Usage().Unpublished, mid, mid+100)
	}

	for _, bad := range []int64{mid - 1, s.Filled() + 1, -1} {
		if err := s.Publish(bad); !errors.Is(err, ErrPublish) {
			t.Fatalf("Publish(%d) with published %d filled %d: %v, want ErrPublish", bad, mid, s.Filled(), err)
		}
	}
	if err := s.Publish(mid); err != nil {
		t.Fatalf("publishing nothing new: %v", err)
	}

	// The rest, then a ReadOnce that continues it.
	if err := s.Publish(s.Filled()); err != nil {
		t.Fatal(err)
	}
	appendPattern(t, s, 10)
	got = drain(t, c)
	expectBytes(t, "rest", got, mid+1)
	if c.Offset() != s.Offset()+1 || s.Offset() != end+BlockSize+410 {
		t.Fatalf("cursor at %d, stream at %d", c.Offset(), s.Offset())
	}
	checkInvariants(t, s, c, ahead)
}

// TestDiscard: Discard drops every filled byte not published, gives the
// blocks that held only such bytes back to the pool, and the next fill
// continues right after the published end, where readers find the new bytes
// and none of the dropped ones.
func TestDiscard(t *testing.T) {
	pool := NewPool(16)
	pool.poison = true
	s := NewStream(0, &Config{Pool: pool})
	c, err := s.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	appendPattern(t, s, 1000)
	good := s.Offset()
	fillAll(t, s, pattern(good+1, 500), 200)
	if err := s.Publish(good + 300); err != nil { // a prefix checks out...
		t.Fatal(err)
	}
	fillAll(t, s, bytes.Repeat([]byte{0xee}, 3*BlockSize), 7000) // ...then garbage
	freeBefore := pool.Stats().FreeBlocks
	s.Discard()
	if s.Filled() != good+300 || s.Offset() != good+300 {
		t.Fatalf("after Discard offset %d filled %d, want both %d", s.Offset(), s.Filled(), good+300)
	}
	if got := pool.Stats().FreeBlocks - freeBefore; got != 3 {
		t.Fatalf("Discard gave %d blocks back, want the 3 the garbage started", got)
	}
	if u := s.Usage(); u.Unpublished != 0 || u.Blocks != 1 {
		t.Fatalf("usage after Discard %+v, want one block and nothing unpublished", u)
	}
	checkInvariants(t, s, c)
	s.Discard() // nothing to drop: a no-op
	checkInvariants(t, s, c)

	appendPattern(t, s, 2*BlockSize)
	got := drain(t, c)
	if int64(len(got)) != s.Offset() {
		t.Fatalf("cursor got %d bytes, want %d", len(got), s.Offset())
	}
	expectBytes(t, "after discard", got, 1)
	checkInvariants(t, s, c)

	// A reset drops unpublished bytes too.
	fillAll(t, s, bytes.Repeat([]byte{0xee}, BlockSize), BlockSize)
	s.Reset(5000)
	if s.Filled() != 5000 || s.Usage().Unpublished != 0 {
		t.Fatalf("after Reset filled %d unpublished %d", s.Filled(), s.Usage().Unpublished)
	}
	checkInvariants(t, s)

	// After Close nothing is published any more, filled or not.
	fillAll(t, s, pattern(5001, 10), 10)
	s.Close(nil)
	if err := s.Publish(5010); !errors.Is(err, ErrClosed) {
		t.Fatalf("Publish after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Fill(&chunkReader{data: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fill after Close: %v, want ErrClosed", err)
	}
	s.Discard()
}

// TestDiscardKeepsCursorBlock: the tail holds published bytes a cursor still
// has to send and a reference it holds; a Discard of the bytes filled after
// them, in the tail and beyond, must leave the tail, its bytes and the
// reference alone. With a poisoned pool a tail given back by mistake would
// show as wrong bytes.
func TestDiscardKeepsCursorBlock(t *testing.T) {
	for _, tc := range []struct {
		name string
		used int // published bytes in the tail
	}{{"partial tail", 700}, {"full tail", BlockSize}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := NewPool(16)
			pool.poison = true
			s := NewStream(0, &Config{BacklogSize: 1, Pool: pool})
			appendPattern(t, s, 3*BlockSize+tc.used)
			tail := s.tail.Load()
			c, err := s.Attach(3*BlockSize + 1) // the first byte of the tail
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.cur.Load() != tail || tail.refs.Load() != 1 {
				t.Fatal("cursor not on the tail")
			}
			fillAll(t, s, bytes.Repeat([]byte{0xee}, 2*BlockSize), 3000)
			s.Discard()
			if s.tail.Load() != tail || c.cur.Load() != tail || tail.refs.Load() != 1 || tail.used.Load() != int64(tc.used) {
				t.Fatalf("tail changed: same %v, refs %d, used %d", s.tail.Load() == tail, tail.refs.Load(), tail.used.Load())
			}
			checkInvariants(t, s, c)
			got := drain(t, c)
			if len(got) != tc.used {
				t.Fatalf("cursor got %d bytes, want %d", len(got), tc.used)
			}
			expectBytes(t, "tail", got, 3*BlockSize+1)

			// Garbage again, discarded, then good bytes: the cursor moves on
			// to them and sees no garbage.
			fillAll(t, s, bytes.Repeat([]byte{0xee}, BlockSize+5), 4000)
			s.Discard()
			appendPattern(t, s, BlockSize+5)
			got = drain(t, c)
			expectBytes(t, "after discard", got, int64(3*BlockSize+tc.used+1))
			if len(got) != BlockSize+5 {
				t.Fatalf("cursor got %d bytes, want %d", len(got), BlockSize+5)
			}
			checkInvariants(t, s, c)
		})
	}
}

// TestFillPublishDiscardConcurrent: a producer fills good bytes and garbage
// in random reads, publishes exactly the good prefix and discards the rest,
// while cursors send the stream and a waiter follows it; every byte a reader
// gets is a good one at its offset (checked with plain memory reads, which the
// race detector sees, as well as by content).
func TestFillPublishDiscardConcurrent(t *testing.T) {
	pool := NewPool(8)
	pool.poison = true
	s := NewStream(0, &Config{BacklogSize: 2 * BlockSize, MaxBatchBytes: 3 * BlockSize, Pool: pool})
	const total = 3 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	var bad atomic.Value
	for i := range 4 {
		c, err := s.Attach(1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			for c.Offset() <= total {
				bufs, err := c.Pending()
				if err != nil {
					bad.Store(err)
					return
				}
				off, n := c.Offset(), int64(0)
				for _, b := range *bufs {
					for j, x := range b {
						if x != patternByte(off+n+int64(j)) {
							bad.Store(errors.New("a reader saw a byte that was not published good"))
							return
						}
					}
					n += int64(len(b))
				}
				if n == 0 {
					if err := c.Wait(ctx); err != nil {
						bad.Store(err)
						return
					}
					continue
				}
				// Advance by part of the batch now and then, as a short write.
				if i%2 == 1 && n > 1 {
					n = n/2 + 1
				}
				if err := c.Advance(n); err != nil {
					bad.Store(err)
					return
				}
			}
		})
	}

	rng := rand.New(rand.NewPCG(7, 7))
	for s.Offset() < total {
		goodN := 1 + rng.IntN(3*BlockSize)
		if end := s.Offset(); end+int64(goodN) > total {
			goodN = int(total - end)
		}
		data := pattern(s.Filled()+1, goodN)
		garbageN := rng.IntN(2 * BlockSize)
		data = append(data, bytes.Repeat([]byte{0xee}, garbageN)...)
		if rng.IntN(2) == 0 {
			fillAll(t, s, data, 1+rng.IntN(BlockSize))
		} else {
			fillAllBuffers(t, s, data, 1+rng.IntN(4*BlockSize), rng.IntN(4*BlockSize))
		}
		// Publish the good bytes in one or two steps, then drop the rest.
		good := s.Offset() + int64(goodN)
		if rng.IntN(2) == 0 {
			if err := s.Publish(s.Offset() + int64(rng.IntN(goodN))); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Publish(good); err != nil {
			t.Fatal(err)
		}
		s.Discard()
	}
	s.Close(nil)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("readers did not finish")
	}
	if err, ok := bad.Load().(error); ok && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
}

// TestSteadyStateAllocsFillPublish is TestSteadyStateAllocs for the path the
// proxy takes: fill, publish a prefix, publish the rest, fill garbage and
// discard it, send to a replica. Once blocks are reused it allocates nothing.
func TestSteadyStateAllocsFillPublish(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	s, c, send := allocRig(t)
	r := &limitedPrefilled{n: 5000}
	step := func() {
		for range 4 { // 20000 bytes: every other step crosses into a new block
			if _, err := s.Fill(r); err != nil {
				t.Fatal(err)
			}
			if err := s.Publish(s.Offset() + (s.Filled()-s.Offset())/2); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Publish(s.Filled()); err != nil {
			t.Fatal(err)
		}
		for range 5 { // garbage into the next block, dropped
			if _, err := s.Fill(r); err != nil {
				t.Fatal(err)
			}
		}
		s.Discard()
		sendAll(t, c, send)
	}
	expectNoAllocs(t, "fill/publish/discard cycle", step)
}

// limitedPrefilled is prefilled with reads of at most n bytes.
type limitedPrefilled struct{ n int }

func (r *limitedPrefilled) Read(p []byte) (int, error) { return min(len(p), r.n), nil }

func (r *limitedPrefilled) ReadBuffers(bufs [][]byte) (int, error) {
	room := 0
	for _, b := range bufs {
		room += len(b)
	}
	return min(room, r.n), nil
}

// TestSteadyStateAllocsFillBuffers is TestSteadyStateAllocsFillPublish for
// FillBuffers: reads spanning several blocks, a prefix published, blocks
// the reads did not reach given back, garbage dropped. Once the pool and
// the scratch slices have their sizes it allocates nothing.
func TestSteadyStateAllocsFillBuffers(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	s, c, send := allocRig(t)
	r := &limitedPrefilled{n: 3*BlockSize + 100}
	step := func() {
		for range 2 {
			if _, err := s.FillBuffers(r, 6*BlockSize); err != nil {
				t.Fatal(err)
			}
			if err := s.Publish(s.Offset() + (s.Filled()-s.Offset())/2); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Publish(s.Filled()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FillBuffers(r, BlockSize); err != nil { // garbage, dropped
			t.Fatal(err)
		}
		s.Discard()
		sendAll(t, c, send)
	}
	expectNoAllocs(t, "FillBuffers cycle", step)
}

// TestPublishManyBlocksPlacesPending: one Publish that links many blocks
// trims the backlog behind them, but a cursor waiting for an offset in one of
// them is placed first, so it still finds its bytes.
func TestPublishManyBlocksPlacesPending(t *testing.T) {
	pool := NewPool(16)
	pool.poison = true
	s := NewStream(0, &Config{BacklogSize: 1, Pool: pool})
	at := int64(2*BlockSize + 77)
	c, err := s.Attach(at)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fillAll(t, s, pattern(1, 10*BlockSize+5), BlockSize)
	if err := s.Publish(s.Filled()); err != nil {
		t.Fatal(err)
	}
	if first, _ := s.Backlog(); first > at {
		t.Fatalf("backlog starts at %d, past the waiting cursor's %d", first, at)
	}
	checkInvariants(t, s, c)
	got := drain(t, c)
	expectBytes(t, "waiting cursor", got, at)
	if int64(len(got)) != s.Offset()+1-at {
		t.Fatalf("cursor got %d bytes, want %d", len(got), s.Offset()+1-at)
	}
	if first, _ := s.Backlog(); first < at-BlockSize {
		t.Fatalf("backlog starts at %d: nothing trimmed once the cursor moved on", first)
	}
}

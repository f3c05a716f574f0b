package replbuf

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	// BlockSize is the payload of every block: 16 KiB, which is exactly one Go
	// size class, so a block wastes nothing.
	BlockSize = 16 << 10

	// BlockOverhead is the usable size of a block's metadata node (the struct
	// below, 64 bytes, its own size class). It plays the part of Redis 7's
	// per-block constant P = sizeof(listNode) + sizeof(replBufBlock) = 64.
	// TestBlockOverhead keeps it honest.
	BlockOverhead = 64

	// BlockFootprint is what one block costs: payload plus node.
	BlockFootprint = BlockSize + BlockOverhead
)

// A block is one 16 KiB piece of a stream or snapshot.
//
// The producer writes buf[used:] and then publishes the new fill level with
// used.Store; readers read only buf[:used.Load()]. The two ranges never
// overlap, so no lock guards the bytes. start and id are set before the block
// is linked (next.Store, or the index under the stream's mutex) and never
// change while it is linked.
type block struct {
	buf   []byte                // len == cap == BlockSize; see above for who touches which part
	used  atomic.Int64          // published fill level; producer-only writes
	start int64                 // stream offset of buf[0]
	id    atomic.Uint64         // position in the stream from the generation's first block; atomic because OutputBufferSize may read a block that is being recycled
	refs  atomic.Int32          // cursors whose next byte is in this block
	next  atomic.Pointer[block] // the following block; set by the producer once this one is full
}

var _ [BlockOverhead - unsafe.Sizeof(block{})]struct{} // the node must fit its class

// A Pool hands out blocks and takes released ones back, keeping at most a fixed
// number of free blocks for reuse; beyond that, released blocks are left to the
// garbage collector. Streams and snapshots that share a Pool share its free
// blocks. A Pool is safe for concurrent use.
type Pool struct {
	maxFree int

	mu struct {
		sync.Mutex
		free      []*block // guarded by mu; len <= maxFree, cap == maxFree
		allocated int64    // blocks ever allocated by this pool
		reused    int64    // blocks handed out again from the free list
	}

	// poison, when set (tests), fills released blocks with 0xdb so that a
	// reader that looks at a block after its release sees garbage.
	poison bool
}

// DefaultMaxFreeBlocks is the free-list bound of a Pool made by NewPool(0): 4 MiB.
const DefaultMaxFreeBlocks = 256

// NewPool returns a Pool that keeps at most maxFree released blocks
// (DefaultMaxFreeBlocks when maxFree is 0; none when it is negative).
func NewPool(maxFree int) *Pool {
	if maxFree == 0 {
		maxFree = DefaultMaxFreeBlocks
	}
	maxFree = max(maxFree, 0)
	p := &Pool{maxFree: maxFree}
	p.mu.free = make([]*block, 0, maxFree)
	return p
}

// get returns a block with no bytes, no refs and no successor.
func (p *Pool) get() *block {
	p.mu.Lock()
	if n := len(p.mu.free); n > 0 {
		b := p.mu.free[n-1]
		p.mu.free[n-1] = nil
		p.mu.free = p.mu.free[:n-1]
		p.mu.reused++
		p.mu.Unlock()
		return b
	}
	p.mu.allocated++
	p.mu.Unlock()
	return &block{buf: make([]byte, BlockSize)}
}

// takeFree appends up to n blocks of the free list to dst, under one lock,
// and returns it: room that may go unused (FillBuffers), which should cost
// no allocation, and no lock per block.
func (p *Pool) takeFree(dst []*block, n int) []*block {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := len(p.mu.free)
	n = min(n, k)
	for i := k - 1; i >= k-n; i-- {
		dst = append(dst, p.mu.free[i])
		p.mu.free[i] = nil
	}
	p.mu.free = p.mu.free[:k-n]
	p.mu.reused += int64(n)
	return dst
}

// put takes back a block that nothing references any more.
func (p *Pool) put(b *block) {
	p.reset(b)
	p.mu.Lock()
	p.keepLocked(b)
	p.mu.Unlock()
}

// putAll is put of every block of bs, under one lock.
func (p *Pool) putAll(bs []*block) {
	for _, b := range bs {
		p.reset(b)
	}
	p.mu.Lock()
	for _, b := range bs {
		p.keepLocked(b)
	}
	p.mu.Unlock()
}

// reset empties a released block (and poisons it in tests).
func (p *Pool) reset(b *block) {
	b.used.Store(0)
	b.refs.Store(0)
	b.next.Store(nil)
	if p.poison {
		for i := range b.buf {
			b.buf[i] = 0xdb
		}
	}
}

// keepLocked puts b on the free list if it has room; otherwise b is left
// to the garbage collector. REQUIRES: mu held.
func (p *Pool) keepLocked(b *block) {
	if len(p.mu.free) < p.maxFree {
		p.mu.free = append(p.mu.free, b)
	}
}

// DropFree gives every free block back to the garbage collector and returns
// their footprint. Memory pressure calls it before anything else is evicted.
func (p *Pool) DropFree() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.mu.free)
	clear(p.mu.free)
	p.mu.free = p.mu.free[:0]
	return int64(n) * BlockFootprint
}

// PoolStats are a Pool's counters.
type PoolStats struct {
	FreeBlocks int   // blocks on the free list
	FreeBytes  int64 // their footprint plus the free list's own array
	Allocated  int64 // blocks ever allocated
	Reused     int64 // blocks handed out again from the free list
}

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{
		FreeBlocks: len(p.mu.free),
		FreeBytes:  int64(len(p.mu.free))*BlockFootprint + int64(usableSizeWithPointers(cap(p.mu.free)*pointerSize)),
		Allocated:  p.mu.allocated,
		Reused:     p.mu.reused,
	}
}

// ring is the index of a stream's blocks: a power-of-two circular array, so
// that the block holding an offset is found by arithmetic and the head is
// dropped in O(1). Not safe for concurrent use; the stream's mutex guards it.
type ring struct {
	items []*block
	head  int // index of the first block in items
	n     int // number of blocks
}

func (r *ring) len() int { return r.n }

// at returns the i-th block from the head.
func (r *ring) at(i int) *block { return r.items[(r.head+i)&(len(r.items)-1)] }

func (r *ring) front() *block { return r.at(0) }

func (r *ring) push(b *block) {
	if r.n == len(r.items) {
		r.resize(max(2*len(r.items), 16))
	}
	r.items[(r.head+r.n)&(len(r.items)-1)] = b
	r.n++
}

func (r *ring) pop() *block {
	b := r.items[r.head]
	r.items[r.head] = nil
	r.head = (r.head + 1) & (len(r.items) - 1)
	r.n--
	// Shrink once seven eighths are unused, so that a burst of pinned
	// blocks does not leave a large index behind. Halving then leaves the
	// index at most a quarter full: a stream that swings between a backlog
	// and a window ahead of it does not resize on every swing.
	if len(r.items) > 64 && r.n < len(r.items)/8 {
		r.resize(len(r.items) / 2)
	}
	return b
}

func (r *ring) resize(size int) {
	items := make([]*block, size)
	for i := range r.n {
		items[i] = r.at(i)
	}
	r.items, r.head = items, 0
}

// drain removes every block, calling f for each from head to tail.
func (r *ring) drain(f func(*block)) {
	for r.n > 0 {
		f(r.pop())
	}
}

// bytes is the index's own allocation.
func (r *ring) bytes() int64 {
	return int64(usableSizeWithPointers(len(r.items) * pointerSize))
}

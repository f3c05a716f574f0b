package replbuf

// Usage is a stream's memory, counted as Redis 7 counts its replication buffer
// (INFO memory), with every block at the usable size of its allocations.
type Usage struct {
	// Blocks is the number of blocks the stream holds.
	Blocks int64
	// Total is mem_total_replication_buffers: Blocks × BlockFootprint.
	Total int64
	// Index is the allocation of the block index (Redis adds its rax index to
	// the backlog figure; so does Backlog below).
	Index int64
	// BacklogSize is the repl-backlog-size the figures were computed with
	// (math.MaxInt64 for a stream that keeps everything, as a snapshot does).
	BacklogSize int64
	// Backlog is mem_replication_backlog: repl-backlog-size when replicas hold
	// more than that, else everything (plus Index). It is Split(Cursors > 0).
	Backlog int64
	// Replicas is mem_clients_slaves: what replicas pin beyond the backlog
	// size, zero when no cursor is attached. It is Split(Cursors > 0).
	Replicas int64
	// NotCountedForEvict is Redis's freeMemoryGetNotCountedMemory for the
	// replication buffer: everything beyond the backlog size and its blocks'
	// overhead. Memory that only replicas hold never counts toward maxmemory.
	NotCountedForEvict int64
	// Unpublished is the footprint of the blocks that hold only bytes filled
	// and not yet published (Stream.Fill): the upstream link's query buffer,
	// a normal client's memory in Redis's terms, not replication buffer.
	Unpublished int64
	// Cursors is the number of cursors of the current generation, attached or
	// waiting to start.
	Cursors int
}

// Allocated is the stream's whole heap footprint: blocks, index and the
// blocks not yet published.
func (u Usage) Allocated() int64 { return u.Total + u.Index + u.Unpublished }

// Split divides the replication buffer as Redis 7's INFO memory does
// (src/object.c getMemoryOverheadData): when there are replicas and the buffer
// is larger than repl-backlog-size, the backlog is repl-backlog-size and the
// rest is what the replicas hold; otherwise it is all backlog. Index is added
// to the backlog either way. Backlog and Replicas are Split(Cursors > 0); a
// caller that counts its replicas as Redis does, every connected one including
// those still waiting for a snapshot and so holding no cursor yet, passes its
// own answer.
func (u Usage) Split(replicas bool) (backlog, pinned int64) {
	if replicas && u.Total > u.BacklogSize {
		return u.BacklogSize + u.Index, u.Total - u.BacklogSize
	}
	return u.Total + u.Index, 0
}

// Usage returns the stream's memory figures. Safe for concurrent use; O(1).
func (s *Stream) Usage() Usage {
	s.mu.Lock()
	blocks := int64(s.mu.blocks.len())
	index := s.mu.blocks.bytes()
	cursors := s.mu.attached + len(s.mu.pending)
	// The tail moves only under mu, so filled (which may move meanwhile)
	// is measured against a tail that holds still.
	unpublished := s.unpublishedBlocksLocked()
	s.mu.Unlock()
	u := usageOf(blocks, index, cursors, s.backlogSize.Load())
	u.Unpublished = unpublished * BlockFootprint
	return u
}

// unpublishedBlocksLocked counts the blocks past the tail that hold filled
// bytes: the producer's own list, measured from outside without reading it.
// REQUIRES: mu held.
func (s *Stream) unpublishedBlocksLocked() int64 {
	t := s.tail.Load()
	if t == nil {
		return 0
	}
	beyond := s.filled.Load() - (t.start + BlockSize - 1) // filled bytes past the tail
	return max(0, (beyond+BlockSize-1)/BlockSize)
}

// usageOf applies Redis 7's formulas (src/object.c getMemoryOverheadData and
// src/evict.c freeMemoryGetNotCountedMemory) with our block footprint.
func usageOf(blocks, index int64, cursors int, backlogSize int64) Usage {
	u := Usage{Blocks: blocks, Total: blocks * BlockFootprint, Index: index, BacklogSize: backlogSize, Cursors: cursors}
	u.Backlog, u.Replicas = u.Split(cursors > 0)
	if u.Total > backlogSize {
		counted := backlogSize + (backlogSize/BlockSize+1)*BlockOverhead
		u.NotCountedForEvict = max(0, u.Total-counted)
	}
	return u
}

// Package replbuf holds a replication stream once, in fixed 16 KiB blocks, and
// lets any number of readers send it from those blocks without copying.
//
// # The stream
//
// A Stream is the byte stream a primary sends its replicas after a full or
// partial sync, addressed by Redis's replication offsets: NewStream(X, cfg)
// starts a stream whose first byte is offset X+1 (the X of
// "+FULLRESYNC <replid> X"), and Offset reports the last byte held (Redis's
// master_repl_offset). Its rules:
//
//   - Blocks. Every block's payload is exactly BlockSize (16384) bytes, a Go
//     size class, allocated whole and reused through a bounded free list (a
//     Pool). New bytes fill the tail's free space before a block is started, so
//     every block but the tail is full and the block holding an offset is found
//     by arithmetic, never by walking a list.
//   - One producer. Only one goroutine adds bytes: ReadOnce reads an io.Reader
//     (the upstream socket) straight into the tail's free space and then
//     publishes the new fill level atomically; readers never look past a
//     published level. The receive path copies nothing. Fill, FillBuffers,
//     Publish, Discard, ReadOnce, ReadFrom, Append, Reset and Close are the
//     producer's methods.
//   - Fill, then publish. Bytes are filled first and published second, so
//     that the producer can check them in place before anyone sees them (the
//     proxy publishes only whole commands its scanner accepted). Fill reads
//     into the free space after the last filled byte, in the tail or in
//     blocks that are neither in the index nor linked from the tail; Publish
//     makes a prefix of the filled bytes visible (ErrPublish for an end
//     outside [Offset, Filled]) and links those blocks first; Discard drops
//     the rest and gives their blocks back to the pool, which it may do
//     because no reader can reach them. FillBuffers is Fill with one read
//     (readv) into the tail's room and further new blocks at once, so that
//     a fast upstream costs one read per MiB rather than per block; past
//     one new block that room is the pool's free blocks only, and what the
//     read did not reach goes back to the pool. ReadOnce is Fill
//     then Publish of everything filled. Offset, Backlog, trimming,
//     OutputBufferSize and every cursor stop at the published end; Usage
//     counts the blocks of unpublished bytes apart (Unpublished).
//   - Cursors. A Cursor is one replica's position. Pending hands out the next
//     bytes as slices of the shared blocks in the cursor's own net.Buffers (at
//     most 1024 slices and MaxBatchBytes), which the replica's goroutine writes
//     with writev; Advance moves on by what the write took. Wait blocks until
//     there is more, woken by the producer; nothing polls. A cursor is used by
//     one goroutine at a time, which may change if the hand-over orders the
//     uses (the proxy lends a caught-up replica's cursor to the producer's
//     goroutine, which then sends for it without a Wait). A cursor may attach
//     at any offset from the first byte held to one past the end, or further
//     ahead, where it pins nothing until the stream reaches it.
//   - References. A cursor holds one reference, on the block its next byte is
//     in; moving on, it takes the next block's reference before dropping the
//     old one. Blocks are released from the head only, and only while the head
//     is not the tail, no cursor references it, and the history without it is
//     still longer than the backlog size (repl-backlog-size). A slow cursor so
//     pins older blocks; that excess is replica memory, not backlog. The
//     producer trims when a publish links new blocks, measuring the history
//     as it was when the newest one was started.
//   - Generations. Reset starts a new stream (an upstream full resync): every
//     open cursor fails with ErrReset.
//   - Arrival times. A stream made with Config.Arrivals (the replication
//     stream's, not a snapshot's) keeps when its bytes arrived, so that a
//     reader can tell how long a byte has waited (Arrival): the producer
//     dates each read as it fills it (Arrived), and Publish turns those
//     dates into marks (end offset, time) in two rings, a fine one (a mark
//     per 100 µs at most, 4096 of them) and a coarse one (per 10 ms, 8192),
//     so that only published bytes have marks, a command held back until
//     its end arrives keeps the time of its first read, and discarded bytes
//     leave none. A time from the marks is at most the ring's window early,
//     never late; a byte older than both rings reach (at least 80 s of
//     publishes) is reported as older, with the oldest mark's time. Reset
//     starts new rings: a generation's offsets are its own.
//   - Memory. Every block is counted at the usable size of its allocations
//     (BlockFootprint = payload + node), and Usage reports Redis 7's figures:
//     mem_total_replication_buffers, the backlog part, the part held only for
//     replicas, mem_not_counted_for_evict. A cursor's OutputBufferSize is
//     Redis's replica output-buffer figure, in O(1).
//
// A Snapshot is an RDB payload held in the same blocks with its (replid,
// offset), read through the same cursors, including while it still arrives.
// Its producer publishes only what package rdbcheck's walk has accepted,
// and the payload's end only once the walk has passed it: no reader is
// given a byte the walk refused, nor the whole of a payload that fails.
//
// # Concurrency
//
// Block bytes are guarded by publication, not by a lock: the producer writes
// only above a block's published level and readers read only below it; filled
// bytes not yet published are above it too, and Discard only moves the fill
// position back to the published end. Each
// Stream has one mutex for its block index and cursor lists; the producer
// takes it only to publish into a new block, place cursors waiting ahead, or
// wake waiters, and cursors take it to attach, wait, close, or release a block.
// Lock order: Stream.mu, then Pool.mu. Nothing in this package calls back into
// its users, and nothing logs.
//
// The arrival marks take no lock either: each mark's offset and time are
// atomics the producer alone writes, and a ring's count of marks opened is
// stored after a new mark's fields; a reader reads the marks it trusts and
// then checks that the count has not moved far enough for the producer to
// have overwritten them, reading again if it has (arrival.go). The
// producer's cost per publish is a few stores and no clock read of its own
// when it dated its reads (Arrived), and nothing allocates.
//
// NB: the race detector cannot see the kernel reading block bytes during
// writev, so the tests also drain cursors with plain memory reads.
//
// # Example
//
//	s := replbuf.NewStream(x, &replbuf.Config{BacklogSize: 1 << 20})
//	go func() { // the upstream reader
//		defer s.Discard() // nothing unchecked is ever published
//		for {
//			p, err := s.Fill(conn)
//			if len(p) > 0 {
//				good, ok := check(p) // offset of the last byte known good
//				if perr := s.Publish(good); perr != nil || !ok {
//					return
//				}
//			}
//			if err != nil {
//				return
//			}
//		}
//	}()
//	c, _ := s.Attach(x + 1) // a replica's writer
//	defer c.Close()
//	for {
//		if _, err := c.Send(replicaConn); err != nil {
//			return err
//		}
//		if err := c.Wait(ctx); err != nil {
//			return err
//		}
//	}
package replbuf

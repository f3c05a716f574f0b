// Package streamlog keeps a replication stream on disk: the bytes a primary
// sends its replicas, addressed by Redis's replication offsets, in segment
// files with checksums kept beside them, so that a proxy can serve partial
// resyncs from history it no longer holds in memory and recover that history
// after a restart.
//
// # Layout
//
// Everything of the log lives in one directory, opened through an FS (an
// os.Root in production, so no name leaves it; a fault-injecting layer in
// tests). The directory that holds it, the proxy's dir, is locked first
// (LockDir: LockName, flock'ed for as long as the proxy serves from it),
// so that no second proxy touches either:
//
//	meta.json                       identity and segment list, replaced atomically
//	<first offset, 20 digits>.seg   raw stream bytes, from that offset on
//	<first offset, 20 digits>.crc   a header, then one entry per record
//	spare.seg                       a dropped segment's file, for the next segment to overwrite
//	meta.json.<16 hex digits>.tmp   a replacement of meta.json being written
//
// A chunk is up to RecordMax (256 KiB) bytes of the stream as appended; its
// entry is 8 bytes: the length (its top bit the boundary mark below) and
// the CRC-32C of those bytes, little endian. The raw bytes stay raw, so a
// verified range can be sent with sendfile. AppendBuffers cuts a batch of
// the stream's blocks into chunks as large as that allows (a segment's end
// permitting), each one writev of its slices, with the CRC computed over
// the slices in place: a MiB of stream costs about four writes and four
// entries, not one of each per 16 KiB block, and no copy. The entries of a
// call's chunks go to the CRC file in one write, after the chunks' bytes.
// The CRC is hash/crc32's Castagnoli code, the fastest Go has on amd64
// (SSE4.2, three streams at once: about 18 GB/s here, so 0.055 CPU-s per GB
// whatever the chunk's size past a few KiB). Versions before
// this one wrote chunks of at most 64 KiB and refuse longer ones: going
// back to one costs the log (cut at the first long chunk, so a full sync),
// never a byte served unverified. meta.json
// holds the replication identity (replid, replid2, second_repl_offset), the
// offset the generation starts after, and the first offset of every segment,
// oldest first; segment i ends where segment i+1 starts.
//
// The in-memory index is coarser than the CRC file: a record of it is one
// chunk or several in a row, up to RecordMax bytes, with their CRC-32C
// combined. A record shorter than 16 KiB takes in the next chunk, so the
// index costs about 1.5 MB per GB of stream however small the chunks (one
// per command under small writes: 13 bytes or more each before), appended
// or recovered; Stats.IndexBytes reports it.
//
// # Rules
//
//   - Command boundaries: an entry may mark its chunk as ending where a
//     command ends. Recovery keeps the log only up to the last such chunk,
//     so that a PSYNC from its end asks the primary for whole commands.
//   - Bytes before entries: a chunk's bytes are written before its entry,
//     so an entry never describes bytes that were not written first.
//   - Syncs are fdatasync: a file's bytes and what reading them back needs
//     (size, blocks), all recovery reads, without the journal commit fsync
//     adds for a new mtime (a recycled segment is then synced by writing
//     its pages alone).
//   - Every offset read is checked before use: meta.json's start, second
//     offset and segment offsets are at most replid.MaxOffset, each segment
//     after the one before it, and no chunk may end past MaxOffset; a
//     meta.json that fails is not adopted (the log starts empty, and
//     Recovery.Problem says why). Files are read as streams, so a damaged
//     CRC file costs a buffer, not its size.
//   - Recovery verifies every chunk of every listed segment in order. The
//     first chunk that is short or whose CRC does not match ends the log:
//     it and everything after it is cut (files truncated, later segments
//     removed) and never served. Bytes after the last entry (written, entry
//     not yet) are cut too. Unlisted files are removed.
//   - Metadata is written to a new temporary file (O_EXCL, a random
//     name), synced, renamed over meta.json, and the directory synced:
//     internal/safefile's WriteFile, the one way replproxy replaces a file.
//     A failure before the rename leaves nothing of the replacement. It
//     is replaced once per new segment: the one replacement lists the new
//     segment and unlists those retention drops with it. A new segment's
//     files are created, and its CRC file's header synced, before meta.json
//     lists it (its segment file holds none of its bytes yet, and both names
//     become durable with meta.json's directory sync); a dropped segment is
//     unlisted before its files are removed.
//   - Serving verifies again: a reader reads each record of the index
//     whole, checks its CRC, and only then sends its bytes (a range that went bad on disk after
//     recovery is an error, never sent).
//   - Allocation ahead: a new segment's file gets its first SegmentBytes
//     allocated at once (fallocate, FALLOC_FL_KEEP_SIZE), so that appending
//     writes over allocated blocks instead of allocating them page by page
//     as the file grows (what that saves depends on the file system's
//     state: dd into a new file measured from 0.3 to 3 CPU-s per GB on the
//     same machine, over an allocated one 0.18). KEEP_SIZE, not mode 0, so that a file's size stays what
//     was written: recovery finds a segment's end, and bytes torn past its
//     last entry, and readers never see the allocated space. A
//     segment is cut to its records when sealed, which frees what was
//     allocated past them. While the log grows (retention drops nothing to
//     recycle) the writer prepares the spare below the same way after each
//     new segment, so the next one starts allocated too. Where the file
//     system has no fallocate, nothing is allocated ahead and appends
//     allocate as they write.
//   - Recycling: the first segment retention drops that no reader has open
//     becomes spare.seg, and the next new segment is that file, renamed and
//     written over from its start. Writing over allocated blocks costs the
//     kernel less than extending a new file, even one allocated ahead
//     (BenchmarkAppend: 0.33 CPU-s per GB recycled, 0.41 from an empty
//     log). Its CRC file's header says so (crcMagicReused; not for a spare
//     prepared ahead, which holds no bytes): the older bytes past its last entry are expected
//     after a crash, cut without being reported. A segment is cut to its
//     records when sealed and at Close. The CRC file is always new, so no
//     older entry can describe the new bytes.
//   - Errors are sticky. After a failed write or sync the log accepts
//     nothing more (Err reports why); the caller opens a new generation
//     (Reset) when it wants to try again. A failed fsync is never retried on
//     the same file.
//
// # Concurrency
//
// One goroutine writes (Append, AppendBuffers, Reset, SetIdentity, Close:
// the proxy's log follower). Sync may be called from another (the proxy's
// syncer, once a second under repl-log-fsync everysec) without holding the
// writer up: it takes the newest segment's files and the stream's end
// under wmu, lets wmu go, and fsyncs them under smu, so that appends go on
// during the fsync and Synced advances to what was written before it
// began. Sealing a segment waits for no fsync either: its files are handed
// to the next Sync, which fsyncs them first, and SealedReady tells the
// syncer to make that Sync at once (under everysec; under always the
// follower's Sync after the batch does); only when maxSealed segments
// already wait (repl-log-fsync no, or segments sealed faster than the
// syncer syncs them) does the writer fsync the oldest itself, so that
// every segment is durable by the time maxSealed more are. A failed Sync is
// sticky, as a failed Append: the writer's next call returns it, and
// Stats.Err and Err report it. Any number of Readers read at the same
// time, and anyone may ask for the figures (Stats, Err, IndexBytes,
// Bounds, Identity).
//
// Locks, in the order they are taken: wmu (held across the writer's
// writes, and the fsync of a sealed segment no Sync took, so nothing that
// only reads takes it), then smu (held across a Sync's fsyncs; the writer
// takes it only to close the files a Sync may be fsyncing, at Reset or
// Close, or at a roll past maxSealed), then sealedMu (the sealed segments waiting for a Sync, handed
// over at a roll and taken by a Sync, for no I/O), then mu (the segment
// index and the readers' counts; the writer takes it briefly, after its
// I/O, to publish what it wrote, so a reader sees whole records only),
// then status (the sticky error and the last
// sync, written after the I/O they report). Neither mu nor status is held
// across I/O, so the figures never wait behind the disk. Readers open
// their own file handles: retention may remove a segment a reader has open, which on
// Linux keeps reading the unlinked file. It never recycles one: readers
// count their open files (acquire, under mu, only while the segment is
// listed), so what a reader verified is what sendfile sends.
//
// # Files
//
// log.go holds the Log, Open, Close and what readers ask of the index;
// segment.go the in-memory index; meta.go meta.json; recover.go what Open
// verifies and cuts; append.go Append, AppendBuffers, Sync, Reset and
// SetIdentity; vecfile_linux.go the writev and fallocate they use (and
// vecfile_other.go their absence elsewhere);
// retention.go the dropping and recycling of segments; stats.go the
// figures; reader.go the Reader; dirlock.go the lock on the directory
// the log's directory lives in; fs.go the file layer.
package streamlog

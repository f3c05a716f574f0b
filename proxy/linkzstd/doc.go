// Package linkzstd is the codec of a compressed proxy-to-proxy link: the
// direction from a replproxy to a downstream replproxy that asked for
// `REPLCONF link-compression zstd` and got +OK, from the first byte after
// the PSYNC reply line to the end of the connection. It owns the chunk
// format, the zstd encoder of one such link (Writer) and its decoder
// (Reader), and their figures (Stats). It knows nothing of RESP, offsets or
// sockets: proxy/downstream writes a replica's bytes through a Writer,
// proxy/upstream reads the link through a Reader, and both keep counting
// offsets in raw bytes.
//
// # Chunks (wire format; do not change)
//
// The compressed direction is a sequence of chunks:
//
//	+--------------+--------------+-------------------+----------------------+
//	| C: 4 bytes   | R: 4 bytes   | CRC-32C: 4 bytes  | C bytes of zstd data |
//	| big-endian   | big-endian   | of the R raw bytes| (whole blocks)       |
//	+--------------+--------------+-------------------+----------------------+
//	1 <= C <= MaxChunkWire, 1 <= R <= MaxChunkRaw (128 KiB)
//
// The zstd data of all the chunks of a connection is ONE endless zstd frame:
// the first chunk starts with its header, each chunk holds the whole blocks
// one Flush of the streaming encoder wrote, and no chunk ends the frame. The
// window persists across chunks, so small flushes (a live stream of small
// commands) keep most of the ratio. The header is ours because a zstd
// frame's checksum comes only at the frame's end, which an endless frame
// never reaches: the CRC per chunk lets a Reader verify every chunk before
// it returns (publishes) a byte of it.
//
// # Reading
//
// A Reader validates a header's lengths before it allocates or reads
// anything more, reads the whole body into its own buffer (the network
// read is outside the measured CPU), decodes it from memory with a
// synchronous decoder whose source ends at the chunk (so a chunk must hold
// whole blocks), requires exactly R bytes out and the body consumed whole,
// checks the CRC, and only then serves the bytes. The decoder's window and
// memory are bounded (8 MiB), so hostile input cannot make it hold more.
// It decodes no faster than its consumer reads: the next chunk is read
// from the source and decoded only once every byte of the one before was
// returned, so it holds at most one chunk (MaxChunkRaw) not yet returned,
// however far a few bytes on the wire decompress. What the consumer keeps
// of the bytes is the consumer's to bound (a payload held in memory is
// refused past what memory may hold).
// Any failure is an error wrapping ErrCorrupt (a network error is
// returned as itself), and the Reader is dead: every later Read returns it.
// The link resyncs; nothing of the failed chunk was returned.
//
// # One encoder per link, not a shared compressed stream
//
// A compressed stream is per link: one encoder per downstream-proxy
// connection. The window, and so the ratio, is the link's own history:
// frames started afresh at shared positions would lose most of it on small
// writes. Downstream proxies are few (one per region, a standby), so the
// cost is paid once or twice, not per replica. A Writer holds at most
// WriterMemory (its Memory, until Close), which the proxy counts per link
// and bounds by capping the number of compressed links. Links sit at different
// positions after an outage (one catching up from disk, one live), so a
// shared compressed copy would serve only one of them. And a shared
// encoder would tie one slow WAN link to the others.
//
// # CPU
//
// Stats.CPU is thread CPU time (CLOCK_THREAD_CPUTIME_ID, the goroutine
// locked to its thread for the span) around the encoder's work (Flush, or
// the Write that fills a chunk) and around the decoder's, not wall time.
// A clock reading is a syscall, as costly as a small chunk's decoding, so
// chunks under 16 KiB raw are timed one in 16, the timed one counting for
// the 16 (cputime.go); larger ones are each timed.
//
// # Concurrency
//
// A Writer is owned by the one goroutine that writes the replica's socket;
// a Reader by the link's reading goroutine. Neither has a lock or starts a
// goroutine (both zstd halves run synchronously in the owner's goroutine).
// Stats may be read from any goroutine: its fields are kept in atomics the
// owner adds to. The package is a leaf of the lock order: it takes no lock
// and calls back into nothing.
//
// # Example
//
//	w := linkzstd.NewWriter(conn)
//	w.Write(streamBytes) // buffers, or writes a chunk at MaxChunkRaw pending
//	w.Flush()            // one chunk, one conn.Write
//
//	r := linkzstd.NewReader(io.MultiReader(handshakeBuffered, conn))
//	n, err := r.Read(p) // verified raw bytes; errors.Is(err, linkzstd.ErrCorrupt)
package linkzstd

// Package downstream is a replica of the proxy: a client that sent PSYNC or
// SYNC, which from then on owns its connection. It owns
//
//   - the sync's plan (accept.go: Accept): a partial resync from what the
//     history holds, even with the upstream link down, else a full sync
//     the snapshot work plans (Snapshots, which it declares and
//     snapshots.Keeper satisfies), refused with NOMASTERLINK while the
//     link is down (PrimaryLink); each plan counted (SyncCounters) and
//     logged;
//   - the handshake: what REPLCONF said before PSYNC (Handshake, read by
//     Handshake.Replconf), and the replica's later REPLCONF ACKs, read by
//     the same rules (handshake.go); the cap on compressed links, a slot
//     per connection agreed to link-compression zstd, held from that
//     REPLCONF to the connection's end (linkslots.go: LinkSlots,
//     CompressionPolicy), and each link's encoder memory (LinkMemory);
//   - sync execution (writer.go; the payload in writer_payload.go, the stream
//     in writer_stream.go, compression in writer_compress.go): the sync path
//     its history.Plan asks for (choosePath: partial from memory or from the
//     stream log, full from a snapshot in memory or a file in dir, awaiting
//     the shared fetch, a fetched payload that may go to dir; and for a
//     replica that asked for a filtered RDB, the one the primary makes, got
//     through Snapshots.FetchFiltered by the write loop on a goroutine it waits
//     for), the reply (+CONTINUE, +FULLRESYNC), the payload, then the stream
//     from its cursor with writev; the memory window: a replica further
//     behind than the memory window (Settings) while the stream log runs is sent from
//     the log and moves back to a cursor of the same stream generation; for a
//     downstream proxy whose handshake agreed to link compression
//     (Handshake.Compression), everything after the PSYNC reply line goes
//     through a linkzstd.Writer, one per connection, flushed after every
//     write operation (writer.compress, writer.flush; the stream's chunks
//     go once it has no more, or wait for more as the link's coalescing
//     setting says: writer.flushStream), with neither sendfile nor write
//     slices; caught up, its small chunks go inline (below);
//   - traffic control (ratelimit.go): a downstream proxy's full-sync
//     payloads (a replica that said capa replproxy: Replica.IsProxy) go
//     through a pacer of its own, which its write loop switches on at the
//     "$" header and off after the payload's last byte, to
//     repl-link-sync-rate-limit (Settings) bytes a second, in bytes on the wire (under the
//     encoder of a compressed link); the stream is never paced;
//   - its ACK reader (readLoop) and its state (State), offset and ACK time;
//   - its delay (delay.go): the ages of the oldest stream byte not yet
//     written to it and of the oldest written and not acknowledged
//     (Replica.Delay), from the stream's arrival marks (replbuf), and the
//     server's histogram of the time from a byte's arrival to its write,
//     observed once per stream write by whichever path made it
//     (WriteDelays: the inline sender, the write loop, the stream log);
//   - its limits (limits.go: client-output-buffer-limit replica and
//     repl-timeout, judged on what it owns by OverLimit, which the proxy's
//     monitor calls);
//   - the close reasons (closereason.go), one first cause per connection.
//     The proxy's admin clients use the same reasons, so that INFO names
//     each once.
//
// It sees the server only through Host, which it declares and the proxy
// implements, one per replica (the stream log's state, the client it was),
// the directives in force (LiveSettings, which the server stores after
// every change), the snapshot work (Snapshots: plans, the end of a full
// sync, a filtered RDB) and the history (package history), which plans a
// partial resync and which it asks to complete a fetch's plan, for a
// reader of the stream log, and to forget it as a fetch's waiter. It adds
// to the server's counters handed over at PSYNC (Counters). The proxy
// registers it and reads its figures (State, AckOffset, Cursor, AckedIn)
// for INFO, ROLE, CLIENT LIST, ack-policy and the drain.
//
// # Goroutines
//
// Run is called on the goroutine of the client the replica was, which
// becomes its read loop (readLoop: ACKs, newlines, other commands handed to
// Host.Command); Run starts one more, the write loop (writeLoop; while its
// replica is caught up, the producer's goroutine writes for it: see
// Fan-out), and
// returns once both have ended. Whichever loop ends first records its
// cause, closes the connection and cancels the other's context (exit, as
// yamux's stream), so that the reason reported is the first cause; the
// other, ended by that close, records nothing. Close may be called from any
// goroutine (the monitor, CLIENT KILL, a change of identity) and ends both
// loops the same way. OverLimit is called by the monitor alone, which owns
// the soft-limit clock. Every other field read from outside is an atomic.
//
// # Fan-out
//
// The goroutine that publishes new stream bytes (the upstream link's)
// sends them itself to the replicas that are caught up, instead of waking
// each one's write loop for a few KiB (inline.go): the proxy calls
// Fanout.Flush when the link is told of new bytes (upstream's
// Host.Published: before its read of the primary would wait, or once 256
// KiB are held), which gives every caught-up replica at
// most one batch (MaxBatchBytes, 1024 slices) by one non-blocking writev
// (syscall.RawConn.Write with a callback that always returns true, so that
// a full socket returns EAGAIN instead of parking the producer). A write
// loop joins the Fanout when it starts streaming from memory over a plain
// TCP socket, a compressed link's included: there the producer compresses
// a batch under 16 KiB into one chunk and writes it, and what the socket
// does not take of it the write loop sends first when it has the socket
// back (inlineSender.rest); larger batches, and every batch while the
// link's coalescing setting is on, are the write loop's. A TLS replica
// joins too: the producer writes a batch under 16 KiB to its tls.Conn,
// whose RecordConn below hands each record to one non-blocking write and
// keeps what the socket does not take for the write loop (tls_records.go);
// larger batches are the write loop's to encrypt. Anything that is not a
// socket keeps its write loop for every byte.
//
// One writer per socket: the replica's owner flag (inlineSender.owner) says
// who may write its socket and use its cursor, and only the holder changes
// it away from itself:
//
//	writer  --(caught up: park)-->             idle     the write loop waits for a kick
//	idle    --(Flush's CAS)-->                 inline   the producer writes one batch
//	inline  --(all sent, not behind)-->        idle
//	inline  --(EAGAIN, short write, behind,
//	           an error: handOver + kick)-->   writer   the write loop sends the rest
//	idle    --(park's re-check, or ending)-->  writer
//	inline  --(the write loop ends)-->         reclaim  the producer hands over when its writev returns
//
// The write loop stores idle after its last look at the cursor and then
// looks again (a publish in between found the socket still the loop's and
// sent nothing); the producer publishes and then tries the CAS: both are
// sequentially consistent atomics, so one of them sees the other's step and
// no byte waits for the next publish. The CAS or Store that passes the flag
// on orders everything its holder did to the cursor and the iovecs before
// everything the next holder does, which is what lets the cursor pass
// between goroutines. A parked write loop is woken only by the kick (its
// socket would block, its replica is behind, a write failed), by its
// context (the connection closed: a limit, CLIENT KILL, the read loop's
// end), or by Fanout.Wake, which the proxy calls when the stream changes
// without a publish (a new generation, the stream's end); everything the
// write loop checks (the memory window, repl-timeout slices, limits, close
// reasons, counters) it checks whenever it holds the socket, as a write loop
// that never parks does. A write loop that ends takes the socket back first
// (reclaim), so that its cursor is closed only once no inline write uses
// it. Every stream write, from either side, is bracketed by a count of
// writes in flight that the tests assert never exceeds one.
//
// # Locks
//
// A Replica has no mutex: what more than one goroutine touches is atomic,
// and the first close reason is recorded by a compare-and-swap, so it takes
// no place in the lock order. Its loops call into replbuf (its cursor), the
// stream log (its reader) and the history (which takes History.mu) with
// nothing of theirs held, and hold no lock across network I/O. A
// LogSignal's mu is a leaf, held only to hand out or close one channel; so
// is a Fanout's, held only to replace its list (Flush reads it without a
// lock). The inline sender runs on the producer's goroutine with no lock
// held; its cursor's Advance may take Stream.mu, as the write loop's does.
// Host's methods are called with nothing held; the proxy's take its locks
// each alone (Ended: the registry's; Command: what the command takes).
package downstream

// Package downstream is a replica of the proxy: a client that sent PSYNC or
// SYNC, which from then on owns its connection. It owns
//
//   - the handshake: what REPLCONF said before PSYNC (Handshake, read by
//     Handshake.Replconf), and the replica's later REPLCONF ACKs, read by
//     the same rules (handshake.go);
//   - sync execution (writer.go): the sync path its history.Plan asks for
//     (choosePath: partial from memory or from the stream log, full from a
//     snapshot in memory or a file in dir, awaiting the shared fetch, a
//     fetched payload that may go to dir; and for a replica that asked for
//     a filtered RDB, the one the primary makes, got through
//     Host.FetchFiltered by the write loop on a goroutine it waits for),
//     the reply (+CONTINUE,
//     +FULLRESYNC), the payload, then the stream from its cursor with
//     writev; the memory window: a replica further behind than
//     Host.MemoryWindow while the stream log runs is sent from the log and
//     moves back to a cursor of the same stream generation;
//   - its ACK reader (readLoop) and its state (State), offset and ACK time;
//   - its limits (limits.go: client-output-buffer-limit replica and
//     repl-timeout, judged on what it owns by OverLimit, which the proxy's
//     monitor calls);
//   - the close reasons (closereason.go), one first cause per connection.
//     The proxy's admin clients use the same reasons, so that INFO names
//     each once.
//
// It sees the server only through Host, which it declares and the proxy
// implements, one per replica, and the history (package history), which
// planned its sync and which it asks to complete a fetch's plan, for a
// reader of the stream log, and to forget it as a fetch's waiter. It adds
// to the server's counters handed over at PSYNC (Counters). The proxy
// registers it and reads its figures (State, AckOffset, Cursor, AckedIn)
// for INFO, ROLE, CLIENT LIST, ack-policy and the drain.
//
// # Goroutines
//
// Run is called on the goroutine of the client the replica was, which
// becomes its read loop (readLoop: ACKs, newlines, other commands handed to
// Host.Command); Run starts one more, the write loop (writeLoop), and
// returns once both have ended. Whichever loop ends first records its
// cause, closes the connection and cancels the other's context (exit, as
// yamux's stream), so that the reason reported is the first cause; the
// other, ended by that close, records nothing. Close may be called from any
// goroutine (the monitor, CLIENT KILL, a change of identity) and ends both
// loops the same way. OverLimit is called by the monitor alone, which owns
// the soft-limit clock. Every other field read from outside is an atomic.
//
// # Locks
//
// A Replica has no mutex: what more than one goroutine touches is atomic,
// and the first close reason is recorded by a compare-and-swap, so it takes
// no place in the lock order. Its loops call into replbuf (its cursor), the
// stream log (its reader) and the history (which takes History.mu) with
// nothing of theirs held, and hold no lock across network I/O. A
// LogSignal's mu is a leaf, held only to hand out or close one channel.
// Host's methods are called with nothing held; the proxy's take its locks
// each alone (Ended: the registry's; Command: what the command takes).
package downstream

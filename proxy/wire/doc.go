// Package wire speaks RESP (the Redis serialization protocol) for replproxy: it reads
// commands on the control path, encodes replies in RESP2 or RESP3, and follows the
// replication stream without parsing it.
//
// # Control path: CommandReader
//
// A [CommandReader] reads what clients and replicas send to the proxy, and the replies a
// primary sends during the handshake. It accepts what redis-server's processInlineBuffer
// and processMultibulkBuffer accept:
//
//	multibulk  *<count>\r\n  then <count> times  $<len>\r\n<len bytes>\r\n
//	inline     a line of words separated by blanks, with "double" and 'single' quotes as in
//	           sdssplitargs, ending in \n or \r\n
//
// A line starting with '*' is a multibulk; any other line is inline. An empty inline line
// ("\n" or "\r\n", a loading replica's keepalive) and a multibulk count <= 0 give a
// [Command] with no arguments. Numbers follow Redis's string2ll: no sign '+', no leading
// zero, no blanks.
//
// Every length is checked before anything is allocated from it, against [Limits]:
//
//	line (inline, or a *<count> / $<len> header)  MaxInlineLine  default 64 KiB  (PROTO_INLINE_MAX_SIZE)
//	multibulk count                               MaxArgs        default 1048576 (Redis <= 6.2)
//	bulk length                                   MaxBulk        default 512 MiB (proto-max-bulk-len)
//	one command's arguments                       MaxQuery       default 1 GiB   (client-query-buffer-limit)
//
// With Limits.Unauthenticated, Redis's limits before AUTH come on top: at most 10 arguments
// and bulks of at most 16384 bytes ("unauthenticated multibulk length", "unauthenticated
// bulk length"). [CommandReader.SetLimits] lifts them once the client has authenticated.
// Going over MaxQuery gives [ErrQueryLimit], not a protocol error: Redis closes such a
// client without a reply. [CommandReader.QueryBytes] reports what a reader holds, for
// memory accounting; it is the one method safe to call from another goroutine.
//
// Even within the limits a length is only a claim: buffers grow with the bytes that arrive
// (at most 64 KiB ahead of them), so "*1\r\n$500000000\r\n" followed by nothing costs
// kilobytes, not 500 MB. The reader decodes frames itself rather than through
// github.com/tidwall/resp: that library has no line limit, allocates a bulk's declared
// length at once, and would need each validated frame copied out again; our framing already
// has every byte in hand. The tests use tidwall/resp as a reference decoder.
//
// A [*ProtocolError] carries the text redis-server replies with ("Protocol error: invalid
// bulk length"). After it, or any other error, the reader is broken for good and the
// connection is closed, as Redis closes it.
//
// The Append functions ([AppendSimple], [AppendError], [AppendBulk], [AppendCommand], ...)
// encode replies and commands into a caller's buffer in the shape of strconv.AppendInt.
//
// # RESP2 and RESP3 replies
//
// Commands arrive in the same form whatever the protocol; replies differ only in the types
// RESP3 added. A client's [Proto] ([RESP2] until HELLO 3) appends those, each in the form
// Redis 7.0 writes it for that protocol:
//
//	                   RESP3                  RESP2
//	map of n pairs     %n                     *2n (keys and values alternately)
//	set                ~n                     *n
//	push (Pub/Sub)     >n                     *n
//	null               _                      $-1 (or *-1 where an array was expected)
//	verbatim string    =<len>\r\ntxt:<text>   $<len>\r\n<text>
//	double             ,1.5                   $3\r\n1.5
//	boolean            #t / #f                :1 / :0
//
// Simple strings, errors, integers, bulk strings and arrays are written alike in both, by
// the functions that take no Proto. The replication side never changes protocol: a
// replica's handshake, the +FULLRESYNC / +CONTINUE lines, the RDB and the stream are the
// same bytes for a client that said HELLO 3.
//
// # Replication stream: StreamScanner
//
// After "+FULLRESYNC <replid> <X>" and the RDB, or after "+CONTINUE", a primary sends a
// stream of multibulk commands. Stream byte X+1 is the first after the RDB; every byte
// counts toward the offset. A [StreamScanner] follows it:
//
//	stream   = { command | "\n" | "\r\n" }
//	command  = "*" count CRLF { "$" length CRLF <length bytes> CRLF }
//	count    = 0 | [1-9][0-9]*      at most 2147483647 (INT_MAX); "*0\r\n" is an empty command
//	length   = 0 | [1-9][0-9]*      at most 2^63-1, at most 19 digits; no other limit
//
// A bare "\n" or "\r\n" is an empty inline command that a replica accepts from its primary.
// Anything else where a command starts (a non-empty inline line), a sign or a leading zero
// or a non-digit in a number, a number out of range, a missing '$', or anything but CRLF
// after an argument's bytes is a [*ProtocolError] whose Offset is the offending byte. The
// scanner detects it at that byte, without waiting for the end of the line.
//
// The scanner mirrors a replica's offsets: [StreamScanner.Offset] counts every byte
// (read_reploff); [StreamScanner.Applied] moves to the end of each non-empty command
// processed outside MULTI, and of the EXEC or DISCARD closing one (reploff). Empty
// commands move it only together with the next non-empty command, as in Redis, where
// commandProcessed never runs for them. A REPLCONF GETACK (name and subcommand in any case,
// odd argc) is answered with Applied as it was before the GETACK: the "ACK <offset>" a
// Redis replica sends. Inside MULTI a GETACK is queued and answered by the EXEC. A nested
// MULTI is an error reply in Redis and changes nothing; EXEC or DISCARD outside MULTI are
// error replies and count as processed commands.
//
// # The zero-copy contract
//
// The proxy keeps the stream in shared 16 KiB blocks and hands [StreamScanner.Feed] each
// newly received slice. A command may span any number of feeds, split at any byte; results
// do not depend on the split. Feed never retains p and never copies from it, except the
// first 8 bytes of each command's first two arguments into a fixed array inside the
// scanner (to recognise MULTI, EXEC, DISCARD and REPLCONF GETACK). It does not allocate,
// and its cost is O(len(p)) with a small constant: header bytes are examined one by one,
// argument bytes are skipped by arithmetic, so a 20 MB value costs the same as a short one.
//
// # Concurrency
//
// Neither a CommandReader nor a StreamScanner is safe for concurrent use; each belongs to
// the one goroutine that reads its connection. The exception is
// [CommandReader.QueryBytes], which any goroutine may call. The Append functions and
// Proto's methods are pure.
package wire

package wire

import "math"

// Redis's own limits (server.h, config.c). They are part of the protocol as redis-server
// speaks it; the proxy may choose smaller [Limits] for its own listeners.
const (
	// RedisInlineMax is PROTO_INLINE_MAX_SIZE: the longest inline command line, and the
	// longest a "*<count>" or "$<len>" line may grow before its end is seen.
	RedisInlineMax = 64 << 10
	// RedisMaxArgs is the multibulk count limit of Redis up to 6.2 (1024*1024). Redis 7.0
	// raised it to INT_MAX, allocating argv as arguments arrive; the proxy keeps the old
	// bound because its commands are small.
	RedisMaxArgs = 1024 * 1024
	// RedisMaxBulk is the default proto-max-bulk-len (512 MiB). Redis does not apply it to
	// its master link, so the [StreamScanner] has no bulk limit.
	RedisMaxBulk = 512 << 20
	// RedisMaxQuery is the default client-query-buffer-limit (1 GiB).
	RedisMaxQuery = 1 << 30
	// RedisUnauthArgs and RedisUnauthBulk are what Redis accepts from a client that must
	// still authenticate: at most 10 arguments, bulks of at most 16384 bytes.
	RedisUnauthArgs = 10
	RedisUnauthBulk = 16384
	// maxStreamArgs is the multibulk count limit Redis applies to every client, master
	// included (ll > INT_MAX is "invalid multibulk length").
	maxStreamArgs = math.MaxInt32
)

// ReadBufferSize is the [CommandReader]'s bufio size, Redis's PROTO_IOBUF_LEN:
// what every reader holds however little it is sent.
const ReadBufferSize = 16 << 10

// bulkChunk is how much of a bulk the [CommandReader] allocates ahead of the bytes that
// have actually arrived, so a length header alone never causes a large allocation.
const bulkChunk = 64 << 10

// Limits bounds what a [CommandReader] accepts. Every length read from the wire is checked
// against them before anything is allocated from it. A zero (or negative) field means the
// [DefaultLimits] value.
type Limits struct {
	// MaxInlineLine is the longest line, in bytes without its LF: an inline command, a
	// "*<count>" or "$<len>" header. Longer gives "too big inline request", "too big mbulk
	// count string" or "too big bulk count string". Default RedisInlineMax (64 KiB).
	MaxInlineLine int
	// MaxArgs is the largest multibulk count ("invalid multibulk length" above it).
	// Default RedisMaxArgs (1048576).
	MaxArgs int
	// MaxBulk is the largest bulk length in bytes ("invalid bulk length" above it), Redis's
	// proto-max-bulk-len. Default RedisMaxBulk (512 MiB).
	MaxBulk int64
	// MaxQuery is the most bytes one command may hold, its arguments so far plus the next
	// bulk announced: Redis's client-query-buffer-limit. Over it, ReadCommand returns
	// [ErrQueryLimit] before allocating for that bulk. Default RedisMaxQuery (1 GiB).
	MaxQuery int64
	// Unauthenticated adds Redis's limits for a client that must still AUTH, after the
	// ones above: more than RedisUnauthArgs arguments give "unauthenticated multibulk
	// length", a bulk longer than RedisUnauthBulk "unauthenticated bulk length". So a
	// stranger cannot make the reader hold more than about 160 KiB.
	Unauthenticated bool
}

// DefaultLimits returns redis-server's limits for a normal client: 64 KiB lines, 1024*1024
// arguments, 512 MiB bulks, 1 GiB commands.
func DefaultLimits() Limits {
	return Limits{MaxInlineLine: RedisInlineMax, MaxArgs: RedisMaxArgs, MaxBulk: RedisMaxBulk, MaxQuery: RedisMaxQuery}
}

// withDefaults returns l with each unset field replaced by its default.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxInlineLine <= 0 {
		l.MaxInlineLine = d.MaxInlineLine
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = d.MaxArgs
	}
	if l.MaxBulk <= 0 {
		l.MaxBulk = d.MaxBulk
	}
	if l.MaxQuery <= 0 {
		l.MaxQuery = d.MaxQuery
	}
	return l
}

package rdbcheck

import (
	"errors"
	"fmt"
)

var (
	// ErrChecksum is wrapped by the CorruptError of an RDB whose CRC-64
	// trailer is not zero and does not match its bytes.
	ErrChecksum = errors.New("rdbcheck: RDB CRC error")

	// ErrVersion is wrapped by the CorruptError of an RDB whose version the
	// walker does not know (below 1 or above 12).
	ErrVersion = errors.New("rdbcheck: unknown RDB version")

	// ErrClosed is returned by Write after Close.
	ErrClosed = errors.New("rdbcheck: walker closed")

	// errInternal is wrapped by the CorruptError that stands for a panic of
	// the walk itself (a bug, never a verdict on the payload): the payload
	// is refused, as it must be when it cannot be vouched for.
	errInternal = errors.New("rdbcheck: internal error")

	// errStopped ends a walk that Close (or the garbage collector) stopped
	// before the payload was over.
	errStopped = errors.New("rdbcheck: walk stopped")
)

// CorruptError says where a payload stopped being an RDB that Redis loads,
// and why.
type CorruptError struct {
	// Offset is the byte where it went wrong, counted from the payload's
	// first byte: every byte before it was accepted. For a truncated payload
	// it is the payload's length.
	Offset int64
	// Reason is a short description, in Redis's words where Redis has some
	// ("Unknown RDB encoding type 175").
	Reason string
	// Err classifies the fault when it is one of this package's sentinels,
	// or io.ErrUnexpectedEOF for a truncated payload; nil otherwise.
	Err error

	// rule says which rule refused the payload when it is not one Redis's
	// loader and redis-check-rdb share (the agreement test reads it).
	rule rule
}

// rule names a refusal the walker makes beyond what redis-check-rdb 7.0
// refuses. Each is a payload that a replica would not load, or that the
// walker's contract refuses.
type rule int

const (
	// ruleLoader: Redis's loader refuses it, and redis-check-rdb with it.
	ruleLoader rule = iota
	// ruleDuplicateKey: a key appears twice in one DB. A replica panics
	// ("Duplicated key found in RDB file"); redis-check-rdb keeps no key
	// space and does not look.
	ruleDuplicateKey
	// ruleTrailing: a byte after the checksum. Redis stops reading at the
	// checksum; the walker's contract refuses what follows it.
	ruleTrailing
	// ruleNewer: Redis 7.2 and later (and Valkey 8) refuse it where 7.0
	// still loads it: the old function format of the 7.0 release candidates.
	ruleNewer
	// ruleReplica: a replica refuses it or dies on it where redis-check-rdb,
	// which only reads, does not: an aux field Valkey 8 parses, a SLOT_INFO
	// for a slot that does not exist, a NaN score in a sorted set's
	// listpack that a replica with a smaller zset-max-listpack-entries
	// converts.
	ruleReplica
)

func (e *CorruptError) Error() string {
	return fmt.Sprintf("rdbcheck: corrupt RDB at offset %d: %s", e.Offset, e.Reason)
}

// Unwrap returns Err, so that errors.Is finds ErrChecksum, ErrVersion or
// io.ErrUnexpectedEOF.
func (e *CorruptError) Unwrap() error { return e.Err }

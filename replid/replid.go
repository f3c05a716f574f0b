// Package replid holds the two values that name a point of a replication
// history as they travel between a primary and its replicas: the replication
// ID (40 lowercase hex digits, as Redis makes them) and the replication
// offset. Both the upstream link and the proxy's primary side check every
// replid and offset read from the network with it before using them.
package replid

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// Size is the length of a replication ID: 40 lowercase hex characters
// (Redis's CONFIG_RUN_ID_SIZE).
const Size = 40

// MaxOffset bounds a replication offset read from the network: a primary
// would need 146 years at 1 TB/s to produce 2^62 bytes. Every offset is
// checked against it before any arithmetic, so that offset+1,
// offset+len(stream) and the like cannot wrap.
const MaxOffset = 1 << 62

// None is how Redis shows a cleared replid2: forty zeros.
const None = "0000000000000000000000000000000000000000"

// New returns 40 random lowercase hex digits, as Redis's getRandomHexChars
// makes them. Besides replication IDs it makes the run_id and the EOF mark of
// a diskless payload, which Redis makes the same way.
func New() string {
	var b [Size / 2]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Valid reports whether s is a replication ID as Redis makes them: exactly
// 40 lowercase hex digits. A replid from the network is checked with it
// before it is used at all, since it may name files and is shown in INFO.
func Valid(s string) bool {
	if len(s) != Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ParseOffset parses a replication offset: decimal digits only, at most
// MaxOffset.
func ParseOffset(s string) (int64, bool) { return ParseDecimal(s, MaxOffset) }

// ParseDecimal parses 1 to 19 decimal digits (no sign, no spaces) whose value
// is at most limit: the one parser for the numbers of the replication
// handshake, on either side.
func ParseDecimal(s string, limit int64) (int64, bool) {
	if len(s) == 0 || len(s) > 19 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > limit {
		return 0, false
	}
	return n, true
}

// A NotContinued says why a history cannot continue from a position by
// partial resync: the primary's, as its INFO replication shows, or the
// proxy's own, for a snapshot from its snapshot source. Reason is "replid"
// (the replid is not in the history: another primary's), "behind" (the
// offset is no longer held) or "ahead" (past the history's end under its
// replid: a history it never had); the snapshot work counts a source's
// failures by it.
type NotContinued struct {
	Reason string
	Detail string
	// Forked says that the primary forked for a full sync already, so
	// that its full sync is taken whatever snapshot-from-fallback says.
	Forked bool
}

func (e *NotContinued) Error() string { return e.Detail }

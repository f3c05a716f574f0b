package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// ReplIDSize is the length of a replication ID: 40 lowercase hex characters
// (Redis's CONFIG_RUN_ID_SIZE).
const ReplIDSize = 40

// noReplID is how Redis shows a cleared replid2: forty zeros.
var noReplID = strings.Repeat("0", ReplIDSize)

// newReplID returns 40 random lowercase hex digits, as Redis's getRandomHexChars
// makes them. Besides replication IDs it makes the run_id and the EOF mark of a
// diskless payload, which Redis makes the same way.
func newReplID() string {
	var b [ReplIDSize / 2]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

// validReplID reports whether s is a replication ID as Redis makes them:
// exactly 40 lowercase hex digits. A replid from the network is checked with
// it before it is used at all, since it may name files and is shown in INFO.
func validReplID(s string) bool {
	if len(s) != ReplIDSize {
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

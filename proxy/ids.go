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

// newReplID returns a random replication ID, as Redis's getRandomHexChars makes them.
func newReplID() string {
	var b [ReplIDSize / 2]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

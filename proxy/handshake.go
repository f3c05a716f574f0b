package proxy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Bounds on the numbers a primary or a replica sends during the handshake.
// Every offset and length read from the network is checked against them
// before any arithmetic, so that offset+1, offset+len(stream) and the like
// cannot wrap.
const (
	// maxReplOffset bounds a replication offset: a primary would need
	// 146 years at 1 TB/s to produce 2^62 bytes.
	maxReplOffset = 1 << 62
	// maxPayloadSize bounds the "$<len>" of a sync payload (1 PiB).
	maxPayloadSize = 1 << 50
)

// errBadReply marks a handshake reply from the primary that does not have
// the form Redis gives it: the link fails with it and is retried later.
var errBadReply = errors.New("proxy: malformed reply from primary")

// parseFullResync parses "+FULLRESYNC <replid> <offset>". The replid must be
// 40 lowercase hex digits and the offset in [0, maxReplOffset].
func parseFullResync(line string) (replID string, offset int64, err error) {
	f := strings.Fields(line)
	if len(f) != 3 || !strings.EqualFold(f[0], "+FULLRESYNC") {
		return "", 0, fmt.Errorf("%w: FULLRESYNC %q", errBadReply, clip(line, 120))
	}
	if !validReplID(f[1]) {
		return "", 0, fmt.Errorf("%w: FULLRESYNC replid %q is not 40 lowercase hex digits", errBadReply, clip(f[1], 60))
	}
	offset, ok := parseReplOffset(f[2])
	if !ok {
		return "", 0, fmt.Errorf("%w: FULLRESYNC offset %q is not in [0, %d]", errBadReply, clip(f[2], 40), int64(maxReplOffset))
	}
	return f[1], offset, nil
}

// parseContinue parses "+CONTINUE" or "+CONTINUE <replid>"; replID is ""
// when the primary kept its replid (a reply from before PSYNC2).
func parseContinue(line string) (replID string, err error) {
	f := strings.Fields(line)
	if len(f) == 0 || len(f) > 2 || !strings.EqualFold(f[0], "+CONTINUE") {
		return "", fmt.Errorf("%w: CONTINUE %q", errBadReply, clip(line, 120))
	}
	if len(f) == 1 {
		return "", nil
	}
	if !validReplID(f[1]) {
		return "", fmt.Errorf("%w: CONTINUE replid %q is not 40 lowercase hex digits", errBadReply, clip(f[1], 60))
	}
	return f[1], nil
}

// parsePayloadHeader parses the header of a sync payload: "$<len>" (size,
// nil) or "$EOF:<mark>" (-1, mark), the mark being exactly eofMarkLen bytes.
// The size is in [0, maxPayloadSize].
func parsePayloadHeader(line string) (size int64, eofMark []byte, err error) {
	rest, ok := strings.CutPrefix(line, "$")
	if !ok {
		return 0, nil, fmt.Errorf("%w: payload header %q", errBadReply, clip(line, 80))
	}
	if mark, ok := strings.CutPrefix(rest, "EOF:"); ok {
		if len(mark) != eofMarkLen {
			return 0, nil, fmt.Errorf("%w: payload EOF mark of %d bytes, want %d", errBadReply, len(mark), eofMarkLen)
		}
		return -1, []byte(mark), nil
	}
	size, ok = parseDecimal(rest, maxPayloadSize)
	if !ok {
		return 0, nil, fmt.Errorf("%w: payload length %q is not in [0, %d]", errBadReply, clip(rest, 40), int64(maxPayloadSize))
	}
	return size, nil, nil
}

// parseReplOffset parses a replication offset: decimal digits only, at most
// maxReplOffset.
func parseReplOffset(s string) (int64, bool) { return parseDecimal(s, maxReplOffset) }

// parseDecimal parses 1 to 19 decimal digits (no sign, no spaces) whose value
// is at most limit.
func parseDecimal(s string, limit int64) (int64, bool) {
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

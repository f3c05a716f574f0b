package upstream

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replid"
)

// Replies as a primary sends them (the proxy package's link tests use the same).
const (
	linkReplID    = "3e6f7fa1b2ac2025fc6edcca60effe8ade398925"
	linkReplIDNew = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	linkEOFMark   = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c" // 40 random hex characters
)

// hostileDotsReplID is a replid that would name a file outside dir.
var hostileDotsReplID = strings.Repeat("../", 13) + "x"

// TestParseHandshakeReplies: the parsers accept what Redis sends and refuse,
// with ErrBadReply, anything else: replids that are not 40 lowercase hex
// digits, offsets out of [0, 2^62], payload lengths out of [0, 2^50], EOF
// marks of any length but 40.
func TestParseHandshakeReplies(t *testing.T) {
	t.Run("FULLRESYNC", func(t *testing.T) {
		for _, tc := range []struct {
			line   string
			ok     bool
			offset int64
		}{
			{"+FULLRESYNC " + linkReplID + " 0", true, 0},
			{"+FULLRESYNC " + linkReplID + " 1000", true, 1000},
			{"+FULLRESYNC " + linkReplID + " 4611686018427387904", true, replid.MaxOffset},
			{"+FULLRESYNC " + linkReplID + " 4611686018427387905", false, 0},
			{"+FULLRESYNC " + linkReplID + " 9223372036854775807", false, 0},
			{"+FULLRESYNC " + linkReplID + " 99999999999999999999", false, 0},
			{"+FULLRESYNC " + linkReplID + " -1", false, 0},
			{"+FULLRESYNC " + linkReplID + " +5", false, 0},
			{"+FULLRESYNC " + linkReplID + " 0x10", false, 0},
			{"+FULLRESYNC " + linkReplID + " ", false, 0},
			{"+FULLRESYNC " + linkReplID + " 1 2", false, 0},
			{"+FULLRESYNC " + hostileDotsReplID + " 0", false, 0},
			{"+FULLRESYNC " + strings.ToUpper(linkReplID) + " 0", false, 0},
			{"+FULLRESYNC " + linkReplID[:39] + " 0", false, 0},
			{"+FULLRESYNC " + linkReplID + "0 0", false, 0},
			{"+FULLRESYNC " + linkReplID[:39] + "g 0", false, 0},
			{"+CONTINUE " + linkReplID, false, 0},
			{"", false, 0},
		} {
			id, off, err := parseFullResync(tc.line)
			switch {
			case tc.ok && (err != nil || id != linkReplID || off != tc.offset):
				t.Errorf("parseFullResync(%q) = (%q, %d, %v), want (%q, %d, nil)", tc.line, id, off, err, linkReplID, tc.offset)
			case !tc.ok && !errors.Is(err, ErrBadReply):
				t.Errorf("parseFullResync(%q) = (%q, %d, %v), want ErrBadReply", tc.line, id, off, err)
			}
		}
	})
	t.Run("CONTINUE", func(t *testing.T) {
		for _, tc := range []struct {
			line, id string
			ok       bool
		}{
			{"+CONTINUE", "", true},
			{"+CONTINUE " + linkReplID, linkReplID, true},
			{"+CONTINUE " + hostileDotsReplID, "", false},
			{"+CONTINUE " + strings.ToUpper(linkReplID), "", false},
			{"+CONTINUE " + linkReplID[:39], "", false},
			{"+CONTINUE " + linkReplID + " 5", "", false},
			{"+FULLRESYNC", "", false},
		} {
			id, err := parseContinue(tc.line)
			switch {
			case tc.ok && (err != nil || id != tc.id):
				t.Errorf("parseContinue(%q) = (%q, %v), want (%q, nil)", tc.line, id, err, tc.id)
			case !tc.ok && !errors.Is(err, ErrBadReply):
				t.Errorf("parseContinue(%q) = (%q, %v), want ErrBadReply", tc.line, id, err)
			}
		}
	})
	t.Run("payload header", func(t *testing.T) {
		for _, tc := range []struct {
			line string
			ok   bool
			size int64
		}{
			{"$0", true, 0},
			{"$236", true, 236},
			{"$1125899906842624", true, maxPayloadSize},
			{"$EOF:" + linkEOFMark, true, -1},
			{"$1125899906842625", false, 0},
			{"$9223372036854775807", false, 0},
			{"$-1", false, 0},
			{"$+1", false, 0},
			{"$", false, 0},
			{"$ 1", false, 0},
			{"$EOF:" + linkEOFMark[:39], false, 0},
			{"$EOF:" + linkEOFMark + "x", false, 0},
			{"$EOF:", false, 0},
			{"*1", false, 0},
			{"", false, 0},
		} {
			size, mark, err := ParsePayloadHeader(tc.line)
			switch {
			case tc.ok && (err != nil || size != tc.size || (size < 0) != (string(mark) == linkEOFMark)):
				t.Errorf("ParsePayloadHeader(%q) = (%d, %q, %v), want (%d, ...)", tc.line, size, mark, err, tc.size)
			case !tc.ok && !errors.Is(err, ErrBadReply):
				t.Errorf("ParsePayloadHeader(%q) = (%d, %q, %v), want ErrBadReply", tc.line, size, mark, err)
			}
		}
	})
}

// FuzzHandshakeReplies feeds arbitrary bytes from a primary, cut into reply
// lines as the link reads them, to the parsers of +FULLRESYNC, +CONTINUE and
// payload headers. None may panic, and whatever one accepts must be safe to
// use: a replid of 40 lowercase hex digits, an offset in [0, 2^62], a
// payload length in [0, 2^50] or an EOF mark of exactly 40 bytes. What is
// accepted must also come back the same when written as Redis writes it.
func FuzzHandshakeReplies(f *testing.F) {
	for _, seed := range []string{
		"+FULLRESYNC " + linkReplID + " 1000\r\n$236\r\n",
		"\n\n+FULLRESYNC " + linkReplID + " 0\r\n$EOF:" + linkEOFMark + "\r\n",
		"+CONTINUE\r\n+CONTINUE " + linkReplIDNew + "\r\n",
		"+FULLRESYNC " + hostileDotsReplID + " 9223372036854775807\r\n",
		"+FULLRESYNC " + linkReplID + " 4611686018427387905\r\n$1125899906842625\r\n",
		"+FULLRESYNC " + linkReplID + " +5\r\n$-1\r\n$EOF:short\r\n$\r\n",
		"+CONTINUE 3E6F7FA1B2AC2025FC6EDCCA60EFFE8ADE398925\r\n",
		"-NOMASTERLINK Can't SYNC while not connected with my master\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		rd := wire.NewCommandReader(bytes.NewReader(input), wire.Limits{})
		for {
			b, err := rd.ReadReplyLine(replyLineMax)
			if err != nil {
				return
			}
			line := string(b)
			if id, off, err := parseFullResync(line); err == nil {
				if !replid.Valid(id) || off < 0 || off > replid.MaxOffset {
					t.Fatalf("parseFullResync(%q) accepted (%q, %d)", line, id, off)
				}
				again := "+FULLRESYNC " + id + " " + strconv.FormatInt(off, 10)
				if id2, off2, err := parseFullResync(again); err != nil || id2 != id || off2 != off {
					t.Fatalf("parseFullResync(%q) = (%q, %d, %v), want (%q, %d)", again, id2, off2, err, id, off)
				}
			}
			if id, err := parseContinue(line); err == nil {
				if id != "" && !replid.Valid(id) {
					t.Fatalf("parseContinue(%q) accepted %q", line, id)
				}
				again := "+CONTINUE"
				if id != "" {
					again += " " + id
				}
				if id2, err := parseContinue(again); err != nil || id2 != id {
					t.Fatalf("parseContinue(%q) = (%q, %v), want %q", again, id2, err, id)
				}
			}
			if size, mark, err := ParsePayloadHeader(line); err == nil {
				var again string
				switch {
				case mark == nil && size >= 0 && size <= maxPayloadSize:
					again = "$" + strconv.FormatInt(size, 10)
				case mark != nil && size == -1 && len(mark) == eofMarkLen:
					again = "$EOF:" + string(mark)
				default:
					t.Fatalf("ParsePayloadHeader(%q) accepted (%d, %q)", line, size, mark)
				}
				if size2, mark2, err := ParsePayloadHeader(again); err != nil || size2 != size || !bytes.Equal(mark2, mark) {
					t.Fatalf("ParsePayloadHeader(%q) = (%d, %q, %v), want (%d, %q)", again, size2, mark2, err, size, mark)
				}
			}
		}
	})
}

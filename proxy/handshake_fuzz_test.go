package proxy

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/replproxy/replproxy/proxy/wire"
)

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
				if !validReplID(id) || off < 0 || off > maxReplOffset {
					t.Fatalf("parseFullResync(%q) accepted (%q, %d)", line, id, off)
				}
				again := "+FULLRESYNC " + id + " " + strconv.FormatInt(off, 10)
				if id2, off2, err := parseFullResync(again); err != nil || id2 != id || off2 != off {
					t.Fatalf("parseFullResync(%q) = (%q, %d, %v), want (%q, %d)", again, id2, off2, err, id, off)
				}
			}
			if id, err := parseContinue(line); err == nil {
				if id != "" && !validReplID(id) {
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
			if size, mark, err := parsePayloadHeader(line); err == nil {
				var again string
				switch {
				case mark == nil && size >= 0 && size <= maxPayloadSize:
					again = "$" + strconv.FormatInt(size, 10)
				case mark != nil && size == -1 && len(mark) == eofMarkLen:
					again = "$EOF:" + string(mark)
				default:
					t.Fatalf("parsePayloadHeader(%q) accepted (%d, %q)", line, size, mark)
				}
				if size2, mark2, err := parsePayloadHeader(again); err != nil || size2 != size || !bytes.Equal(mark2, mark) {
					t.Fatalf("parsePayloadHeader(%q) = (%d, %q, %v), want (%d, %q)", again, size2, mark2, err, size, mark)
				}
			}
		}
	})
}

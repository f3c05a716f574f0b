package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The reference parser reads a whole stream at once, by index, with strconv for numbers: a
// second implementation of the grammar in doc.go that shares no state machine with
// StreamScanner, to compare against at every split.

// refCommand is one non-empty command the reference parser completed.
type refCommand struct {
	end     int64 // offset of its last byte
	applied int64 // Applied() after it
	multi   bool  // InMulti() after it
	getAck  bool  // it made the scanner report a GETACK ...
	ackOff  int64 // ... with this offset
}

type refResult struct {
	base     int64
	commands []refCommand
	errOff   int64 // offset of the offending byte, 0 if none
	errMsg   string
}

// refNumber parses the digits at in[j:] up to CRLF as the scanner's grammar says, with
// limit as the largest value. It returns the value and the index after the CRLF, or the
// index of the offending byte (bad >= 0), or incomplete.
func refNumber(in []byte, j int, limit int64) (v int64, next, bad int, incomplete bool) {
	k := j
	for k < len(in) && in[k] >= '0' && in[k] <= '9' {
		k++
	}
	run := in[j:k]
	if len(run) > 1 && run[0] == '0' {
		return 0, 0, j + 1, false
	}
	for m := 1; m <= len(run); m++ {
		x, err := strconv.ParseInt(string(run[:m]), 10, 64)
		if err != nil || x > limit {
			return 0, 0, j + m - 1, false
		}
		v = x
	}
	switch {
	case k == len(in):
		return 0, 0, -1, true
	case len(run) == 0 || in[k] != '\r':
		return 0, 0, k, false
	case k+1 == len(in):
		return 0, 0, -1, true
	case in[k+1] != '\n':
		return 0, 0, k + 1, false
	}
	return v, k + 2, -1, false
}

func refScan(base int64, in []byte) refResult {
	res := refResult{base: base}
	applied, multi, held := base, false, false
	off := func(i int) int64 { return base + int64(i) + 1 } // offset of in[i]
	fail := func(i int, msg string) refResult {
		res.errOff, res.errMsg = off(i), msg
		return res
	}
	i := 0
	for i < len(in) {
		switch in[i] {
		case '\n':
			i++
			continue
		case '\r':
			if i+1 == len(in) {
				return res
			}
			if in[i+1] != '\n' {
				return fail(i+1, msgInlineFromPeer)
			}
			i += 2
			continue
		case '*':
		default:
			return fail(i, msgInlineFromPeer)
		}
		argc, next, bad, inc := refNumber(in, i+1, math.MaxInt32)
		if inc {
			return res
		}
		if bad >= 0 {
			return fail(bad, msgInvalidMultibulkLen)
		}
		i = next
		if argc == 0 {
			continue
		}
		var args [][]byte
		for range argc {
			if i == len(in) {
				return res
			}
			if in[i] != '$' {
				return fail(i, expectedDollar(in[i]))
			}
			n, next, bad, inc := refNumber(in, i+1, math.MaxInt64)
			if inc {
				return res
			}
			if bad >= 0 {
				return fail(bad, msgInvalidBulkLen)
			}
			i = next
			if n > int64(len(in)-i) {
				return res
			}
			args = append(args, in[i:i+int(n)])
			i += int(n)
			for _, want := range []byte("\r\n") {
				if i == len(in) {
					return res
				}
				if in[i] != want {
					return fail(i, msgBadBulkEnding)
				}
				i++
			}
		}
		c := refCommand{end: off(i - 1)}
		name := string(bytes.ToUpper(args[0]))
		getAck := name == "REPLCONF" && len(args) >= 3 && len(args)%2 == 1 && bytes.EqualFold(args[1], []byte("getack"))
		switch {
		case multi && name == "EXEC":
			c.getAck, c.ackOff = held, applied
			multi, held, applied = false, false, c.end
		case multi && name == "DISCARD":
			multi, held, applied = false, false, c.end
		case multi:
			held = held || getAck
		case name == "MULTI":
			multi = true
		default:
			c.getAck, c.ackOff = getAck, applied
			applied = c.end
		}
		c.applied, c.multi = applied, multi
		res.commands = append(res.commands, c)
	}
	return res
}

// checkFeeds feeds the chunks (which together are in) to a new scanner and compares every
// Feed's result with the reference parse of the whole input.
func checkFeeds(t testing.TB, base int64, in []byte, chunks [][]byte) {
	t.Helper()
	ref := refScan(base, in)
	s := NewStreamScanner(base)
	next := 0                     // ref.commands[next] is the first not yet ended
	applied, multi := base, false // the reference state after the commands before next
	start := base                 // offset of the byte before the chunk
	for n, chunk := range chunks {
		end := start + int64(len(chunk))
		ev, err := s.Feed(chunk)
		stop := end // the last offset this feed scanned
		if ref.errOff != 0 && ref.errOff <= end {
			stop = ref.errOff - 1
			pe, ok := err.(*ProtocolError)
			if !ok || pe.Msg != ref.errMsg || pe.Offset != ref.errOff {
				t.Fatalf("feed %d (%d..%d): err = %v, want %q at %d", n, start+1, end, err, ref.errMsg, ref.errOff)
			}
		} else if err != nil {
			t.Fatalf("feed %d (%d..%d): unexpected error %v at %d", n, start+1, end, err, err.(*ProtocolError).Offset)
		}
		var want Event
		for ; next < len(ref.commands) && ref.commands[next].end <= stop; next++ {
			c := ref.commands[next]
			want.Commands++
			if c.getAck {
				want.GetAck, want.GetAckOffset = true, c.ackOff
			}
			applied, multi = c.applied, c.multi
		}
		if ev != want {
			t.Fatalf("feed %d (%d..%d): event %+v, want %+v", n, start+1, end, ev, want)
		}
		if s.Offset() != stop || s.Applied() != applied || s.InMulti() != multi {
			t.Fatalf("feed %d (%d..%d): offset/applied/multi = %d/%d/%v, want %d/%d/%v",
				n, start+1, end, s.Offset(), s.Applied(), s.InMulti(), stop, applied, multi)
		}
		if err != nil {
			if _, err2 := s.Feed([]byte("*1\r\n$4\r\nPING\r\n")); err2 != err || s.Offset() != stop {
				t.Fatalf("error is not sticky: %v then %v", err, err2)
			}
			return
		}
		start = end
	}
}

// splitAt returns in cut at the given increasing positions.
func splitAt(in []byte, cuts ...int) [][]byte {
	var chunks [][]byte
	prev := 0
	for _, c := range cuts {
		chunks = append(chunks, in[prev:c])
		prev = c
	}
	return append(chunks, in[prev:])
}

// randomChunks cuts in into chunks of random sizes up to maxChunk, some of them empty.
func randomChunks(rng *rand.Rand, in []byte, maxChunk int) [][]byte {
	var chunks [][]byte
	for len(in) > 0 {
		n := min(rng.IntN(maxChunk+1), len(in))
		chunks = append(chunks, in[:n])
		in = in[n:]
	}
	return chunks
}

// bytewise cuts in into one-byte chunks.
func bytewise(in []byte) [][]byte {
	chunks := make([][]byte, len(in))
	for i := range in {
		chunks[i] = in[i : i+1]
	}
	return chunks
}

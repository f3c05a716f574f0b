package wire

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// Stream fixtures, as a Redis 7.0 primary writes them (PROTOCOL.md §3.1).
const (
	getAck  = "*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n" // 37 bytes
	ping    = "*1\r\n$4\r\nping\r\n"                                // 14 bytes
	select0 = "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"                   // 23 bytes
	multi   = "*1\r\n$5\r\nMULTI\r\n"                               // 15 bytes
	exec    = "*1\r\n$4\r\nEXEC\r\n"                                // 14 bytes
	setKV   = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"           // 27 bytes
)

// command encodes args as a multibulk command.
func command(args ...string) string { return string(AppendCommand(nil, args...)) }

func TestFixtureSizes(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int
	}{{getAck, 37}, {ping, 14}, {select0, 23}, {multi, 15}, {exec, 14}, {setKV, 27}} {
		if len(tc.s) != tc.want {
			t.Errorf("%q is %d bytes, want %d", tc.s, len(tc.s), tc.want)
		}
	}
}

func TestStreamScanner(t *testing.T) {
	type want struct {
		offset, applied int64
		multi           bool
		commands        int
		getAck          bool
		ackOffset       int64
		errMsg          string
		errOffset       int64
	}
	for _, tc := range []struct {
		name string
		base int64
		in   string
		want want
	}{
		{"empty", 5, "", want{offset: 5, applied: 5}},
		{"getack at 1027 answers 1027", 1027, getAck,
			want{offset: 1064, applied: 1064, commands: 1, getAck: true, ackOffset: 1027}},
		{"ping", 0, ping, want{offset: 14, applied: 14, commands: 1}},
		{"select then set", 100, select0 + setKV, want{offset: 150, applied: 150, commands: 2}},
		{"partial command: 1102 applied, 1109 read", 1102, setKV[:7],
			want{offset: 1109, applied: 1102}},
		{"inside multi: 1129 applied, 1171 read", 1129, multi + setKV,
			want{offset: 1171, applied: 1129, multi: true, commands: 2}},
		{"after exec: 1185", 1129, multi + setKV + exec, want{offset: 1185, applied: 1185, commands: 3}},
		{"discard closes multi", 0, multi + setKV + command("DISCARD"),
			want{offset: 15 + 27 + 17, applied: 59, commands: 3}},
		{"nested multi is ignored", 0, multi + multi + setKV + exec,
			want{offset: 71, applied: 71, commands: 4}},
		{"exec without multi is a command", 0, exec, want{offset: 14, applied: 14, commands: 1}},
		// A bare "\n" counts one byte of offset. Redis moves reploff past it only when it
		// processes the next command, so the GETACK right after it answers 1064 and the
		// next periodic ACK says 1102 (PROTOCOL.md §3.2: 1064 -> 1102 after "\n" + GETACK).
		{"newline then getack", 1064, "\n" + getAck,
			want{offset: 1102, applied: 1102, commands: 1, getAck: true, ackOffset: 1064}},
		{"bare newlines only", 10, "\n\n\r\n", want{offset: 14, applied: 10}},
		{"star zero is empty", 0, "*0\r\n" + ping, want{offset: 18, applied: 18, commands: 1}},
		{"two getacks report the last", 0, getAck + ping + getAck,
			want{offset: 88, applied: 88, commands: 3, getAck: true, ackOffset: 51}},
		{"getack case-insensitive", 0, command("replconf", "getack", "x"),
			want{offset: 37, applied: 37, commands: 1, getAck: true}},
		{"getack with even argc is not", 0, command("REPLCONF", "GETACK"),
			want{offset: 30, applied: 30, commands: 1}},
		{"replconf ack is not getack", 0, command("REPLCONF", "ACK", "5"),
			want{offset: 34, applied: 34, commands: 1}},
		{"getackx is not getack", 0, command("REPLCONF", "GETACKX", "*"),
			want{offset: 38, applied: 38, commands: 1}},
		{"getack inside multi answered by exec", 500, multi + getAck + exec,
			want{offset: 566, applied: 566, commands: 3, getAck: true, ackOffset: 500}},
		{"getack inside discarded multi", 500, multi + getAck + command("DISCARD"),
			want{offset: 569, applied: 569, commands: 3}},
		{"zero-length argument", 0, "*2\r\n$3\r\nDEL\r\n$0\r\n\r\n",
			want{offset: 19, applied: 19, commands: 1}},
		{"huge length header is only skipped", 0, "*1\r\n$9223372036854775807\r\nabc",
			want{offset: 29, applied: 0}},

		{"inline command", 7, "PING\r\n",
			want{offset: 7, applied: 7, errMsg: msgInlineFromPeer, errOffset: 8}},
		{"blank inline", 0, " \n", want{errMsg: msgInlineFromPeer, errOffset: 1}},
		{"cr not lf", 0, "\r\r\n", want{offset: 1, errMsg: msgInlineFromPeer, errOffset: 2}},
		{"negative count", 0, "*-1\r\n", want{offset: 1, errMsg: msgInvalidMultibulkLen, errOffset: 2}},
		{"count leading zero", 0, "*01\r\n", want{offset: 2, errMsg: msgInvalidMultibulkLen, errOffset: 3}},
		{"count too big", 0, "*2147483648\r\n", want{offset: 10, errMsg: msgInvalidMultibulkLen, errOffset: 11}},
		{"count int max", 0, "*2147483647\r\n$1\r\na\r\n", want{offset: 20}},
		{"count without lf", 0, "*1\rx", want{offset: 3, errMsg: msgInvalidMultibulkLen, errOffset: 4}},
		{"count lf only", 0, "*1\n", want{offset: 2, errMsg: msgInvalidMultibulkLen, errOffset: 3}},
		{"expected dollar", 10, "*1\r\n+PING\r\n", want{offset: 14, applied: 10,
			errMsg: "Protocol error: expected '$', got '+'", errOffset: 15}},
		{"negative length", 0, "*1\r\n$-1\r\n", want{offset: 5, errMsg: msgInvalidBulkLen, errOffset: 6}},
		{"length leading zero", 0, "*1\r\n$04\r\nPING\r\n", want{offset: 6, errMsg: msgInvalidBulkLen, errOffset: 7}},
		{"length 20 digits", 0, "*1\r\n$10000000000000000000\r\n",
			want{offset: 24, errMsg: msgInvalidBulkLen, errOffset: 25}},
		{"length overflow", 0, "*1\r\n$9223372036854775808\r\n",
			want{offset: 23, errMsg: msgInvalidBulkLen, errOffset: 24}},
		{"length plus sign", 0, "*1\r\n$+4\r\n", want{offset: 5, errMsg: msgInvalidBulkLen, errOffset: 6}},
		{"length empty", 0, "*1\r\n$\r\n", want{offset: 5, errMsg: msgInvalidBulkLen, errOffset: 6}},
		{"length without lf", 0, "*1\r\n$4\r\r", want{offset: 7, errMsg: msgInvalidBulkLen, errOffset: 8}},
		{"bulk too long", 0, "*1\r\n$3\r\nPING\r\n", want{offset: 11, errMsg: msgBadBulkEnding, errOffset: 12}},
		{"bulk without lf", 0, "*1\r\n$4\r\nPING\r\r", want{offset: 13, errMsg: msgBadBulkEnding, errOffset: 14}},
		{"error after a getack still reports it", 0, getAck + "x",
			want{offset: 37, applied: 37, commands: 1, getAck: true, errMsg: msgInlineFromPeer, errOffset: 38}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamScanner(tc.base)
			ev, err := s.Feed([]byte(tc.in))
			got := want{offset: s.Offset(), applied: s.Applied(), multi: s.InMulti(),
				commands: ev.Commands, getAck: ev.GetAck, ackOffset: ev.GetAckOffset}
			if err != nil {
				pe, ok := err.(*ProtocolError)
				if !ok {
					t.Fatalf("error %T %v, want *ProtocolError", err, err)
				}
				got.errMsg, got.errOffset = pe.Msg, pe.Offset
				if s.Err() != err {
					t.Errorf("Err() = %v, want %v", s.Err(), err)
				}
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			checkSplits(t, tc.base, []byte(tc.in))
		})
	}
}

// checkSplits compares the scanner with the reference for in fed whole, in two pieces at
// every split point, one byte at a time, and in random chunks.
func checkSplits(t *testing.T, base int64, in []byte) {
	t.Helper()
	checkFeeds(t, base, in, [][]byte{in})
	for k := 0; k <= len(in); k++ {
		checkFeeds(t, base, in, splitAt(in, k))
	}
	checkFeeds(t, base, in, bytewise(in))
	rng := rand.New(rand.NewPCG(uint64(len(in)), 1))
	for range 20 {
		checkFeeds(t, base, in, randomChunks(rng, in, 1+rng.IntN(40)))
	}
}

// realisticStream returns a stream as a primary writes it: SELECT, writes, MULTI/EXEC
// blocks, PINGs, GETACKs, expiry DELs, and a few values of the given size.
func realisticStream(rng *rand.Rand, commands, bigValue int) []byte {
	var b []byte
	b = append(b, select0...)
	for i := range commands {
		switch r := rng.IntN(20); {
		case r < 8:
			b = AppendCommand(b, "SET", "key:"+strings.Repeat("x", rng.IntN(20)), strings.Repeat("v", rng.IntN(200)))
		case r < 10:
			b = append(b, multi...)
			for range 1 + rng.IntN(4) {
				b = AppendCommand(b, "INCRBY", "counter", "12")
			}
			b = append(b, exec...)
		case r < 12:
			b = append(b, ping...)
		case r < 14:
			b = append(b, getAck...)
		case r < 15:
			b = AppendCommand(b, "select", "1")
		case r < 16:
			b = AppendCommand(b, "del", "expired")
		case r < 17 && bigValue > 0:
			b = AppendCommand(b, "SET", "big", strings.Repeat("b", bigValue))
		case r < 18:
			b = AppendCommand(b, "HSET", "h", "f1", "v1", "f2", "v2")
		default:
			b = AppendCommand(b, "LPUSH", "l", strings.Repeat("e", i%50))
		}
	}
	return b
}

func TestStreamScannerSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	in := realisticStream(rng, 60, 300)
	t.Logf("stream of %d bytes", len(in))
	checkSplits(t, 1000, in)
	// A corrupted copy: every split must find the same error at the same byte.
	for range 50 {
		bad := bytes.Clone(in)
		bad[rng.IntN(len(bad))] = byte(rng.IntN(256))
		checkFeeds(t, 1000, bad, bytewise(bad))
		checkFeeds(t, 1000, bad, randomChunks(rng, bad, 100))
	}
}

func TestStreamScannerBigValue(t *testing.T) {
	const size = 20 << 20
	value := bytes.Repeat([]byte{'v'}, size)
	var in []byte
	in = append(in, select0...)
	in = append(in, "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$20971520\r\n"...)
	in = append(in, value...)
	in = append(in, "\r\n"...)
	in = append(in, getAck...)
	const base = 14
	cmdEnd := int64(base + len(in) - len(getAck))

	// In 16 KiB blocks, as the proxy receives it.
	s := NewStreamScanner(base)
	var last Event
	for p := in; len(p) > 0; {
		n := min(16<<10, len(p))
		ev, err := s.Feed(p[:n])
		if err != nil {
			t.Fatal(err)
		}
		if ev.Commands > 0 {
			last = ev
		}
		if s.Offset() < cmdEnd && s.Applied() != base+23 {
			t.Fatalf("applied %d inside the big command, want %d", s.Applied(), base+23)
		}
		p = p[n:]
	}
	if want := (Event{Commands: 2, GetAck: true, GetAckOffset: cmdEnd}); last != want {
		t.Errorf("last event %+v, want %+v", last, want)
	}
	if s.Offset() != base+int64(len(in)) || s.Applied() != s.Offset() {
		t.Errorf("offset %d applied %d, want %d", s.Offset(), s.Applied(), base+len(in))
	}
	// And against the reference, split at a few awkward places.
	hdr := 23 + 30 // where the value starts
	for _, cuts := range [][]int{{1}, {hdr - 1}, {hdr}, {hdr + 1, hdr + size - 1}, {hdr + size}, {hdr + size + 1}, {len(in) - 1}} {
		checkFeeds(t, base, in, splitAt(in, cuts...))
	}
	checkFeeds(t, base, in, randomChunks(rand.New(rand.NewPCG(1, 2)), in, 1<<20))
}

func TestStreamScannerReset(t *testing.T) {
	s := NewStreamScanner(0)
	if _, err := s.Feed([]byte("x")); err == nil {
		t.Fatal("want an error")
	}
	s.Reset(41)
	ev, err := s.Feed([]byte(getAck))
	if err != nil || !ev.GetAck || ev.GetAckOffset != 41 || s.Offset() != 78 || s.Err() != nil {
		t.Fatalf("after Reset: %+v %v offset %d", ev, err, s.Offset())
	}
}

func TestStreamScannerAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	in := realisticStream(rng, 2000, 40<<10)
	s := NewStreamScanner(0)
	allocs := testing.AllocsPerRun(20, func() {
		s.Reset(0)
		for p := in; len(p) > 0; {
			n := min(16<<10, len(p))
			if _, err := s.Feed(p[:n]); err != nil {
				t.Fatal(err)
			}
			p = p[n:]
		}
	})
	if allocs != 0 {
		t.Errorf("Feed allocates %v times per stream, want 0", allocs)
	}
}

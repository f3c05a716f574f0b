package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tidwall/resp"
)

// streamSeeds are realistic stream bytes: what a Redis 7.0 primary sends after the RDB.
func streamSeeds() [][]byte {
	rng := rand.New(rand.NewPCG(11, 12))
	seeds := [][]byte{
		[]byte(select0 + setKV + ping + getAck),
		[]byte(multi + setKV + command("INCR", "c") + exec + getAck),
		[]byte(multi + getAck + exec + multi + command("DEL", "x") + command("DISCARD")),
		[]byte("\n\n\r\n" + getAck + "\n" + ping),
		[]byte("*0\r\n" + command("replconf", "getack", "*") + command("REPLCONF", "GETACK")),
		[]byte("*1\r\n$99999999999\r\nabc"),
		[]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9223372036854775807\r\n"),
		[]byte("*2147483647\r\n$0\r\n\r\n"),
		[]byte("*2147483648\r\n"),
		[]byte("*1\r\n$10000000000000000000\r\n"),
		[]byte("PING\r\n"),
		[]byte("*1\r\n$4\r\nPING\r\r"),
		[]byte("*-1\r\n$04\r\n"),
		realisticStream(rng, 20, 100),
	}
	return seeds
}

// FuzzStreamScanner feeds random streams to the scanner, whole, in chunks whose sizes come
// from cuts, and one byte at a time; every result must agree with the reference parser.
func FuzzStreamScanner(f *testing.F) {
	for i, s := range streamSeeds() {
		f.Add(s, []byte{byte(i), 3, 1, 0, 17, 255, 2}, uint32(i*1000))
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte, base uint32) {
		checkFeeds(t, int64(base), data, [][]byte{data})
		var chunks [][]byte
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(int(cuts[i]), n)
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		checkFeeds(t, int64(base), data, chunks)
		if len(data) <= 4096 {
			checkFeeds(t, int64(base), data, bytewise(data))
		}
	})
}

// FuzzCommandReader reads commands from random input with the default limits and checks
// that the reader does not panic, that memory follows the input rather than the lengths it
// announces, that the result does not depend on how reads are split, that each multibulk
// command decodes the same with tidwall/resp, and that each re-encodes to itself.
func FuzzCommandReader(f *testing.F) {
	for _, s := range []string{
		command("PING"),
		command("REPLCONF", "listening-port", "7102") + command("REPLCONF", "capa", "eof", "capa", "psync2"),
		command("PSYNC", "?", "-1") + "\n" + command("REPLCONF", "ACK", "1027"),
		"PING\r\nset \"a b\" 'c\\'d' \"\\x41\"\r\n\n\r\n",
		"*2000000000\r\n",
		"*1\r\n$999999999999\r\n",
		"*1\r\n$536870912\r\nabc",
		"*1048576\r\n$0\r\n\r\n",
		"*0\r\n*-1\r\n*1\r\n$-1\r\n",
		"*1\r\n+PING\r\n",
		"\"unbalanced\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmds []Command
		var err error
		n := allocated(func() { cmds, err = readAll(bytes.NewReader(data), Limits{}) })
		// bufio 16 KiB, a line scratch and a bulk chunk of 64 KiB each, and per argument a
		// slice header, an end index and its bytes, for arguments at least 6 input bytes each.
		if limit := uint64(512<<10 + 64*len(data)); n > limit {
			t.Fatalf("allocated %d bytes for %d input bytes (limit %d)", n, len(data), limit)
		}
		var pe *ProtocolError
		if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &pe) {
			t.Fatalf("unexpected error %v", err)
		}

		// Stricter limits (before AUTH, a small query limit) only cut the same reading short.
		strict, errS := readAll(bytes.NewReader(data), Limits{Unauthenticated: true, MaxQuery: 4096})
		if !strings.HasPrefix(show(cmds), show(strict)) {
			t.Fatalf("strict limits read %q, default limits %q", show(strict), show(cmds))
		}
		if errS != io.EOF && errS != io.ErrUnexpectedEOF && !errors.As(errS, &pe) && !errors.Is(errS, ErrQueryLimit) {
			t.Fatalf("unexpected error under strict limits: %v", errS)
		}
		for _, cmd := range strict {
			total := 0
			for _, a := range cmd.Args {
				total += len(a)
			}
			if !cmd.Inline && (len(cmd.Args) > RedisUnauthArgs || total > 4096) {
				t.Fatalf("strict limits let through %d args, %d bytes", len(cmd.Args), total)
			}
		}

		cmds2, err2 := readAll(iotest.OneByteReader(bytes.NewReader(data)), Limits{})
		if show(cmds) != show(cmds2) || errText(err) != errText(err2) {
			t.Fatalf("split reads differ: %q, %v vs %q, %v", show(cmds), err, show(cmds2), err2)
		}

		// tidwall/resp as a reference for the multibulk commands at the start of the input.
		// It is given only frames our reader accepted, so their lengths are validated.
		ref := resp.NewReader(bytes.NewReader(data))
		for _, cmd := range cmds {
			if cmd.Inline || len(cmd.Args) == 0 {
				break
			}
			v, _, _, err := ref.ReadMultiBulk()
			if err != nil {
				t.Fatalf("tidwall/resp: %v on a command we read as %q", err, cmd.Args)
			}
			arr := v.Array()
			if len(arr) != len(cmd.Args) {
				t.Fatalf("tidwall/resp read %d args, we read %q", len(arr), cmd.Args)
			}
			for i := range arr {
				if !bytes.Equal(arr[i].Bytes(), cmd.Args[i]) {
					t.Fatalf("arg %d: tidwall/resp %q, we %q", i, arr[i].Bytes(), cmd.Args[i])
				}
			}
		}

		for _, cmd := range cmds {
			if len(cmd.Args) == 0 {
				continue
			}
			args := make([]string, len(cmd.Args))
			for i, a := range cmd.Args {
				args[i] = string(a)
			}
			again, err := NewCommandReader(bytes.NewReader(AppendCommand(nil, args...)), Limits{}).ReadCommand()
			if err != nil || show([]Command{again}) != show([]Command{{Args: cmd.Args}}) {
				t.Fatalf("round trip of %q: %q, %v", cmd.Args, again.Args, err)
			}
		}
	})
}

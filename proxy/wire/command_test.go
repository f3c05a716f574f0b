package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readAll reads commands from in until an error and returns them with that error.
func readAll(in io.Reader, lim Limits) ([]Command, error) {
	r := NewCommandReader(in, lim)
	var cmds []Command
	for {
		cmd, err := r.ReadCommand()
		if err != nil {
			return cmds, err
		}
		cmds = append(cmds, cmd)
	}
}

// show renders commands for comparison: args joined by "|", inline ones marked "i:".
func show(cmds []Command) string {
	var b strings.Builder
	for _, c := range cmds {
		if c.Inline {
			b.WriteString("i:")
		}
		b.Write(bytes.Join(c.Args, []byte("|")))
		b.WriteString(";")
	}
	return b.String()
}

func errText(err error) string {
	var pe *ProtocolError
	switch {
	case errors.As(err, &pe):
		return pe.Msg
	case err == nil:
		return "<nil>"
	}
	return err.Error()
}

func TestReadCommand(t *testing.T) {
	long := strings.Repeat("a", RedisInlineMax)
	small := Limits{MaxInlineLine: 10, MaxArgs: 2, MaxBulk: 3}
	for _, tc := range []struct {
		name string
		in   string
		lim  Limits
		want string // show() of the commands read before the error
		err  string
	}{
		{"multibulk", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", Limits{}, "GET|k;", "EOF"},
		{"pipelined handshake", command("PING") + command("REPLCONF", "listening-port", "7102") +
			command("REPLCONF", "capa", "eof", "capa", "psync2") + command("PSYNC", "?", "-1"), Limits{},
			"PING;REPLCONF|listening-port|7102;REPLCONF|capa|eof|capa|psync2;PSYNC|?|-1;", "EOF"},
		{"binary bulk", "*1\r\n$4\r\n\r\n\x00\n\r\n", Limits{}, "\r\n\x00\n;", "EOF"},
		{"empty bulk", "*2\r\n$3\r\nDEL\r\n$0\r\n\r\n", Limits{}, "DEL|;", "EOF"},
		{"inline", "PING\r\nset a b\n", Limits{}, "i:PING;i:set|a|b;", "EOF"},
		{"inline quotes", "set \"a b\" 'c'\r\n", Limits{}, "i:set|a b|c;", "EOF"},
		{"keepalive newlines", "\n\r\n", Limits{}, "i:;i:;", "EOF"},
		{"blank inline", "   \r\n", Limits{}, "i:;", "EOF"},
		{"count zero and negative", "*0\r\n*-1\r\n", Limits{}, ";;", "EOF"},
		{"inline at the limit", long + "\r\n", Limits{MaxInlineLine: RedisInlineMax + 1}, "i:" + long + ";", "EOF"},

		{"nothing", "", Limits{}, "", "EOF"},
		{"cut in a bulk", "*1\r\n$4\r\nPI", Limits{}, "", "unexpected EOF"},
		{"cut in a header", "*1\r\n$4", Limits{}, "", "unexpected EOF"},
		{"cut after the count", "*1\r\n", Limits{}, "", "unexpected EOF"},
		{"cut in an inline line", "PIN", Limits{}, "", "unexpected EOF"},

		{"bad count", "*abc\r\n", Limits{}, "", msgInvalidMultibulkLen},
		{"count plus", "*+1\r\n", Limits{}, "", msgInvalidMultibulkLen},
		{"count leading zero", "*01\r\n", Limits{}, "", msgInvalidMultibulkLen},
		{"count without cr", "*1\n$1\r\na\r\n", Limits{}, "", msgInvalidMultibulkLen},
		{"huge count", "*2000000000\r\n", Limits{}, "", msgInvalidMultibulkLen},
		{"count over limit", "*3\r\n", small, "", msgInvalidMultibulkLen},
		{"huge bulk", "*1\r\n$999999999999\r\n", Limits{}, "", msgInvalidBulkLen},
		{"bulk over 512 MiB", "*1\r\n$536870913\r\n", Limits{}, "", msgInvalidBulkLen},
		{"bulk over limit", "*1\r\n$4\r\nPING\r\n", small, "", msgInvalidBulkLen},
		{"negative bulk", "*1\r\n$-1\r\n", Limits{}, "", msgInvalidBulkLen},
		{"bulk overflow", "*1\r\n$99999999999999999999\r\n", Limits{}, "", msgInvalidBulkLen},
		{"expected dollar", "*1\r\n+PING\r\n", Limits{}, "", "Protocol error: expected '$', got '+'"},
		{"bad bulk ending", "*1\r\n$1\r\nab\r\n", Limits{}, "", msgBadBulkEnding},
		{"unbalanced quotes", "PING\r\nset \"a\r\n", Limits{}, "i:PING;", msgUnbalancedQuotes},
		{"too big inline", long + "a\r\n", Limits{}, "", msgTooBigInline},
		{"too big inline, small limit", "0123456789A\r\n", small, "", msgTooBigInline},
		{"inline within small limit", "012345678\r\n", small, "i:012345678;", "EOF"},
		{"too big count line", "*" + long + "\r\n", Limits{}, "", msgTooBigMultibulk},
		{"too big bulk line", "*1\r\n$" + long + "\r\n", Limits{}, "", msgTooBigBulk},
		{"error after good commands", command("PING") + "*x\r\n", Limits{}, "PING;", msgInvalidMultibulkLen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same results whole, one byte per Read, and with data arriving with EOF.
			for _, r := range []struct {
				name string
				r    io.Reader
			}{
				{"whole", strings.NewReader(tc.in)},
				{"one byte", iotest.OneByteReader(strings.NewReader(tc.in))},
				{"data with EOF", iotest.DataErrReader(strings.NewReader(tc.in))},
			} {
				cmds, err := readAll(r.r, tc.lim)
				if got := show(cmds); got != tc.want || errText(err) != tc.err {
					t.Errorf("%s: got %q, %v; want %q, %s", r.name, got, errText(err), tc.want, tc.err)
				}
			}
		})
	}
}

func TestReadCommandStickyError(t *testing.T) {
	r := NewCommandReader(strings.NewReader("*x\r\n"+command("PING")), Limits{})
	_, err := r.ReadCommand()
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Offset != -1 {
		t.Fatalf("got %v, want a *ProtocolError with offset -1", err)
	}
	if _, err2 := r.ReadCommand(); err2 != err {
		t.Fatalf("second read: %v, want the same error", err2)
	}
	if _, err2 := r.ReadReplyLine(100); err2 != err {
		t.Fatalf("ReadReplyLine after the error: %v", err2)
	}
}

func TestReadCommandArgsAreOwned(t *testing.T) {
	r := NewCommandReader(strings.NewReader(command("SET", "k", "v")+command("GET", "k")), Limits{})
	first, _ := r.ReadCommand()
	first.Args[0] = append(first.Args[0], "XX"...) // must not spill into Args[1]
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if string(first.Args[1]) != "k" || string(first.Args[2]) != "v" {
		t.Errorf("args changed: %q", first.Args)
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A length header alone, within the limits, must not allocate what it announces.
func TestReadCommandMemoryFollowsData(t *testing.T) {
	for _, in := range []string{
		"*1\r\n$536870912\r\n" + strings.Repeat("x", 1000), // a 512 MiB bulk, then EOF
		"*1048576\r\n", // the most arguments, then EOF
		"*1048576\r\n" + strings.Repeat("$0\r\n\r\n", 1000),
		"*2000000000\r\n",
		"*1\r\n$999999999999\r\n",
	} {
		var err error
		n := allocated(func() { _, err = readAll(strings.NewReader(in), Limits{}) })
		if err == nil || err == io.EOF {
			t.Errorf("%.30q: err %v, want an error", in, err)
		}
		if n > 256<<10 {
			t.Errorf("%.30q: allocated %d bytes", in, n)
		}
	}
}

func TestReadReplyLine(t *testing.T) {
	in := "\n+FULLRESYNC 0123456789012345678901234567890123456789 14\r\n$5\r\nREDISrest of the stream"
	r := NewCommandReader(strings.NewReader(in), Limits{})
	for _, want := range []string{"", "+FULLRESYNC 0123456789012345678901234567890123456789 14", "$5"} {
		line, err := r.ReadReplyLine(255)
		if err != nil || string(line) != want {
			t.Fatalf("got %q, %v; want %q", line, err, want)
		}
	}
	if r.Buffered() != len("REDISrest of the stream") {
		t.Errorf("Buffered() = %d", r.Buffered())
	}
	rdb := make([]byte, 5)
	if _, err := io.ReadFull(r.Reader(), rdb); err != nil || string(rdb) != "REDIS" {
		t.Fatalf("payload %q, %v", rdb, err)
	}
	rest, _ := io.ReadAll(r.Reader())
	if string(rest) != "rest of the stream" {
		t.Errorf("stream %q", rest)
	}

	for _, tc := range []struct {
		in    string
		limit int
		want  string
		err   error
	}{
		{"+PONG\r\n", 5, "+PONG", nil},
		{"+PONG\n", 5, "+PONG", nil},
		{"+PONG!\r\n", 5, "", ErrLineTooLong},
		{strings.Repeat("x", 40000) + "\n", 30000, "", ErrLineTooLong},
		{strings.Repeat("x", 40000) + "\n", 40000, strings.Repeat("x", 40000), nil},
		{"+PO", 5, "", io.ErrUnexpectedEOF},
		{"", 5, "", io.EOF},
	} {
		r := NewCommandReader(iotest.HalfReader(strings.NewReader(tc.in)), Limits{})
		line, err := r.ReadReplyLine(tc.limit)
		if string(line) != tc.want || err != tc.err {
			t.Errorf("%.20q limit %d: got %.20q, %v; want %.20q, %v", tc.in, tc.limit, line, err, tc.want, tc.err)
		}
	}
}

// NewCommandReader must not wrap a bufio.Reader it cannot see through, so that bytes
// buffered before (say, by a handshake) are not lost.
func TestCommandReaderReusesBufio(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader(command("PING")), ReadBufferSize)
	if r := NewCommandReader(br, Limits{}); r.Reader() != io.Reader(br) {
		t.Error("a bufio.Reader of the same size was wrapped again")
	}
}

// TestCommandReaderSetLimits: Redis's limits before AUTH, checked after the absolute ones,
// then lifted by SetLimits between two commands of one pipeline.
func TestCommandReaderSetLimits(t *testing.T) {
	unauth := Limits{Unauthenticated: true}
	big := strings.Repeat("x", RedisUnauthBulk+1)
	for _, tc := range []struct {
		name, in string
		lim      Limits
		want     string // the error after the commands
	}{
		{"ten args", command("A", "1", "2", "3", "4", "5", "6", "7", "8", "9"), unauth, "EOF"},
		{"eleven args", "*11\r\n", unauth, msgUnauthMultibulkLen},
		{"too many for anyone", "*2000000\r\n", unauth, msgInvalidMultibulkLen},
		{"bulk at the limit", command("AUTH", strings.Repeat("x", RedisUnauthBulk)), unauth, "EOF"},
		{"bulk over the limit", "*1\r\n$16385\r\n", unauth, msgUnauthBulkLen},
		{"bulk over proto-max-bulk-len", "*1\r\n$600000000\r\n", unauth, msgInvalidBulkLen},
		{"authenticated", command("SET", "k", big), Limits{}, "EOF"},
		{"proto-max-bulk-len", "*1\r\n$1048577\r\n", Limits{MaxBulk: 1 << 20}, msgInvalidBulkLen},
		{"query limit", "*3\r\n$600\r\n" + strings.Repeat("x", 600) + "\r\n$500\r\n", Limits{MaxQuery: 1000}, ErrQueryLimit.Error()},
		{"query limit exact", command("A", strings.Repeat("x", 999)), Limits{MaxQuery: 1000}, "EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readAll(strings.NewReader(tc.in), tc.lim)
			if got := errText(err); got != tc.want {
				t.Fatalf("error %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("lifted after auth", func(t *testing.T) {
		in := command("AUTH", "pw") + command("SET", "k", big)
		r := NewCommandReader(strings.NewReader(in), unauth)
		if cmd, err := r.ReadCommand(); err != nil || string(cmd.Args[0]) != "AUTH" {
			t.Fatalf("AUTH: %v %v", cmd.Args, err)
		}
		r.SetLimits(Limits{})
		if r.Limits().Unauthenticated || r.Limits().MaxBulk != RedisMaxBulk {
			t.Fatalf("limits after SetLimits: %+v", r.Limits())
		}
		if cmd, err := r.ReadCommand(); err != nil || len(cmd.Args[2]) != len(big) {
			t.Fatalf("SET after SetLimits: %d args, %v", len(cmd.Args), err)
		}
	})
	t.Run("errors are sentinels", func(t *testing.T) {
		_, err := readAll(strings.NewReader("*1\r\n$2000\r\n"), Limits{MaxQuery: 1000})
		var pe *ProtocolError
		if !errors.Is(err, ErrQueryLimit) || errors.As(err, &pe) {
			t.Fatalf("query limit error %v: want ErrQueryLimit, not a protocol error", err)
		}
	})
}

// TestCommandReaderQueryBytes: QueryBytes follows the command being read and drops once the
// command is handed over.
func TestCommandReaderQueryBytes(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewCommandReader(pr, Limits{})
	if n := r.QueryBytes(); n != 0 {
		t.Fatalf("QueryBytes of a new reader: %d", n)
	}
	const size = 1 << 20
	done := make(chan error, 1)
	go func() {
		_, err := r.ReadCommand()
		done <- err
	}()
	// Half the bulk, then wait: the reader holds at least that much.
	pw.Write([]byte("*2\r\n$3\r\nSET\r\n$" + itoa(size) + "\r\n"))
	pw.Write(bytes.Repeat([]byte{'x'}, size/2))
	deadline := time.Now().Add(5 * time.Second)
	for r.QueryBytes() < size/2-ReadBufferSize {
		if time.Now().After(deadline) {
			t.Fatalf("QueryBytes %d after %d bytes of a bulk", r.QueryBytes(), size/2)
		}
		time.Sleep(time.Millisecond)
	}
	if n := r.QueryBytes(); n > 2*size {
		t.Fatalf("QueryBytes %d for half of a %d-byte bulk", n, size)
	}
	pw.Write(append(bytes.Repeat([]byte{'x'}, size/2), "\r\n"...))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := r.QueryBytes(); n != 0 {
		t.Fatalf("QueryBytes after the command was returned: %d", n)
	}
	pw.Close()
}

func itoa(n int) string { return strconv.Itoa(n) }

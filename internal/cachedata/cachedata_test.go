package cachedata

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// readCommand reads one RESP array of bulk strings from r.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("array header %q", line)
	}
	n, err := strconv.Atoi(line[1 : len(line)-2])
	if err != nil {
		return nil, err
	}
	argv := make([]string, n)
	for i := range argv {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
		if err != nil || line[0] != '$' {
			return nil, fmt.Errorf("bulk header %q", line)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		if string(b[l:]) != "\r\n" {
			return nil, fmt.Errorf("bulk %q not ended by CRLF", b)
		}
		argv[i] = string(b[:l])
	}
	return argv, nil
}

func TestDeterministic(t *testing.T) {
	a, b, c := New(7).FillRESP(1<<20), New(7).FillRESP(1<<20), New(8).FillRESP(1<<20)
	if !bytes.Equal(a, b) {
		t.Fatal("two generators with one seed differ")
	}
	if bytes.Equal(a[:4096], c[:4096]) {
		t.Fatal("two seeds yield the same data")
	}
	if len(a) < 1<<20 || len(a) > 1<<20+64<<10 {
		t.Fatalf("FillRESP(1 MiB) returned %d bytes", len(a))
	}
}

// TestShape checks the shares and sizes the package doc states.
func TestShape(t *testing.T) {
	const total = 20000
	r := bufio.NewReader(bytes.NewReader(func() []byte {
		g, out := New(1), []byte(nil)
		for range total {
			out = g.Next(out)
		}
		return out
	}()))
	kinds := map[string]int{}
	for range total {
		argv, err := readCommand(r)
		if err != nil {
			t.Fatal(err)
		}
		key := argv[1]
		switch {
		case argv[0] == "SET" && (strings.HasPrefix(key, "user:") || strings.HasPrefix(key, "product:")):
			kinds["json"]++
			var v map[string]any
			if err := json.Unmarshal([]byte(argv[2]), &v); err != nil {
				t.Fatalf("%s: %v: %s", key, err, argv[2])
			}
			if n := len(argv[2]); n < 250 || n > 3<<10 {
				t.Errorf("%s: a document of %d bytes", key, n)
			}
		case argv[0] == "HSET":
			kinds["session"]++
			if f := (len(argv) - 2) / 2; f < 6 || f > 12 || len(argv)%2 != 0 {
				t.Errorf("HSET with %d arguments", len(argv))
			}
		case argv[0] == "SET":
			kinds["short"]++
		case argv[0] == "INCRBY" || argv[0] == "EXPIRE":
			kinds["counter"]++
		default:
			t.Fatalf("unexpected command %q", argv)
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("bytes past the last command: %v", err)
	}
	for kind, want := range map[string]float64{"json": 0.40, "session": 0.25, "short": 0.25, "counter": 0.10} {
		// Each EXPIRE is a command of its own, so the shares drift by a
		// few points from the draw's; 5 points is the doc's "~".
		if got := float64(kinds[kind]) / total; got < want-0.05 || got > want+0.05 {
			t.Errorf("%s: %.3f of the commands, want ~%.2f", kind, got, want)
		}
	}
}

func TestCommandsMatchNext(t *testing.T) {
	var resp []byte
	g := New(3)
	for range 100 {
		resp = g.Next(resp)
	}
	r := bufio.NewReader(bytes.NewReader(resp))
	for i, argv := range New(3).Commands(100) {
		want, err := readCommand(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(argv...); fmt.Sprint(argv) != fmt.Sprint(toAny(want)) {
			t.Fatalf("command %d: %s, Next wrote %q", i, got, want)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

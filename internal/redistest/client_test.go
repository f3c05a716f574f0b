package redistest

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAppendCommand(t *testing.T) {
	tests := []struct {
		name string
		args []any
		want string
	}{
		{"string", []any{"PING"}, "*1\r\n$4\r\nPING\r\n"},
		{"empty arg", []any{"SET", "k", ""}, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"},
		{"bytes with CRLF", []any{"SET", []byte("a\r\nb")}, "*2\r\n$3\r\nSET\r\n$4\r\na\r\nb\r\n"},
		{"ints", []any{"REPLICAOF", "127.0.0.1", 6379, int64(-1), uint64(7)}, "*5\r\n$9\r\nREPLICAOF\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n$2\r\n-1\r\n$1\r\n7\r\n"},
		{"float and bool", []any{1.5, true}, "*2\r\n$3\r\n1.5\r\n$4\r\ntrue\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := appendCommand(nil, tt.args)
			if err != nil || string(got) != tt.want {
				t.Errorf("appendCommand(%v) = %q, %v; want %q", tt.args, got, err, tt.want)
			}
		})
	}
	if _, err := appendCommand(nil, []any{"GET", nil}); err == nil {
		t.Errorf("appendCommand with a nil argument: no error")
	}
}

// fakeServer is a fake primary that answers the first command it is sent
// with reply (nothing if reply is "") and every later one with +OK.
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	var answered atomic.Bool
	p := StartFakePrimary(t, FakeOptions{Reply: func(string) (string, bool) {
		if answered.Swap(true) {
			return "", false
		}
		return reply, true
	}})
	return p.Addr()
}

func TestClientErrors(t *testing.T) {
	tests := []struct {
		name    string
		reply   string // "" means the server never answers
		wantErr string
	}{
		{"timeout", "", "i/o timeout"},
		{"unknown type byte", "hello\r\n", "unexpected reply type byte 'h'"},
		{"truncated bulk", "$10\r\nabc", "i/o timeout"},
		{"bad bulk length", "$x\r\n", "invalid syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DialOpts(t, fakeServer(t, tt.reply), DialOptions{Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Do("PING")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Do: err = %v, want one containing %q", err, tt.wantErr)
			}
			var re *ReplyError
			if errors.As(err, &re) {
				t.Errorf("Do: %v is a *ReplyError; want a connection error", err)
			}
			if _, again := c.Do("PING"); again != err {
				t.Errorf("second Do: err = %v, want the sticky %v", again, err)
			}
		})
	}
}

func TestReplyError(t *testing.T) {
	c, err := DialOpts(t, fakeServer(t, "-WRONGTYPE Operation against a key\r\n"), DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Do("GET", "k")
	var re *ReplyError
	if !errors.As(err, &re) || re.Prefix() != "WRONGTYPE" || v.String() != "WRONGTYPE Operation against a key" {
		t.Fatalf("Do = %q, %v; want a WRONGTYPE *ReplyError", v.String(), err)
	}
}

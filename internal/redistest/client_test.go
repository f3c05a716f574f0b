package redistest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
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

// fakeServer accepts one connection on 127.0.0.1, reads one command line, and answers
// with reply (nothing if reply is ""). It stops when the test ends.
func fakeServer(t *testing.T, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serveOne(l, reply) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("fake server: %v", err)
		}
	})
	return l.Addr().String()
}

// serveOne is the fake server's loop: one connection, one reply, then it waits for the
// client to hang up.
func serveOne(l net.Listener, reply string) error {
	conn, err := l.Accept()
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	if _, err := br.ReadString('\n'); err != nil {
		return err
	}
	if reply != "" {
		if _, err := conn.Write([]byte(reply)); err != nil {
			return err
		}
	}
	_, _ = io.Copy(io.Discard, br) // until the client closes (or the deadline)
	return nil
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
			c.Close() // so that the fake server sees EOF before its cleanup waits for it
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

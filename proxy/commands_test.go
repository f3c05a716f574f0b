package proxy

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
)

// adminConn is a raw RESP connection to a proxy, for admin-command tests that
// need no Redis.
type adminConn struct {
	t    testing.TB
	conn net.Conn
	rd   *bufio.Reader
}

func adminDial(t testing.TB, p *testProxy) *adminConn {
	t.Helper()
	conn := p.dial(t)
	return &adminConn{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

// do sends a command and returns the reply's raw RESP text.
func (a *adminConn) do(args ...string) string {
	a.t.Helper()
	a.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := a.conn.Write(wire.AppendCommand(nil, args...)); err != nil {
		a.t.Fatal(err)
	}
	return a.reply()
}

// reply reads one whole RESP2 or RESP3 reply, as raw text.
func (a *adminConn) reply() string {
	a.t.Helper()
	line, err := a.rd.ReadString('\n')
	if err != nil {
		a.t.Fatalf("reading a reply: %v", err)
	}
	switch line[0] {
	case '$', '=', '!': // bulk, verbatim, blob error: a length, then the bytes
		n := atoiT(a.t, strings.TrimSpace(line[1:]))
		if n < 0 {
			return line
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(a.rd, buf); err != nil {
			a.t.Fatal(err)
		}
		return line + string(buf)
	case '*', '%', '~', '>': // array, map (n pairs), set, push
		n := atoiT(a.t, strings.TrimSpace(line[1:]))
		if line[0] == '%' {
			n *= 2
		}
		out := line
		for range max(n, 0) {
			out += a.reply()
		}
		return out
	}
	return line
}

func TestAdminCommands(t *testing.T) {
	p := startProxy(t, "--repl-backlog-size", "1mb")
	a := adminDial(t, p)
	cases := []struct {
		args []string
		want string // prefix of the raw reply
	}{
		{[]string{"PING"}, "+PONG\r\n"},
		{[]string{"PING", "hello"}, "$5\r\nhello\r\n"},
		{[]string{"ECHO", "x"}, "$1\r\nx\r\n"},
		{[]string{"GET", "k"}, "-ERR replproxy relays replication only; 'get'"},
		{[]string{"SET", "k", "v"}, "-ERR replproxy relays replication only; 'set'"},
		{[]string{"PING", "a", "b"}, "-ERR wrong number of arguments for 'ping' command"},
		{[]string{"CONFIG", "GET", "repl-backlog-size"}, "*2\r\n$17\r\nrepl-backlog-size\r\n$7\r\n1048576\r\n"},
		{[]string{"CONFIG", "SET", "repl-backlog-size", "2mb"}, "+OK"},
		{[]string{"CONFIG", "GET", "repl-backlog-size"}, "*2\r\n$17\r\nrepl-backlog-size\r\n$7\r\n2097152\r\n"},
		{[]string{"CONFIG", "SET", "logfile", "x"}, "-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"},
		{[]string{"CONFIG", "SET", "nope", "1"}, "-ERR Unknown option or number of arguments for CONFIG SET - 'nope'"},
		{[]string{"CONFIG", "SET", "maxmemory", "lots"}, "-ERR CONFIG SET failed (possibly related to argument 'maxmemory')"},
		{[]string{"CONFIG", "SET", "maxmemory-policy", "evict-snapshots"}, "+OK"},
		{[]string{"CONFIG", "RESETSTAT"}, "+OK"},
		{[]string{"CLIENT", "SETNAME", "admin"}, "+OK"},
		{[]string{"CLIENT", "GETNAME"}, "$5\r\nadmin\r\n"},
		{[]string{"CLIENT", "KILL", "TYPE", "replica"}, ":0\r\n"},
		{[]string{"REPLCONF", "listening-port", "x"}, "-ERR value is not an integer or out of range"},
		{[]string{"REPLCONF", "bogus", "1"}, "-ERR Unrecognized REPLCONF option: bogus"},
		{[]string{"REPLCONF", "capa", "eof", "capa", "psync2"}, "+OK"},
		{[]string{"ROLE"}, "*3\r\n$6\r\nmaster\r\n"},
		{[]string{"COMMAND", "COUNT"}, ":"},
		{[]string{"SELECT", "3"}, "+OK"},
	}
	for _, tc := range cases {
		if got := a.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v answered %q, want %q...", tc.args, got, tc.want)
		}
	}
	if got := p.hist.Stream().BacklogSize(); got != 2<<20 {
		t.Errorf("CONFIG SET repl-backlog-size did not reach the stream: %d", got)
	}
	// PSYNC without an upstream link: refused as Redis refuses it.
	if got := a.do("PSYNC", "?", "-1"); !strings.HasPrefix(got, "-NOMASTERLINK") {
		t.Errorf("PSYNC without a primary answered %q", got)
	}
	// Pipelined commands are answered in order.
	a.conn.Write([]byte("PING\r\nECHO a\r\nPING\r\n"))
	for _, want := range []string{"+PONG\r\n", "$1\r\na\r\n", "+PONG\r\n"} {
		if got := a.reply(); got != want {
			t.Errorf("pipelined reply %q, want %q", got, want)
		}
	}
	// A protocol error closes that connection only.
	a.conn.Write([]byte("*2\r\n$-7\r\n"))
	if got := a.reply(); !strings.HasPrefix(got, "-ERR Protocol error") {
		t.Errorf("bad bulk length answered %q", got)
	}
	if _, err := a.rd.ReadString('\n'); err == nil {
		t.Error("connection still open after a protocol error")
	}
	if got := adminDial(t, p).do("PING"); got != "+PONG\r\n" {
		t.Errorf("a new client after another's protocol error: %q", got)
	}
}

func TestAdminAuthAndMaxClients(t *testing.T) {
	p := startProxy(t, "--requirepass", "s3cret", "--maxclients", "2")
	a := adminDial(t, p)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "-NOAUTH Authentication required."},
		{[]string{"INFO"}, "-NOAUTH"},
		{[]string{"AUTH", "wrong"}, "-WRONGPASS"},
		{[]string{"AUTH", "someone", "s3cret"}, "-WRONGPASS"},
		{[]string{"AUTH", "s3cret"}, "+OK"},
		{[]string{"PING"}, "+PONG"},
		{[]string{"AUTH", "default", "s3cret"}, "+OK"},
	} {
		if got := a.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v answered %q, want %q...", tc.args, got, tc.want)
		}
	}
	adminDial(t, p).do("AUTH", "s3cret") // the second client
	third := adminDial(t, p)
	third.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if line, _ := third.rd.ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client got %q", line)
	}
	if got := p.Info("stats"); !strings.Contains(got, "rejected_connections:1\r\n") {
		t.Errorf("INFO stats does not count the rejection:\n%s", got)
	}
}

func TestAdminReplicaOfNoOne(t *testing.T) {
	p := startProxy(t, "--replicaof", "127.0.0.1", "1") // nothing listens on port 1
	a := adminDial(t, p)
	if got := a.do("ROLE"); !strings.HasPrefix(got, "*6\r\n$5\r\nslave\r\n") {
		t.Fatalf("ROLE with a replicaof: %q", got)
	}
	if got := a.do("REPLICAOF", "NO", "ONE"); got != "+OK\r\n" {
		t.Fatalf("REPLICAOF NO ONE: %q", got)
	}
	if got := a.do("ROLE"); !strings.HasPrefix(got, "*3\r\n$6\r\nmaster\r\n") {
		t.Fatalf("ROLE after REPLICAOF NO ONE: %q", got)
	}
	if got := a.do("CONFIG", "GET", "replicaof"); !strings.HasPrefix(got, "*2\r\n$9\r\nreplicaof\r\n$0\r\n") {
		t.Fatalf("CONFIG GET replicaof after NO ONE: %q", got)
	}
}

func atoiT(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

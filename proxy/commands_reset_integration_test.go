package proxy

import (
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// closedNow is a sideStep's comparison that reads no reply: the
// connection was closed after the previous one.
const closedNow = sameFields + 1

// A sideStep is one command sent the same way to the proxy and to a
// redis-server 7.0.
type sideStep struct {
	conn   int // which of the side's two clients sends it: 0 or 1
	args   []string
	cmp    int      // repliesAgree's how, or closedNow
	fields []string // for sameFields
}

// runBeside runs steps on the proxy and on redis-server, each with two
// clients of its own (redialled once closed), and compares each step's
// replies.
func runBeside(t *testing.T, what string, p *testProxy, r *redistest.Server, steps []sideStep) {
	t.Helper()
	// A connection is a client of the server once a reply came back on it:
	// before, a step on the other connection may not see it yet.
	ready := func(c *adminConn) *adminConn {
		c.do("PING") // +PONG, or NOAUTH under requirepass
		return c
	}
	x := [2]*adminConn{ready(adminDial(t, p)), ready(adminDial(t, p))}
	y := [2]*adminConn{ready(dialAddr(t, r.Addr())), ready(dialAddr(t, r.Addr()))}
	for i, st := range steps {
		name := what + ": step " + itoa(int64(i+1)) + " " + strings.Join(st.args, " ")
		if st.cmp == closedNow {
			for side, c := range map[string]*adminConn{"the proxy": x[st.conn], "redis-server": y[st.conn]} {
				if err := readEOF(c); err != nil {
					t.Errorf("%s: %s: %v", name, side, err)
				}
			}
			x[st.conn], y[st.conn] = ready(adminDial(t, p)), ready(dialAddr(t, r.Addr()))
			continue
		}
		got, want := x[st.conn].do(st.args...), y[st.conn].do(st.args...)
		if !repliesAgree(t, st.cmp, got, want, st.fields) {
			t.Errorf("%s: the proxy answered %.300q, redis-server %.300q", name, got, want)
		}
	}
}

// readEOF reports whether c's connection ends without another byte.
func readEOF(c *adminConn) error {
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := c.rd.ReadByte()
	switch {
	case err == nil:
		return errors.New("the connection is open: read " + string(b))
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errors.New("the connection is still open after 5s")
	}
	return err
}

// TestResetMatchesRedis is issue 32's item 4: RESET, as redis-server 7.0
// answers it: +RESET from a subscribed client in RESP2 and RESP3, which is
// then subscribed to nothing (PING answers +PONG, a PUBLISH reaches no
// one), speaks RESP2 again, has no name, and with requirepass must AUTH
// again; and RESET is served before AUTH.
func TestResetMatchesRedis(t *testing.T) {
	info := []string{"CLIENT", "INFO"}
	fields := []string{"flags", "sub", "name", "resp", "db", "user"}
	steps := []sideStep{
		{0, []string{"CLIENT", "SETNAME", "sub"}, sameBytes, nil},
		{0, []string{"SUBSCRIBE", "ch1"}, sameBytes, nil},
		{0, []string{"SUBSCRIBE", "ch2"}, sameBytes, nil},
		{0, info, sameBytes, nil}, // refused while subscribed in RESP2
		{0, []string{"RESET"}, sameBytes, nil},
		{0, []string{"PING"}, sameBytes, nil},
		{1, []string{"PUBLISH", "ch1", "x"}, sameBytes, nil},
		{0, []string{"CLIENT", "GETNAME"}, sameBytes, nil},
		{0, info, sameFields, fields},
		{0, []string{"HELLO", "3", "SETNAME", "mon"}, sameShape, nil},
		{0, []string{"SUBSCRIBE", "ch1"}, sameBytes, nil},
		{0, info, sameFields, fields},
		{0, []string{"RESET"}, sameBytes, nil},
		{0, info, sameFields, fields},
		{0, []string{"CLIENT", "GETNAME"}, sameBytes, nil},
		{1, []string{"PUBLISH", "ch1", "x"}, sameBytes, nil},
		{0, []string{"SELECT", "0"}, sameBytes, nil},
		{0, []string{"RESET", "x"}, sameBytes, nil},
		{0, []string{"reset"}, sameBytes, nil},
		// The connection is a new one's: it can become a replica.
		{0, []string{"REPLCONF", "capa", "eof"}, sameBytes, nil},
	}
	runBeside(t, "no password", startProxy(t), redistest.StartServer(t), steps)

	auth := []sideStep{
		{0, []string{"RESET"}, sameBytes, nil},
		{0, []string{"PING"}, sameBytes, nil},
		{0, []string{"AUTH", "secret"}, sameBytes, nil},
		{0, []string{"SUBSCRIBE", "ch1"}, sameBytes, nil},
		{0, []string{"RESET"}, sameBytes, nil},
		{0, []string{"PING"}, sameBytes, nil},
		{0, []string{"CLIENT", "GETNAME"}, sameBytes, nil},
		{0, []string{"HELLO", "3", "AUTH", "default", "secret"}, sameShape, nil},
		{0, []string{"RESET"}, sameBytes, nil},
		{0, []string{"HELLO", "3"}, sameBytes, nil},
		{0, []string{"AUTH", "default", "secret"}, sameBytes, nil},
		{0, info, sameFields, fields},
	}
	runBeside(t, "requirepass", startProxy(t, "--requirepass", "secret"), redistest.StartServer(t, "--requirepass", "secret"), auth)
}

// TestClientKillMatchesRedis: CLIENT KILL's filters and their errors, as
// redis-server 7.0 parses them (in order, the first bad one answered), USER
// among them, and a client that kills itself (SKIPME no, or the old form
// with its own address) gets its reply before its connection is closed.
func TestClientKillMatchesRedis(t *testing.T) {
	steps := []sideStep{
		{0, []string{"CLIENT", "KILL", "USER", "default", "SKIPME", "yes"}, sameBytes, nil}, // client 1
		{1, nil, closedNow, nil},
		{0, []string{"CLIENT", "KILL", "SKIPME", "maybe"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "ID", "999999", "SKIPME", "maybe"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "SKIPME", "no", "ID"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "ID", "0", "SKIPME"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "ID", "x"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "USER", "nosuch"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "USER", "nosuch", "SKIPME", "maybe"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "SKIPME", "maybe", "USER", "nosuch"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "TYPE", "bogus", "SKIPME", "maybe"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "BOGUS", "1"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "USER", "DEFAULT"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "TYPE", "pubsub", "USER", "default"}, sameBytes, nil},
		{0, []string{"CLIENT", "KILL", "USER", "default", "SKIPME", "YES"}, sameBytes, nil}, // client 1
		{1, nil, closedNow, nil},
		{0, []string{"CLIENT", "KILL", "USER", "default", "SKIPME", "no"}, sameBytes, nil}, // itself and client 1
		{0, nil, closedNow, nil},
		{1, nil, closedNow, nil},
	}
	runBeside(t, "client kill", startProxy(t), redistest.StartServer(t), steps)

	// The old form, with the client's own address.
	p, r := startProxy(t), redistest.StartServer(t)
	for side, c := range map[string]*adminConn{"the proxy": adminDial(t, p), "redis-server": dialAddr(t, r.Addr())} {
		if got := c.do("CLIENT", "KILL", c.conn.LocalAddr().String()); got != "+OK\r\n" {
			t.Errorf("%s: CLIENT KILL <its own address> answered %q, want +OK", side, got)
		}
		if err := readEOF(c); err != nil {
			t.Errorf("%s: after CLIENT KILL <its own address>: %v", side, err)
		}
	}
}

package redistest

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeReplica is the replica's end of a link to a fake primary, driven by
// hand: it writes commands and reads the primary's bytes.
type fakeReplica struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialFake(t *testing.T, p *FakePrimary) *fakeReplica {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(FakeIOTimeout))
	return &fakeReplica{t: t, conn: c, br: bufio.NewReader(c)}
}

// send writes one command as a replica does: a multibulk of bulks.
func (r *fakeReplica) send(args ...any) {
	r.t.Helper()
	b, err := appendCommand(nil, args)
	if err == nil {
		_, err = r.conn.Write(b)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// line reads one line, CRLF included.
func (r *fakeReplica) line() string {
	r.t.Helper()
	s, err := r.br.ReadString('\n')
	if err != nil {
		r.t.Fatalf("read a line: %v (got %q)", err, s)
	}
	return s
}

// exactly reads n bytes.
func (r *fakeReplica) exactly(n int) string {
	r.t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		r.t.Fatalf("read %d bytes: %v", n, err)
	}
	return string(b)
}

// handshake sends a replica's handshake up to PSYNC, side or not, and
// checks the primary's replies to it.
func (r *fakeReplica) handshake(side bool) {
	r.t.Helper()
	cmds := [][]any{{"PING"}, {"REPLCONF", "listening-port", 6380}, {"REPLCONF", "capa", "eof", "capa", "psync2"}}
	if side {
		cmds = append(cmds, []any{"REPLCONF", "rdb-only", 1})
	}
	for _, c := range cmds {
		r.send(c...)
		want := "+OK\r\n"
		if c[0] == "PING" {
			want = "+PONG\r\n"
		}
		if got := r.line(); got != want {
			r.t.Fatalf("%v answered %q, want %q", c, got, want)
		}
	}
	r.send("PSYNC", "?", -1)
}

// TestFakePrimaryLinks: the primary answers a replica's handshake as Redis
// does, tells a side link (REPLCONF rdb-only 1) from a main one, numbers
// each kind apart, records every command, and FullSync sends +FULLRESYNC
// at the primary's offset and the RDB; PINGs a streaming link sends move
// that offset.
func TestFakePrimaryLinks(t *testing.T) {
	rdb := []byte("REDIS0011 not really an RDB")
	type seen struct {
		side   bool
		n      int
		psync  string
		got    []string
		primed bool // the script found Primary() set
	}
	links := make(chan seen, 4)
	script := func(l *FakeLink) error {
		links <- seen{side: l.Side(), n: l.N(), psync: l.PSYNC(), got: l.Got(), primed: l.Primary() != nil}
		if err := l.FullSync(); err != nil {
			return err
		}
		if l.Side() {
			return nil
		}
		return l.Ping(2)
	}
	p := StartFakePrimary(t, FakeOptions{Main: script, Side: script, RDB: rdb})
	if got, want := p.ReplicaOf(), []string{"--replicaof", "127.0.0.1", strconv.Itoa(p.Port())}; !slices.Equal(got, want) {
		t.Errorf("ReplicaOf() = %q, want %q", got, want)
	}

	payload := "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	main := dialFake(t, p)
	main.handshake(false)
	if got, want := main.line()+main.exactly(len(payload)), "+FULLRESYNC "+FakeReplID+" 1000\r\n"+payload; got != want {
		t.Fatalf("main link: %q, want %q", got, want)
	}
	if got := main.exactly(2 * len(FakePing)); got != FakePing+FakePing {
		t.Fatalf("main link after the payload: %q, want two PINGs", got)
	}
	side := dialFake(t, p)
	side.handshake(true)
	if got, want := side.line(), "+FULLRESYNC "+FakeReplID+" 1028\r\n"; got != want {
		t.Fatalf("side link after two PINGs: %q, want %q", got, want)
	}

	m, s := <-links, <-links
	wantGot := []string{"PING", "REPLCONF listening-port 6380", "REPLCONF capa eof capa psync2"}
	if m.side || m.n != 1 || m.psync != "PSYNC ? -1" || !m.primed || !slices.Equal(m.got, append(wantGot, "PSYNC ? -1")) {
		t.Errorf("main link seen as %+v", m)
	}
	if !s.side || s.n != 1 || !slices.Equal(s.got, append(wantGot, "REPLCONF rdb-only 1", "PSYNC ? -1")) {
		t.Errorf("side link seen as %+v", s)
	}
	if p.Mains.Load() != 1 || p.Sides.Load() != 1 {
		t.Errorf("%d main and %d side links, want 1 and 1", p.Mains.Load(), p.Sides.Load())
	}
}

// TestFakePrimaryReply: Reply answers the handshake commands it takes, the
// defaults the others.
func TestFakePrimaryReply(t *testing.T) {
	p := StartFakePrimary(t, FakeOptions{Reply: func(cmd string) (string, bool) {
		if cmd == "REPLCONF link-compression zstd" {
			return "-ERR Unrecognized REPLCONF option: link-compression\r\n", true
		}
		return "", false
	}})
	r := dialFake(t, p)
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"PING"}, "+PONG\r\n"},
		{[]any{"REPLCONF", "link-compression", "zstd"}, "-ERR Unrecognized REPLCONF option: link-compression\r\n"},
		{[]any{"AUTH", "secret"}, "+OK\r\n"},
	} {
		r.send(tc.args...)
		if got := r.line(); got != tc.want {
			t.Errorf("%v answered %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestFakeHandOver: FakeHandOver gives the test the link past its PSYNC;
// what the test writes reaches the replica, AwaitHangup sees its ACK, and
// the link is over (HungUp) once the replica hung up.
func TestFakeHandOver(t *testing.T) {
	p := StartFakePrimary(t, FakeOptions{Main: FakeHandOver, RDB: []byte("rdb")})
	r := dialFake(t, p)
	r.handshake(false)
	l := p.Next(t)
	if l.PSYNC() != "PSYNC ? -1" || l.N() != 1 || l.Accepted().IsZero() {
		t.Fatalf("handed over: PSYNC %q, link %d, accepted at %v", l.PSYNC(), l.N(), l.Accepted())
	}
	l.MustWrite(t, l.FullResync()+l.Payload())
	if got := r.line() + r.exactly(len("$3\r\nrdb")); got != "+FULLRESYNC "+FakeReplID+" 1000\r\n$3\r\nrdb" {
		t.Fatalf("the replica read %q", got)
	}
	r.send("REPLCONF", "ACK", 1000)
	r.conn.Close()
	l.WaitHangUp(t)
	if got := l.Got(); !slices.Contains(got, "REPLCONF ACK 1000") {
		t.Errorf("the hand-over script took %q, want the ACK among them", got)
	}
	if l.HungUpAt().Before(l.Accepted()) {
		t.Errorf("hung up at %v, before it was accepted at %v", l.HungUpAt(), l.Accepted())
	}
}

// TestNewFakeLink: on a connection the test made, the link writes nothing
// by itself; Await finds a command among those sent, and Received returns
// every one once the connection ended.
func TestNewFakeLink(t *testing.T) {
	replica, primary := net.Pipe()
	l := NewFakeLink(primary)
	go func() {
		for _, c := range [][]any{{"PING"}, {"REPLCONF", "ACK", 5}, {"REPLCONF", "ACK", 9}} {
			b, _ := appendCommand(nil, c)
			if _, err := replica.Write(b); err != nil {
				return
			}
		}
		replica.Close()
	}()
	if err := l.Await("REPLCONF ACK 5", FakeIOTimeout); err != nil {
		t.Fatal(err)
	}
	if got, want := l.Received(), []string{"PING", "REPLCONF ACK 5", "REPLCONF ACK 9"}; !slices.Equal(got, want) {
		t.Errorf("Received() = %q, want %q", got, want)
	}
	if err := l.Await("never", time.Second); err == nil || !strings.Contains(err.Error(), "connection closed") {
		t.Errorf("Await after the end: %v, want connection closed", err)
	}
	primary.Close()
}

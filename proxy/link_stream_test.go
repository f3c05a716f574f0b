package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The tests in this file run a whole proxy (its reconnecting upstream loop
// included) against streamPrimary, a fake primary on a loopback listener whose
// stream bytes the test writes by hand: whole commands, commands cut across
// reads, and garbage the proxy's scanner must refuse.

// streamGarbage is what a broken primary sends in the middle of its stream.
const streamGarbage = "GARBAGE-FROM-PRIMARY\r\n"

// streamPrimary is a fake primary. Each connection it accepts answers the
// handshake (PING, AUTH, REPLCONF) by itself and, once the PSYNC arrives, is
// handed to the test on sessions; the test writes the PSYNC reply and the
// stream.
type streamPrimary struct {
	t        testing.TB
	ln       net.Listener
	sessions chan *streamSession
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn // every connection accepted, closed at cleanup
}

// streamSession is one connection of the proxy to the streamPrimary.
type streamSession struct {
	conn     net.Conn
	psync    string    // the PSYNC as received, arguments joined by spaces
	accepted time.Time // when the connection was accepted
	acks     chan string
	hungUp   chan struct{} // closed when the proxy closed the connection
	hungUpAt time.Time     // set before hungUp is closed
}

func startStreamPrimary(t testing.TB) *streamPrimary {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &streamPrimary{t: t, ln: ln, sessions: make(chan *streamSession, 16)}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// replicaOf returns the --replicaof arguments naming p.
func (p *streamPrimary) replicaOf() []string {
	addr := p.ln.Addr().(*net.TCPAddr)
	return []string{"--replicaof", "127.0.0.1", strconv.Itoa(addr.Port)}
}

func (p *streamPrimary) acceptLoop() {
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, conn)
		p.mu.Unlock()
		s := &streamSession{conn: conn, accepted: time.Now(), acks: make(chan string, 1024), hungUp: make(chan struct{})}
		p.wg.Go(func() { p.serve(s) })
	}
}

// serve reads the proxy's commands until it hangs up: it answers the
// handshake, hands the session to the test at the PSYNC, and then collects
// the ACKs.
func (p *streamPrimary) serve(s *streamSession) {
	defer func() {
		s.hungUpAt = time.Now()
		close(s.hungUp)
	}()
	rd := wire.NewCommandReader(s.conn, wire.Limits{})
	for {
		cmd, err := rd.ReadCommand()
		if err != nil {
			return
		}
		if len(cmd.Args) == 0 {
			continue
		}
		args := make([]string, len(cmd.Args))
		for i, a := range cmd.Args {
			args[i] = string(a)
		}
		line := strings.Join(args, " ")
		switch strings.ToUpper(args[0]) {
		case "PING":
			io.WriteString(s.conn, "+PONG\r\n")
		case "AUTH":
			io.WriteString(s.conn, "+OK\r\n")
		case "REPLCONF":
			if len(args) > 1 && strings.EqualFold(args[1], "ACK") {
				select {
				case s.acks <- line:
				default:
				}
				continue
			}
			io.WriteString(s.conn, "+OK\r\n")
		case "PSYNC":
			s.psync = line
			p.sessions <- s
		}
	}
}

// next waits for the proxy's next session, up to its PSYNC.
func (p *streamPrimary) next(t testing.TB) *streamSession {
	t.Helper()
	select {
	case s := <-p.sessions:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not connect and PSYNC within 10s")
		return nil
	}
}

// write sends stream bytes (or a reply) to the proxy.
func (s *streamSession) write(t testing.TB, b string) {
	t.Helper()
	if _, err := io.WriteString(s.conn, b); err != nil {
		t.Fatalf("write to the proxy: %v", err)
	}
}

// fullSync answers the PSYNC with +FULLRESYNC <linkReplID> <offset> and a
// sized payload: the small RDB of the link tests.
func (s *streamSession) fullSync(t testing.TB, offset int64) {
	t.Helper()
	rdb := linkRDB(t)
	s.write(t, "+FULLRESYNC "+linkReplID+" "+strconv.FormatInt(offset, 10)+"\r\n$"+strconv.Itoa(len(rdb))+"\r\n"+string(rdb))
}

// waitHangUp waits until the proxy closes the session's connection.
func (s *streamSession) waitHangUp(t testing.TB) {
	t.Helper()
	select {
	case <-s.hungUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not drop the link within 10s")
	}
}

// streamRawReplica is a downstream replica speaking raw RESP: PSYNC, the
// reply line, then every stream byte the proxy relays, kept for the test.
type streamRawReplica struct {
	conn net.Conn
	mu   sync.Mutex
	got  []byte
	err  error
	done chan struct{}
}

// streamAttachReplica connects to the proxy and continues its stream at off
// with PSYNC <linkReplID> <off>.
func streamAttachReplica(t testing.TB, addr string, off int64) *streamRawReplica {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &streamRawReplica{conn: conn, done: make(chan struct{})}
	t.Cleanup(func() { conn.Close(); <-r.done })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(wire.AppendCommand(nil, "PSYNC", linkReplID, strconv.FormatInt(off, 10))); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "+CONTINUE") {
		t.Fatalf("PSYNC %s %d answered %q, %v; want +CONTINUE", linkReplID, off, line, err)
	}
	conn.SetDeadline(time.Time{})
	go func() {
		defer close(r.done)
		buf := make([]byte, 4096)
		for {
			n, err := br.Read(buf)
			r.mu.Lock()
			r.got = append(r.got, buf[:n]...)
			if err != nil {
				r.err = err
			}
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return r
}

// bytes returns what the replica received so far.
func (r *streamRawReplica) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.got)
}

// streamInfo returns one field of the proxy's INFO.
func streamInfo(p *testProxy, section, key string) string {
	for line := range strings.Lines(p.Info(section)) {
		if k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

func streamInfoInt(t testing.TB, p *testProxy, section, key string) int64 {
	t.Helper()
	v := streamInfo(p, section, key)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("INFO %s %s = %q", section, key, v)
	}
	return n
}

// streamWaitLinkUp waits until the proxy reports its link up.
func streamWaitLinkUp(t testing.TB, p *testProxy) {
	t.Helper()
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
		return streamInfo(p, "replication", "master_link_status") == "up"
	})
}

// streamCheckStream waits until the proxy's offsets reach want, then checks
// that its stream from linkOffset+1 holds exactly stream.
func streamCheckStream(t testing.TB, p *testProxy, stream string) {
	t.Helper()
	want := int64(linkOffset + len(stream))
	redistest.WaitFor(t, 10*time.Second, fmt.Sprintf("proxy offsets at %d", want), func() bool {
		return streamInfo(p, "replication", "master_repl_offset") == itoa(want) &&
			streamInfo(p, "replication", "slave_repl_offset") == itoa(want)
	})
	got, err := linkStreamBytes(p.Server, linkOffset+1)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != stream {
		t.Fatalf("the proxy's stream holds %q, want %q", got, stream)
	}
}

// TestLinkStreamMalformedNotRelayed: valid commands, then the start of one
// more and garbage in its middle. The proxy publishes the valid commands only:
// a replica attached before the garbage and the proxy's own stream never hold
// a byte of the broken command. The error is counted and logged, the link is
// dropped, and the proxy comes back with a partial resync from the last good
// offset, after which the stream goes on without a gap.
func TestLinkStreamMalformedNotRelayed(t *testing.T) {
	prim := startStreamPrimary(t)
	p := startProxy(t, prim.replicaOf()...)
	sess := prim.next(t)
	if sess.psync != "PSYNC ? -1" {
		t.Fatalf("first PSYNC %q", sess.psync)
	}
	sess.fullSync(t, linkOffset)
	streamWaitLinkUp(t, p)
	replica := streamAttachReplica(t, p.AddrString(), linkOffset+1)

	good := linkRESP("set", "a", "1") + linkRESP("set", "b", "2")
	broken := "*3\r\n$3\r\nset\r\n$1\r\nc\r\n$1\r\n3" + streamGarbage // "3" is not followed by CRLF
	sess.write(t, good+broken)
	sess.waitHangUp(t)
	if got, err := linkStreamBytes(p.Server, linkOffset+1); err != nil || string(got) != good {
		t.Fatalf("after the garbage the proxy's stream holds %q (%v), want only %q", got, err, good)
	}
	if got := replica.bytes(); !strings.HasPrefix(good, string(got)) {
		t.Fatalf("the replica received %q, want a prefix of %q", got, good)
	}

	if got := streamInfoInt(t, p, "proxy", "upstream_stream_errors"); got != 1 {
		t.Errorf("upstream_stream_errors %d, want 1", got)
	}
	if !p.Log.Contains("malformed stream from primary") {
		t.Error("the stream error was not logged")
	}

	sess = prim.next(t)
	resume := int64(linkOffset + len(good) + 1)
	if want := "PSYNC " + linkReplID + " " + itoa(resume); sess.psync != want {
		t.Fatalf("after the stream error the proxy sent %q, want %q", sess.psync, want)
	}
	sess.write(t, "+CONTINUE "+linkReplID+"\r\n")
	more := linkRESP("set", "c", "3") + linkRESP("incr", "n")
	sess.write(t, more)
	streamCheckStream(t, p, good+more)

	redistest.WaitFor(t, 10*time.Second, "the replica to receive the whole stream", func() bool {
		return len(replica.bytes()) >= len(good+more)
	})
	if got := replica.bytes(); string(got) != good+more {
		t.Fatalf("the replica received %q, want %q", got, good+more)
	}
}

// TestLinkStreamPublishesWholeCommands: a command cut across reads reaches the
// stream (its offset, the backlog, replicas) only once its last byte arrived.
// When the primary dies with a command half sent, the proxy continues from
// the last whole command, so the primary sends that command again in full.
func TestLinkStreamPublishesWholeCommands(t *testing.T) {
	prim := startStreamPrimary(t)
	p := startProxy(t, prim.replicaOf()...)
	sess := prim.next(t)
	sess.fullSync(t, linkOffset)
	streamWaitLinkUp(t, p)
	replica := streamAttachReplica(t, p.AddrString(), linkOffset+1)

	first := linkRESP("set", "k", "v1")
	cmd := linkRESP("set", "key", "a value cut in two")
	end := int64(linkOffset + len(first))
	input := streamInfoInt(t, p, "stats", "total_net_repl_input_bytes")
	// sendPiece writes b, which ends a cut command at offset read, and checks,
	// once the proxy has read it, that the stream still ends at the last whole
	// command.
	sendPiece := func(b string, read int64) {
		t.Helper()
		sess.write(t, b)
		input += int64(len(b))
		redistest.WaitFor(t, 10*time.Second, "the proxy to read the piece", func() bool {
			return streamInfoInt(t, p, "stats", "total_net_repl_input_bytes") >= input
		})
		if got := streamInfoInt(t, p, "replication", "master_repl_offset"); got != end {
			t.Fatalf("master_repl_offset %d after %q, want %d (the last whole command)", got, b, end)
		}
		if got := streamInfoInt(t, p, "replication", "slave_repl_offset"); got != end {
			t.Fatalf("slave_repl_offset %d after %q, want %d", got, b, end)
		}
		if got := streamInfoInt(t, p, "replication", "slave_read_repl_offset"); got != read {
			t.Fatalf("slave_read_repl_offset %d after %q, want %d (every byte read)", got, b, read)
		}
		if got, err := linkStreamBytes(p.Server, linkOffset+1); err != nil || string(got) != first {
			t.Fatalf("the stream holds %q (%v), want %q", got, err, first)
		}
	}

	pieces := []string{first + cmd[:1], cmd[:9], cmd[:len(cmd)-1]}
	for i, piece := range pieces {
		read := end + int64(len(piece))
		if i == 0 {
			read = int64(linkOffset + len(piece))
		}
		sendPiece(piece, read)
		sess.conn.Close() // the primary dies mid-command
		sess.waitHangUp(t)
		sess = prim.next(t)
		if want := "PSYNC " + linkReplID + " " + itoa(end+1); sess.psync != want {
			t.Fatalf("after a cut command the proxy sent %q, want %q", sess.psync, want)
		}
		sess.write(t, "+CONTINUE\r\n")
	}
	sendPiece(cmd[:5], end+5)
	sess.write(t, cmd[5:])
	streamCheckStream(t, p, first+cmd)
	redistest.WaitFor(t, 10*time.Second, "the replica to receive the stream", func() bool {
		return len(replica.bytes()) >= len(first+cmd)
	})
	if got := replica.bytes(); string(got) != first+cmd {
		t.Fatalf("the replica received %q, want %q", got, first+cmd)
	}
}

// TestUpstreamStreamErrorBacksOff: a primary that sends garbage at every
// connection is not hammered: after each stream error the proxy waits
// (backoffMin, then twice that) before it reconnects, as after a failed
// attempt, where a link lost after streaming would reconnect at once.
func TestUpstreamStreamErrorBacksOff(t *testing.T) {
	prim := startStreamPrimary(t)
	p := startProxy(t, prim.replicaOf()...)
	sess := prim.next(t)
	sess.fullSync(t, linkOffset)
	streamWaitLinkUp(t, p)

	var gaps []time.Duration
	for range 3 {
		sess.write(t, streamGarbage)
		sess.waitHangUp(t)
		next := prim.next(t)
		gaps = append(gaps, next.accepted.Sub(sess.hungUpAt))
		sess = next
		if strings.HasPrefix(sess.psync, "PSYNC ? ") {
			sess.fullSync(t, linkOffset)
		} else {
			sess.write(t, "+CONTINUE\r\n")
		}
	}
	t.Logf("reconnected after %v", gaps)
	// The gaps are measured from when the fake primary saw the hang-up,
	// which may be a little after the proxy's backoff started: allow half of
	// backoffMin. Without a backoff the proxy reconnects within a millisecond.
	for i, want := range []time.Duration{backoffMin, 2 * backoffMin, 4 * backoffMin} {
		if gaps[i] < want-backoffMin/2 {
			t.Errorf("reconnection %d came %v after the stream error, want at least %v", i+1, gaps[i], want)
		}
	}
	if got := streamInfoInt(t, p, "proxy", "upstream_stream_errors"); got != 3 {
		t.Errorf("upstream_stream_errors %d, want 3", got)
	}
}

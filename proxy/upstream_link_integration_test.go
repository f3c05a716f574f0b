package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// The unit tests in this file drive (*upstream).serve directly on one end of a
// connection, with the fake primary (newFakeLink) on the other end, scripted
// to answer as a Redis 7.0.15 primary does, byte for byte (PROTOCOL §1.1,
// §2.1, §3).

// linkTimeout is the repl-timeout given to serve.
const linkTimeout = 2 * time.Second

// linkRESP encodes a command as a primary propagates it: a multibulk of bulks.
func linkRESP(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// linkGetAck is REPLCONF GETACK * as a Redis primary sends it: 37 bytes.
const linkGetAck = "*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n"

// linkStream returns a command stream as a 7.0 primary emits it (SELECT, SET,
// a MULTI/EXEC, its PING, a GETACK, one more SET) and the number of bytes
// before the GETACK: the offset a replica answers the GETACK with, relative to
// the stream's start.
func linkStream() (stream string, beforeGetAck int) {
	head := "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n" +
		linkRESP("set", "foo", "bar") +
		linkRESP("multi") +
		linkRESP("set", "a", "*1\r\n$4\r\nping\r\n") + // a value that looks like a command
		linkRESP("incrby", "counter", "7") +
		linkRESP("exec") +
		"*1\r\n$4\r\nping\r\n"
	return head + linkGetAck + linkRESP("set", "baz", "qux"), len(head)
}

// linkNewServer builds a proxy with no replicaof whose upstream the test drives
// by hand. Its logs go to t.Log at the given level.
func linkNewServer(t testing.TB, level hclog.Level) *Server {
	t.Helper()
	return newTestProxy(t, proxySetup{idle: true, level: level}).Server
}

// linkPair returns two connected ends: the proxy's and the fake primary's.
type linkPair func(t testing.TB) (proxySide, primarySide net.Conn)

// linkPipe is a net.Pipe: every write of one side is read by the other without
// being merged with the next, so the test controls where reads end.
func linkPipe(t testing.TB) (net.Conn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// linkTCP is a loopback TCP connection.
func linkTCP(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a, b := redistest.TCPPair(t)
	return a, b
}

var linkTransports = []struct {
	name string
	pair linkPair
}{{"pipe", linkPipe}, {"tcp", linkTCP}}

// linkResult is what one session left.
type linkResult struct {
	wasUp     bool
	err       error    // serve's
	scriptErr error    // the fake primary's
	cmds      []string // every command the fake primary received, in order
}

// linkSession runs serve on a fresh connection while script plays the primary,
// and returns once both have finished. The primary hangs up when the script
// returns, which ends a session that got as far as streaming.
func linkSession(t testing.TB, srv *Server, pair linkPair, user, pass string, timeout time.Duration, script func(*fakeLink) error) linkResult {
	t.Helper()
	proxySide, primarySide := pair(t)
	f := newFakeLink(primarySide)
	scriptDone := make(chan error, 1)
	go func() {
		err := script(f)
		primarySide.Close()
		scriptDone <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wasUp, err := srv.up.Serve(ctx, proxySide, upstream.Target{User: user, Pass: pass, Timeout: timeout})
	primarySide.Close() // a script still writing or waiting gives up
	scriptErr := <-scriptDone
	return linkResult{wasUp: wasUp, err: err, scriptErr: scriptErr, cmds: f.Received()}
}

// linkScenario is one good session as a primary plays it.
type linkScenario struct {
	replies string // everything up to where the primary stops and waits, or up to the stream
	waitAck string // after replies, wait for this command before the stream ("" = do not)
	stream  string
	getAck  string // the proxy's answer to the stream's GETACK
}

// play writes replies+stream, cut at the given positions into separate writes,
// waiting for waitAck after replies, then waits for the GETACK answer.
func (sc linkScenario) play(f *fakeLink, cuts []int) error {
	out := sc.replies + sc.stream
	bounds := append(slices.Clone(cuts), len(out))
	if sc.waitAck != "" {
		bounds = append(bounds, len(sc.replies))
	}
	slices.Sort(bounds)
	pos := 0
	for _, b := range slices.Compact(bounds) {
		if b > pos {
			if err := f.write(out[pos:b]); err != nil {
				return fmt.Errorf("write bytes %d-%d: %w", pos, b, err)
			}
			pos = b
		}
		if b == len(sc.replies) && sc.waitAck != "" {
			if err := f.await(sc.waitAck); err != nil {
				return err
			}
		}
	}
	return f.await(sc.getAck)
}

// linkHandshakeReplies is a primary's replies to PING, [AUTH,] REPLCONF listening-port
// and REPLCONF capa.
func linkHandshakeReplies(auth bool) string {
	if auth {
		return "+PONG\r\n+OK\r\n+OK\r\n+OK\r\n"
	}
	return "+PONG\r\n+OK\r\n+OK\r\n"
}

// linkFullSized is a disk-target full sync: keepalives, +FULLRESYNC, more
// keepalives, $<len>, the RDB and the stream glued to it.
func linkFullSized(rdb []byte) linkScenario {
	stream, before := linkStream()
	return linkScenario{
		replies: linkHandshakeReplies(false) + "\n\n+FULLRESYNC " + linkReplID + " " + strconv.Itoa(linkOffset) + "\r\n" +
			"\n\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb),
		stream: stream,
		getAck: "REPLCONF ACK " + strconv.Itoa(linkOffset+before),
	}
}

// linkFullEOF is a diskless full sync: keepalives, +FULLRESYNC, $EOF:<mark>,
// the RDB, the mark, and nothing until the proxy's REPLCONF ACK <offset>.
func linkFullEOF(rdb []byte) linkScenario {
	stream, before := linkStream()
	return linkScenario{
		replies: linkHandshakeReplies(false) + "\n\n\n+FULLRESYNC " + linkReplID + " " + strconv.Itoa(linkOffset) + "\r\n" +
			"$EOF:" + linkEOFMark + "\r\n" + string(rdb) + linkEOFMark,
		waitAck: "REPLCONF ACK " + strconv.Itoa(linkOffset),
		stream:  stream,
		getAck:  "REPLCONF ACK " + strconv.Itoa(linkOffset+before),
	}
}

// linkContinue is a partial sync from offset base: "+CONTINUE[ <id>]" and the stream.
func linkContinue(reply string, base int64) linkScenario {
	stream, before := linkStream()
	return linkScenario{
		replies: linkHandshakeReplies(false) + reply + "\r\n",
		stream:  stream,
		getAck:  "REPLCONF ACK " + strconv.FormatInt(base+int64(before), 10),
	}
}

// linkWant is the state a good session must leave.
type linkWant struct {
	psync        string // the PSYNC the proxy must have sent
	auth         string // the AUTH it must have sent, "" for none
	rdb          []byte // the snapshot's bytes
	snapOffset   int64
	replID       string
	replID2      string
	secondOffset int64
	from         int64 // offset of this session's first stream byte
	stream       string
}

// linkVerify checks a good session's result and the server it left.
func linkVerify(srv *Server, res linkResult, w linkWant) error {
	if res.scriptErr != nil {
		return fmt.Errorf("fake primary: %w (serve: %v)", res.scriptErr, res.err)
	}
	if !res.wasUp || res.err == nil {
		return fmt.Errorf("serve = (%v, %v), want (true, the primary's hang-up)", res.wasUp, res.err)
	}
	want := []string{"PING"}
	if w.auth != "" {
		want = append(want, w.auth)
	}
	want = append(want, "REPLCONF listening-port "+strconv.Itoa(srv.Port()), "REPLCONF capa eof capa psync2 capa replproxy", w.psync)
	if len(res.cmds) < len(want) || !slices.Equal(res.cmds[:len(want)], want) {
		return fmt.Errorf("commands %q, want %q then ACKs", res.cmds, want)
	}
	for _, c := range res.cmds[len(want):] {
		n, ok := strings.CutPrefix(c, "REPLCONF ACK ")
		if _, err := strconv.ParseInt(n, 10, 64); !ok || err != nil {
			return fmt.Errorf("after PSYNC the proxy sent %q; want only REPLCONF ACK <offset> (all: %q)", c, res.cmds)
		}
	}

	sn := srv.Snapshot()
	if sn == nil || sn.State() != replbuf.SnapshotComplete {
		return fmt.Errorf("snapshot %v, want a complete one", sn)
	}
	if sn.ReplID() != linkReplID || sn.Offset() != w.snapOffset {
		return fmt.Errorf("snapshot (%s, %d), want (%s, %d)", sn.ReplID(), sn.Offset(), linkReplID, w.snapOffset)
	}
	got, err := linkSnapshotBytes(sn)
	if err != nil {
		return err
	}
	if string(got) != string(w.rdb) {
		return fmt.Errorf("snapshot holds %d bytes %q, want the %d RDB bytes", len(got), clip(string(got), 60), len(w.rdb))
	}

	end := w.from - 1 + int64(len(w.stream))
	if off := srv.hist.Stream().Offset(); off != end {
		return fmt.Errorf("stream offset %d, want %d", off, end)
	}
	if a := srv.up.Applied(); a != end {
		return fmt.Errorf("applied offset %d, want %d", a, end)
	}
	stream, err := linkStreamBytes(srv, w.from)
	if err != nil {
		return err
	}
	if string(stream) != w.stream {
		return fmt.Errorf("stream from %d is %q, want %q", w.from, stream, w.stream)
	}

	info := redistest.ParseInfo(srv.Info("replication"))
	for k, v := range map[string]string{
		"master_replid":      w.replID,
		"master_replid2":     w.replID2,
		"second_repl_offset": strconv.FormatInt(w.secondOffset, 10),
		"master_repl_offset": strconv.FormatInt(end, 10),
	} {
		if info[k] != v {
			return fmt.Errorf("INFO replication %s:%s, want %s", k, info[k], v)
		}
	}
	return nil
}

// linkSnapshotBytes reads a complete snapshot back through a reader.
func linkSnapshotBytes(sn *replbuf.Snapshot) ([]byte, error) {
	c, err := sn.NewReader()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []byte
	for {
		bufs, err := c.Pending()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot reader: %w", err)
		}
		n := 0
		for _, b := range *bufs {
			out = append(out, b...)
			n += len(b)
		}
		if n == 0 {
			return nil, fmt.Errorf("snapshot reader stalled after %d bytes of a complete snapshot", len(out))
		}
		if err := c.Advance(int64(n)); err != nil {
			return nil, err
		}
	}
}

// linkStreamBytes reads the stream from offset from up to its end.
func linkStreamBytes(srv *Server, from int64) ([]byte, error) {
	c, err := srv.hist.Stream().Attach(from)
	if err != nil {
		return nil, fmt.Errorf("attach at %d: %w", from, err)
	}
	defer c.Close()
	var out []byte
	for {
		bufs, err := c.Pending()
		if err != nil {
			return nil, fmt.Errorf("stream cursor: %w", err)
		}
		n := 0
		for _, b := range *bufs {
			out = append(out, b...)
			n += len(b)
		}
		if n == 0 {
			return out, nil
		}
		if err := c.Advance(int64(n)); err != nil {
			return nil, err
		}
	}
}

// linkEveryCut returns the cut sets to try on an output of n bytes: each single
// split point, then one byte per write.
func linkEveryCut(n int) (names []string, cuts [][]int) {
	for k := 1; k < n; k++ {
		names = append(names, "split at "+strconv.Itoa(k))
		cuts = append(cuts, []int{k})
	}
	all := make([]int, 0, n)
	for k := 1; k < n; k++ {
		all = append(all, k)
	}
	return append(names, "one byte per write"), append(cuts, all)
}

// TestLinkSplitEverywhere plays each way a primary can start a session (both
// payload forms and +CONTINUE with and without a new replid), its whole output
// cut into two writes at every byte boundary and also one byte per write, and
// checks what each session leaves: the snapshot holds exactly the RDB, the
// stream holds exactly the stream bytes at the right offsets, the GETACK got
// "REPLCONF ACK <offset before it>", and INFO shows the replication IDs.
func TestLinkSplitEverywhere(t *testing.T) {
	rdb := linkRDB(t)
	stream, _ := linkStream()
	end := int64(linkOffset + len(stream))

	full := []struct {
		name string
		sc   linkScenario
	}{{"sized", linkFullSized(rdb)}, {"eof-mark", linkFullEOF(rdb)}}
	for _, tc := range full {
		t.Run(tc.name, func(t *testing.T) {
			srv := linkNewServer(t, hclog.Warn)
			want := linkWant{psync: "PSYNC ? -1", rdb: rdb, snapOffset: linkOffset, replID: linkReplID,
				replID2: replid.None, secondOffset: -1, from: linkOffset + 1, stream: stream}
			names, cuts := linkEveryCut(len(tc.sc.replies) + len(tc.sc.stream))
			for i := range cuts {
				for _, tr := range linkTransports {
					if tr.name == "tcp" && len(cuts[i]) == 1 {
						continue // TCP may merge writes; the pipe keeps the split exact
					}
					res := linkSession(t, srv, tr.pair, "", "", linkTimeout, func(f *fakeLink) error {
						return tc.sc.play(f, cuts[i])
					})
					if err := linkVerify(srv, res, want); err != nil {
						t.Fatalf("%s over %s: %v", names[i], tr.name, err)
					}
					// From now on the proxy asks to continue; the fake primary
					// answers +FULLRESYNC anyway, as one without that history.
					want.psync = "PSYNC " + linkReplID + " " + strconv.FormatInt(end+1, 10)
				}
			}
		})
	}

	cont := []struct {
		name  string
		reply string
		newID bool
	}{
		{"continue", "+CONTINUE", false},
		{"continue-same-id", "+CONTINUE " + linkReplID, false},
		{"continue-new-id", "+CONTINUE " + linkReplIDNew, true},
	}
	for _, tc := range cont {
		t.Run(tc.name, func(t *testing.T) {
			srv := linkNewServer(t, hclog.Warn)
			base := linkFullSized(rdb)
			res := linkSession(t, srv, linkPipe, "", "", linkTimeout, func(f *fakeLink) error { return base.play(f, nil) })
			if err := linkVerify(srv, res, linkWant{psync: "PSYNC ? -1", rdb: rdb, snapOffset: linkOffset, replID: linkReplID,
				replID2: replid.None, secondOffset: -1, from: linkOffset + 1, stream: stream}); err != nil {
				t.Fatalf("first full sync: %v", err)
			}
			ids := []string{linkReplID, linkReplIDNew}
			replID, replID2, second := linkReplID, replid.None, int64(-1)
			n := len(linkContinue(tc.reply, 0).replies) + len(stream)
			names, cuts := linkEveryCut(n)
			for i := range cuts {
				for _, tr := range linkTransports {
					if tr.name == "tcp" && len(cuts[i]) == 1 {
						continue
					}
					from := srv.hist.Stream().Offset() + 1
					psync := "PSYNC " + replID + " " + strconv.FormatInt(from, 10)
					reply := tc.reply
					if tc.newID {
						// Each session moves to the other ID: the old one becomes replid2.
						next := ids[0]
						if replID == ids[0] {
							next = ids[1]
						}
						reply = "+CONTINUE " + next
						replID, replID2, second = next, replID, from
					}
					sc := linkContinue(reply, from-1)
					res := linkSession(t, srv, tr.pair, "", "", linkTimeout, func(f *fakeLink) error { return sc.play(f, cuts[i]) })
					want := linkWant{psync: psync, rdb: rdb, snapOffset: linkOffset, replID: replID, replID2: replID2,
						secondOffset: second, from: from, stream: stream}
					if err := linkVerify(srv, res, want); err != nil {
						t.Fatalf("%s over %s: %v", names[i], tr.name, err)
					}
				}
			}
			if got := srv.stats.UpstreamPartialSyncs.Load(); got < int64(len(cuts)) {
				t.Errorf("upstream_partial_syncs %d, want at least %d", got, len(cuts))
			}
		})
	}
}

// TestLinkLongStreamInFewReads: a stream of many blocks that arrives at
// once over TCP, which the stream loop takes with reads of several blocks
// each, is held byte for byte at its offsets, and a GETACK far into it
// (in a later block of such a read) is answered with the offset before it.
func TestLinkLongStreamInFewReads(t *testing.T) {
	rdb := linkRDB(t)
	var b strings.Builder
	b.WriteString("*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n")
	value := strings.Repeat("v", 10000)
	for i := 0; b.Len() < 150<<10; i++ {
		b.WriteString(linkRESP("set", "k"+strconv.Itoa(i), value))
	}
	before := b.Len()
	b.WriteString(linkGetAck)
	for i := 0; b.Len() < 300<<10; i++ {
		b.WriteString(linkRESP("set", "m"+strconv.Itoa(i), value))
	}
	stream := b.String()
	sc := linkFullSized(rdb)
	sc.stream = stream
	sc.getAck = "REPLCONF ACK " + strconv.Itoa(linkOffset+before)
	srv := linkNewServer(t, hclog.Warn)
	res := linkSession(t, srv, linkTCP, "", "", linkTimeout, func(f *fakeLink) error { return sc.play(f, nil) })
	if err := linkVerify(srv, res, linkWant{psync: "PSYNC ? -1", rdb: rdb, snapOffset: linkOffset, replID: linkReplID,
		replID2: replid.None, secondOffset: -1, from: linkOffset + 1, stream: stream}); err != nil {
		t.Fatal(err)
	}
}

// TestLinkAuth: the AUTH a replica sends (PROTOCOL §1.1): none without
// masterauth, AUTH <pass> with it, AUTH <user> <pass> with masteruser too; a
// PING answered -NOAUTH does not stop the handshake.
func TestLinkAuth(t *testing.T) {
	rdb := linkRDB(t)
	stream, _ := linkStream()
	for _, tc := range []struct {
		name, user, pass, ping, wantAuth string
	}{
		{"no masterauth", "", "", "+PONG", ""},
		{"masteruser without masterauth", "alice", "", "+PONG", ""},
		{"masterauth", "", "s3cret", "-NOAUTH Authentication required.", "AUTH s3cret"},
		{"masteruser and masterauth", "alice", "s3cret", "-NOPERM this user has no permissions to run the 'ping' command", "AUTH alice s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := linkNewServer(t, hclog.Info)
			sc := linkFullSized(rdb)
			sc.replies = tc.ping + "\r\n" + strings.TrimPrefix(sc.replies, "+PONG\r\n")
			if tc.wantAuth != "" {
				sc.replies = tc.ping + "\r\n+OK\r\n" + strings.TrimPrefix(sc.replies, tc.ping+"\r\n")
			}
			res := linkSession(t, srv, linkPipe, tc.user, tc.pass, linkTimeout, func(f *fakeLink) error { return sc.play(f, nil) })
			if err := linkVerify(srv, res, linkWant{psync: "PSYNC ? -1", auth: tc.wantAuth, rdb: rdb, snapOffset: linkOffset,
				replID: linkReplID, replID2: replid.None, secondOffset: -1, from: linkOffset + 1, stream: stream}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// linkReplies returns a script that writes each piece and then waits for the
// proxy to hang up, as a primary whose replies the proxy refuses. A failed
// write means the proxy already hung up, which is what the case is about.
func linkReplies(pieces ...string) func(*fakeLink) error {
	return func(f *fakeLink) error {
		for _, p := range pieces {
			if err := f.write(p); err != nil {
				return nil
			}
		}
		if err := f.await("(hang-up)"); err != nil && !strings.Contains(err.Error(), "connection closed") {
			return err
		}
		return nil
	}
}

// linkThenClose returns a script that answers the handshake, waits for the
// PSYNC, writes each piece and hangs up, as a primary that dies.
func linkThenClose(pieces ...string) func(*fakeLink) error {
	return func(f *fakeLink) error {
		if err := f.write(linkHandshakeReplies(false)); err != nil {
			return err
		}
		if err := f.await("PSYNC ? -1"); err != nil {
			return err
		}
		for _, p := range pieces {
			if err := f.write(p); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestLinkErrors: each way a primary can fail a session before the stream
// starts ends serve with an error (the right one), installs no snapshot, and
// leaves a Server on which the next good session succeeds, with no restart.
func TestLinkErrors(t *testing.T) {
	rdb := linkRDB(t)
	stream, _ := linkStream()
	hs := linkHandshakeReplies(false)
	full := "+FULLRESYNC " + linkReplID + " " + strconv.Itoa(linkOffset) + "\r\n"
	sized := "$" + strconv.Itoa(len(rdb)) + "\r\n"
	eof := "$EOF:" + linkEOFMark + "\r\n"
	bad := slices.Clone(rdb)
	bad[len(bad)-1] ^= 0x20             // one bit of the CRC64 trailer flipped: it no longer matches
	junk := string(redistest.JunkRDB()) // REDIS0010, junk, the end opcode and a zero trailer: no checksum to fail

	for _, tc := range []struct {
		name       string
		pass       string
		timeout    time.Duration
		script     func(*fakeLink) error
		is         error // the error must wrap this, if set
		notIs      error // and must not wrap this, if set
		contains   string
		checksumOK bool // the checksum failure counter must count it
		refused    bool // the RDB check refused it (upstream_rdb_check_failures)
	}{
		{name: "PING refused", script: linkReplies("-ERR unknown command 'PING'\r\n"), contains: "PING"},
		{name: "AUTH refused", pass: "wrong", script: linkReplies("+PONG\r\n-WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n+OK\r\n"), contains: "AUTH refused"},
		{name: "closed before the PSYNC reply", script: linkThenClose(), is: io.EOF},
		{name: "NOMASTERLINK", script: linkReplies(hs + "-NOMASTERLINK Can't SYNC while not connected with my master\r\n"), is: upstream.ErrTryLater},
		{name: "LOADING", script: linkReplies(hs + "\n-LOADING Redis is loading the dataset in memory\r\n"), is: upstream.ErrTryLater},
		{name: "garbage instead of FULLRESYNC", script: linkReplies(hs + "+GARBAGE\r\n"), notIs: upstream.ErrTryLater, contains: "GARBAGE"},
		{name: "BGSAVE failed", script: linkReplies(hs + "-ERR BGSAVE failed, replication can't continue\r\n"), notIs: upstream.ErrTryLater},
		{name: "reply line too long", script: linkReplies(hs + "+FULLRESYNC " + strings.Repeat("a", 2000) + "\r\n"), is: wire.ErrLineTooLong},
		{name: "FULLRESYNC short replid", script: linkReplies(hs + "+FULLRESYNC abc 1000\r\n"), contains: "FULLRESYNC"},
		{name: "FULLRESYNC negative offset", script: linkReplies(hs + "+FULLRESYNC " + linkReplID + " -5\r\n"), contains: "FULLRESYNC"},
		{name: "FULLRESYNC no offset", script: linkReplies(hs + "+FULLRESYNC " + linkReplID + "\r\n"), contains: "FULLRESYNC"},
		{name: "payload header not a number", script: linkReplies(hs + full + "$abc\r\n"), contains: "payload"},
		{name: "payload header negative", script: linkReplies(hs + full + "$-1\r\n"), contains: "payload"},
		{name: "payload header empty", script: linkReplies(hs + full + "$\r\n"), contains: "payload"},
		{name: "EOF mark too short", script: linkReplies(hs + full + "$EOF:abc\r\n"), contains: "payload"},
		{name: "payload header not a bulk", script: linkReplies(hs + full + "*1\r\n"), contains: "payload"},
		{name: "primary aborts the sync", script: linkReplies(hs + full + "\n-ERR BGSAVE failed\r\n"), contains: "aborted"},
		{name: "closed after FULLRESYNC", script: linkThenClose(full), is: io.EOF},
		{name: "closed mid-RDB sized", script: linkThenClose(full+sized, string(rdb[:100])), is: io.ErrUnexpectedEOF},
		{name: "closed mid-RDB eof-mark", script: linkThenClose(full+eof, string(rdb[:100])), is: io.ErrUnexpectedEOF},
		{name: "closed inside the EOF mark", script: linkThenClose(full+eof, string(rdb)+linkEOFMark[:20]), is: io.ErrUnexpectedEOF},
		{name: "checksum mismatch sized", script: linkReplies(hs + full + sized + string(bad) + stream), is: rdbcheck.ErrChecksum, checksumOK: true, refused: true},
		{name: "checksum mismatch eof-mark", script: linkReplies(hs + full + eof + string(bad) + linkEOFMark), is: rdbcheck.ErrChecksum, checksumOK: true, refused: true},
		{name: "payload too short for an RDB", script: linkReplies(hs + full + "$4\r\nREDI" + stream), is: replbuf.ErrRefused, refused: true},
		{name: "junk under a zero checksum sized", script: linkReplies(hs + full + "$" + strconv.Itoa(len(junk)) + "\r\n" + junk + stream), is: replbuf.ErrRefused, refused: true},
		{name: "junk under a zero checksum eof-mark", script: linkReplies(hs + full + eof + junk + linkEOFMark), is: replbuf.ErrRefused, refused: true},
		{name: "EOF mark inside the payload", script: linkReplies(hs + full + eof + string(rdb[:len(rdb)/2]) + linkEOFMark + string(rdb[len(rdb)/2:]) + linkEOFMark), is: replbuf.ErrRefused, refused: true},
		{name: "primary silent after PSYNC", timeout: 200 * time.Millisecond, script: func(f *fakeLink) error {
			if err := f.write(hs); err != nil {
				return err
			}
			_ = f.await("never") // the proxy gives up first and hangs up
			return nil
		}, contains: "timeout"},
	} {
		for _, tr := range linkTransports {
			t.Run(tc.name+"/"+tr.name, func(t *testing.T) {
				srv := linkNewServer(t, hclog.Info)
				timeout := tc.timeout
				if timeout == 0 {
					timeout = linkTimeout
				}
				res := linkSession(t, srv, tr.pair, "", tc.pass, timeout, tc.script)
				t.Logf("serve: %v", res.err)
				switch {
				case res.wasUp || res.err == nil:
					t.Fatalf("serve = (%v, %v), want (false, an error)", res.wasUp, res.err)
				case tc.is != nil && !errors.Is(res.err, tc.is):
					t.Errorf("error %q does not wrap %q", res.err, tc.is)
				case tc.notIs != nil && errors.Is(res.err, tc.notIs):
					t.Errorf("error %q wraps %q", res.err, tc.notIs)
				case !strings.Contains(res.err.Error(), tc.contains):
					t.Errorf("error %q does not mention %q", res.err, tc.contains)
				}
				if sn := srv.Snapshot(); sn != nil {
					t.Errorf("a failed session installed snapshot %s/%d", sn.ReplID(), sn.Offset())
				}
				if got, want := srv.stats.UpstreamChecksumFails.Load(), int64(b2i(tc.checksumOK)); got != want {
					t.Errorf("upstream checksum failures %d, want %d", got, want)
				}
				if got, want := srv.stats.UpstreamRDBCheckFails.Load(), int64(b2i(tc.refused)); got != want {
					t.Errorf("upstream RDB check failures %d, want %d", got, want)
				}

				// The same Server then syncs from a good primary.
				sc := linkFullEOF(rdb)
				res = linkSession(t, srv, tr.pair, "", tc.pass, linkTimeout, func(f *fakeLink) error {
					if tc.pass != "" {
						sc.replies = "+PONG\r\n+OK\r\n" + strings.TrimPrefix(sc.replies, "+PONG\r\n")
					}
					return sc.play(f, nil)
				})
				auth := ""
				if tc.pass != "" {
					auth = "AUTH " + tc.pass
				}
				if err := linkVerify(srv, res, linkWant{psync: "PSYNC ? -1", auth: auth, rdb: rdb, snapOffset: linkOffset,
					replID: linkReplID, replID2: replid.None, secondOffset: -1, from: linkOffset + 1, stream: stream}); err != nil {
					t.Fatalf("good session after the failure: %v", err)
				}
			})
		}
	}
}

// TestLinkEOFPayloadSlowerThanTimeout: a diskless payload whose bytes keep
// coming, but which as a whole takes longer than repl-timeout (a large
// dataset), must still be acknowledged: only silence counts as a timeout.
func TestLinkEOFPayloadSlowerThanTimeout(t *testing.T) {
	rdb := linkRDB(t)
	stream, _ := linkStream()
	const timeout = 300 * time.Millisecond
	sc := linkFullEOF(rdb)
	head := strings.TrimSuffix(sc.replies, string(rdb)+linkEOFMark)
	srv := linkNewServer(t, hclog.Info)
	res := linkSession(t, srv, linkPipe, "", "", timeout, func(f *fakeLink) error {
		if err := f.write(head); err != nil {
			return err
		}
		// 236 bytes in 24 pieces 50 ms apart: 1.2 s, four times repl-timeout,
		// with never more than 50 ms of silence.
		for p := rdb; len(p) > 0; p = p[min(10, len(p)):] {
			time.Sleep(50 * time.Millisecond) // the payload's pace: what is tested
			if err := f.write(string(p[:min(10, len(p))])); err != nil {
				return err
			}
		}
		if err := f.write(linkEOFMark); err != nil {
			return err
		}
		if err := f.await(sc.waitAck); err != nil {
			return err
		}
		if err := f.write(sc.stream); err != nil {
			return err
		}
		return f.await(sc.getAck)
	})
	if err := linkVerify(srv, res, linkWant{psync: "PSYNC ? -1", rdb: rdb, snapOffset: linkOffset, replID: linkReplID,
		replID2: replid.None, secondOffset: -1, from: linkOffset + 1, stream: stream}); err != nil {
		t.Fatal(err)
	}
}

package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// The tests in this file run a whole proxy (its reconnecting upstream loop
// included) against a fakePrimary whose main links are handed to the test
// (fakeHandOver), which writes the stream bytes by hand: whole commands,
// commands cut across reads, and garbage the proxy's scanner must refuse.

// streamGarbage is what a broken primary sends in the middle of its stream.
const streamGarbage = "GARBAGE-FROM-PRIMARY\r\n"

// startStreamProxy runs a proxy replicating from a fakePrimary whose main
// links are handed to the test, and returns them, a client of the proxy, and
// the proxy's first link, up to its PSYNC.
func startStreamProxy(t testing.TB) (*fakePrimary, *testProxy, *redistest.Client, *fakeLink) {
	t.Helper()
	prim := startFakePrimary(t, fakeHandOver, nil)
	p := startProxy(t, prim.replicaOf()...)
	xc := redistest.Dial(t, p.AddrString())
	return prim, p, xc, prim.next(t)
}

// streamCheckStream waits until the proxy's offsets reach want, then checks
// that its stream from linkOffset+1 holds exactly stream.
func streamCheckStream(t testing.TB, p *testProxy, xc *redistest.Client, stream string) {
	t.Helper()
	want := itoa(int64(linkOffset + len(stream)))
	redistest.WaitFor(t, 10*time.Second, "proxy offsets at "+want, func() bool {
		info := xc.Info(t, "replication")
		return info["master_repl_offset"] == want && info["slave_repl_offset"] == want
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
	prim, p, xc, sess := startStreamProxy(t)
	if sess.psync != "PSYNC ? -1" {
		t.Fatalf("first PSYNC %q", sess.psync)
	}
	sess.mustWrite(t, sess.fullResync()+sess.payload())
	waitLinkUp(t, xc)
	replica := attachRawReplica(t, p, linkOffset+1)

	good := linkRESP("set", "a", "1") + linkRESP("set", "b", "2")
	broken := "*3\r\n$3\r\nset\r\n$1\r\nc\r\n$1\r\n3" + streamGarbage // "3" is not followed by CRLF
	sess.mustWrite(t, good+broken)
	sess.waitHangUp(t)
	if got, err := linkStreamBytes(p.Server, linkOffset+1); err != nil || string(got) != good {
		t.Fatalf("after the garbage the proxy's stream holds %q (%v), want only %q", got, err, good)
	}
	if got := replica.received(); !strings.HasPrefix(good, string(got)) {
		t.Fatalf("the replica received %q, want a prefix of %q", got, good)
	}

	if got := xc.InfoInt(t, "proxy", "upstream_stream_errors"); got != 1 {
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
	sess.mustWrite(t, "+CONTINUE "+linkReplID+"\r\n")
	more := linkRESP("set", "c", "3") + linkRESP("incr", "n")
	sess.mustWrite(t, more)
	streamCheckStream(t, p, xc, good+more)
	replica.waitReceived(t, good+more)
}

// TestLinkStreamPublishesWholeCommands: a command cut across reads reaches the
// stream (its offset, the backlog, replicas) only once its last byte arrived.
// When the primary dies with a command half sent, the proxy continues from
// the last whole command, so the primary sends that command again in full.
func TestLinkStreamPublishesWholeCommands(t *testing.T) {
	prim, p, xc, sess := startStreamProxy(t)
	sess.mustWrite(t, sess.fullResync()+sess.payload())
	waitLinkUp(t, xc)
	replica := attachRawReplica(t, p, linkOffset+1)

	first := linkRESP("set", "k", "v1")
	cmd := linkRESP("set", "key", "a value cut in two")
	end := int64(linkOffset + len(first))
	input := xc.InfoInt(t, "stats", "total_net_repl_input_bytes")
	// sendPiece writes b, which ends a cut command at offset read, and checks,
	// once the proxy has read it, that the stream still ends at the last whole
	// command.
	sendPiece := func(b string, read int64) {
		t.Helper()
		sess.mustWrite(t, b)
		input += int64(len(b))
		redistest.WaitFor(t, 10*time.Second, "the proxy to read the piece", func() bool {
			return xc.InfoInt(t, "stats", "total_net_repl_input_bytes") >= input
		})
		if got := xc.InfoInt(t, "replication", "master_repl_offset"); got != end {
			t.Fatalf("master_repl_offset %d after %q, want %d (the last whole command)", got, b, end)
		}
		if got := xc.InfoInt(t, "replication", "slave_repl_offset"); got != end {
			t.Fatalf("slave_repl_offset %d after %q, want %d", got, b, end)
		}
		if got := xc.InfoInt(t, "replication", "slave_read_repl_offset"); got != read {
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
		sess.mustWrite(t, "+CONTINUE\r\n")
	}
	sendPiece(cmd[:5], end+5)
	sess.mustWrite(t, cmd[5:])
	streamCheckStream(t, p, xc, first+cmd)
	replica.waitReceived(t, first+cmd)
}

// TestUpstreamStreamErrorBacksOff: a primary that sends garbage at every
// connection is not hammered: after each stream error the proxy waits
// (upstream.BackoffMin, then twice that) before it reconnects, as after a failed
// attempt, where a link lost after streaming would reconnect at once.
func TestUpstreamStreamErrorBacksOff(t *testing.T) {
	prim, _, xc, sess := startStreamProxy(t)
	sess.mustWrite(t, sess.fullResync()+sess.payload())
	waitLinkUp(t, xc)

	var gaps []time.Duration
	for range 3 {
		sess.mustWrite(t, streamGarbage)
		sess.waitHangUp(t)
		next := prim.next(t)
		gaps = append(gaps, next.Accepted().Sub(sess.HungUpAt()))
		sess = next
		if strings.HasPrefix(sess.psync, "PSYNC ? ") {
			sess.mustWrite(t, sess.fullResync()+sess.payload())
		} else {
			sess.mustWrite(t, "+CONTINUE\r\n")
		}
	}
	t.Logf("reconnected after %v", gaps)
	// The gaps are measured from when the fake primary saw the hang-up,
	// which may be a little after the proxy's backoff started: allow half of
	// upstream.BackoffMin. Without a backoff the proxy reconnects within a millisecond.
	for i, want := range []time.Duration{upstream.BackoffMin, 2 * upstream.BackoffMin, 4 * upstream.BackoffMin} {
		if gaps[i] < want-upstream.BackoffMin/2 {
			t.Errorf("reconnection %d came %v after the stream error, want at least %v", i+1, gaps[i], want)
		}
	}
	if got := xc.InfoInt(t, "proxy", "upstream_stream_errors"); got != 3 {
		t.Errorf("upstream_stream_errors %d, want 3", got)
	}
}

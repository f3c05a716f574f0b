package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// TestChoosePath: each plan goes to one sync path, and a fetch's plan to the
// next one as the fetch completes it.
func TestChoosePath(t *testing.T) {
	cur, rd, sn, file := &replbuf.Cursor{}, &streamlog.Reader{}, &replbuf.Snapshot{}, &os.File{}
	for _, tc := range []struct {
		name string
		plan history.Plan
		want syncPath
	}{
		{"partial from memory", history.Plan{Partial: true, Cursor: cur}, pathPartialMemory},
		{"partial from the log", history.Plan{Partial: true, FromLog: rd}, pathPartialLog},
		{"full from memory", history.Plan{Snapshot: sn, Cursor: cur}, pathFullMemory},
		{"full from memory, then the log", history.Plan{Snapshot: sn, FromLog: rd}, pathFullMemory},
		{"full from a file", history.Plan{File: file, Cursor: cur}, pathFullFile},
		{"awaiting a fetch", history.Plan{Fetch: &history.Fetch{}}, pathAwaitFetch},
		{"a fetched payload that may go to dir", history.Plan{Fetch: &history.Fetch{}, Cursor: cur}, pathFetchedPayload},
		{"a fetched payload from the log", history.Plan{Fetch: &history.Fetch{}, FromLog: rd}, pathFetchedPayload},
		{"a fetched payload, ended in memory", history.Plan{Fetch: &history.Fetch{}, Cursor: cur, Snapshot: sn}, pathFullMemory},
		{"a fetched payload, ended in dir", history.Plan{Fetch: &history.Fetch{}, Cursor: cur, File: file}, pathFullFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := choosePath(&tc.plan); got != tc.want {
				t.Fatalf("choosePath = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestReplconfAck: a replica's REPLCONF ACK is read as cmdReplconf read
// it: options in order, up to the first that ends the command.
func TestReplconfAck(t *testing.T) {
	for _, tc := range []struct {
		args string
		off  int64
		ok   bool
	}{
		{"REPLCONF ACK 100", 100, true},
		{"replconf ack 7 fack 3", 7, true},
		{"REPLCONF capa eof ACK 5", 5, true},
		{"REPLCONF ACK", 0, false},
		{"REPLCONF ACK x", 0, false},
		{"REPLCONF ACK -1", 0, false},
		{"REPLCONF GETACK * ACK 5", 0, false},
		{"REPLCONF listening-port 99999 ACK 5", 0, false},
		{"REPLCONF listening-port 6380 ACK 5", 5, true},
		{"REPLCONF bogus 1 ACK 5", 0, false},
	} {
		var args [][]byte
		for _, f := range strings.Fields(tc.args) {
			args = append(args, []byte(f))
		}
		off, ok := replconfAck(args)
		if ok != tc.ok || (ok && off != tc.off) {
			t.Errorf("%q: %d, %v; want %d, %v", tc.args, off, ok, tc.off, tc.ok)
		}
	}
}

// fakeHost is a replicaHost for a replica alone: it counts what it is told.
type fakeHost struct {
	timeout  time.Duration
	window   int64
	live     bool
	appended logSignal
	acked    atomic.Int64
	commands atomic.Int64
	ended    chan *replica
}

func (h *fakeHost) replTimeout() time.Duration              { return h.timeout }
func (h *fakeHost) memoryWindow() int64                     { return h.window }
func (h *fakeHost) logLive() bool                           { return h.live }
func (h *fakeHost) logAppended() <-chan struct{}            { return h.appended.wait() }
func (h *fakeHost) logCorrupt(error)                        {}
func (h *fakeHost) replicaAcked()                           { h.acked.Add(1) }
func (h *fakeHost) replicaCommand(c *client, args [][]byte) { h.commands.Add(1) }
func (h *fakeHost) replicaEnded(r *replica)                 { h.ended <- r }

// replicaCounts are a test replica's counters.
type replicaCounts struct {
	out, dropped, toDisk atomic.Int64
	closes               closeCounts
}

// newTestReplica returns a replica on one end of a pipe, with a fake host
// and a history of its own, and the other end, as the replica's peer.
func newTestReplica(t *testing.T, hs replicaHandshake) (*replica, *fakeHost, *replicaCounts, net.Conn) {
	t.Helper()
	conn, peer := net.Pipe()
	t.Cleanup(func() { conn.Close(); peer.Close() })
	host := &fakeHost{timeout: 5 * time.Second, window: 1 << 20, ended: make(chan *replica, 1)}
	hist := history.New(replbuf.NewPool(0), 1<<20, history.Counters{EvictedSnapshots: new(atomic.Int64), EvictedBytes: new(atomic.Int64)}, hclog.NewNullLogger())
	t.Cleanup(hist.Close)
	n := &replicaCounts{}
	name := "replconf"
	c := &client{conn: conn, rd: wire.NewCommandReader(conn, wire.Limits{}), log: hclog.NewNullLogger()}
	r := &replica{c: c, host: host, hist: hist, hs: hs, replconf: &name, log: c.log, firstAck: make(chan struct{}),
		count: replicaCounters{outputBytes: &n.out, closes: &n.closes, dropped: &n.dropped, toDisk: &n.toDisk}}
	c.asReplica.Store(r)
	return r, host, n, peer
}

// readN reads n bytes from the peer, within a deadline.
func readN(t *testing.T, br *bufio.Reader, peer net.Conn, n int) []byte {
	t.Helper()
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return b
}

// TestReplicaPartialFromMemory: +CONTINUE with the replid, then the stream
// from the cursor; the peer's ACKs reach the host through the replica's
// own read loop, and CLIENT LIST's last command is REPLCONF.
func TestReplicaPartialFromMemory(t *testing.T) {
	r, host, n, peer := newTestReplica(t, replicaHandshake{capaPSync2: true})
	st := r.hist.Stream()
	st.Append([]byte("hello"))
	cur, err := st.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	id := replid.New()
	go r.run(context.Background(), history.Plan{Partial: true, ReplID: id, Cursor: cur})

	br := bufio.NewReader(peer)
	want := "+CONTINUE " + id + "\r\nhello"
	if got := readN(t, br, peer, len(want)); string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	st.Append([]byte(" world"))
	if got := readN(t, br, peer, 6); string(got) != " world" {
		t.Fatalf("then %q", got)
	}
	peer.Write([]byte("*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$2\r\n11\r\n*1\r\n$4\r\nPING\r\n"))
	redistest.WaitFor(t, 10*time.Second, "the ACK and the PING", func() bool { return r.ackOff.Load() == 11 && host.commands.Load() == 1 })
	if host.acked.Load() != 1 || *r.c.lastCmd.Load() != "replconf" {
		t.Fatalf("acked %d, last command %q", host.acked.Load(), *r.c.lastCmd.Load())
	}
	// Counted once each write returns, which may be after the peer read it.
	redistest.WaitFor(t, 10*time.Second, "the output bytes counted", func() bool { return n.out.Load() == int64(len(want)+6) })
	peer.Close()
	if got := <-host.ended; got != r {
		t.Fatal("another replica ended")
	}
	if reason := closeReason(r.reason.Load()); reason != closedByPeer || n.closes[closedByPeer].Load() != 1 {
		t.Fatalf("closed for %s, want %s counted once", reason, closedByPeer)
	}
}

// TestReplicaFullFromMemory: +FULLRESYNC, "$<len>" and a complete snapshot
// in memory, then the stream after it; the replica is online.
func TestReplicaFullFromMemory(t *testing.T) {
	r, host, _, peer := newTestReplica(t, replicaHandshake{capaEOF: true, capaPSync2: true})
	st := r.hist.Stream()
	st.Append([]byte("0123456789"))
	id := replid.New()
	sn := replbuf.NewSnapshot(id, 10, replbuf.NewPool(0), time.Now())
	rdb := linkRDB(t)
	sn.Append(rdb)
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	rd, err := sn.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := st.Attach(11)
	if err != nil {
		t.Fatal(err)
	}
	go r.run(context.Background(), history.Plan{ReplID: id, Offset: 10, Snapshot: sn, Reader: rd, Cursor: cur})
	br := bufio.NewReader(peer)
	want := "+FULLRESYNC " + id + " 10\r\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	if got := readN(t, br, peer, len(want)); string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	redistest.WaitFor(t, 10*time.Second, "online", func() bool { return r.State() == replicaOnline })
	st.Append([]byte("abc"))
	if got := readN(t, br, peer, 3); string(got) != "abc" {
		t.Fatalf("then %q", got)
	}
	peer.Close()
	<-host.ended
}

// TestReplicaAwaitFetchFails: a replica waiting for a fetch that gives up
// is closed as a failed full sync, the cause its write loop found first;
// the read loop, ended by that close, adds nothing.
func TestReplicaAwaitFetchFails(t *testing.T) {
	r, host, n, peer := newTestReplica(t, replicaHandshake{capaEOF: true})
	go io.Copy(io.Discard, peer)
	plan, f := r.hist.PlanFull() // nothing servable: it records a fetch
	go r.run(context.Background(), plan)
	r.hist.FetchGaveUp(f, errors.New("primary refused"))
	<-host.ended
	if reason := closeReason(r.reason.Load()); reason != closeFullSyncFailed {
		t.Fatalf("closed for %s, want %s", reason, closeFullSyncFailed)
	}
	var total int64
	for i := range n.closes {
		total += n.closes[i].Load()
	}
	if total != 1 {
		t.Fatalf("%d closes counted, want one", total)
	}
}

// TestReplicaClosedFromOutside: a reason recorded by another closer (the
// monitor, CLIENT KILL) is the one kept; both loops then end on the closed
// connection and add none.
func TestReplicaClosedFromOutside(t *testing.T) {
	r, host, n, peer := newTestReplica(t, replicaHandshake{})
	go io.Copy(io.Discard, peer)
	cur, err := r.hist.Stream().Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	go r.run(context.Background(), history.Plan{Partial: true, ReplID: replid.New(), Cursor: cur})
	redistest.WaitFor(t, 10*time.Second, "streaming", func() bool { return r.cursor.Load() != nil })
	r.close(closeKilled, nil)
	<-host.ended
	if reason := closeReason(r.reason.Load()); reason != closeKilled || n.closes[closeKilled].Load() != 1 {
		t.Fatalf("closed for %s, want %s counted once", reason, closeKilled)
	}
	if n.closes[closeServerShutdown].Load() != 0 || n.closes[closeWriteError].Load() != 0 || n.closes[closedByPeer].Load() != 0 {
		t.Fatal("a second reason was counted")
	}
}

// TestSendLogWaitsForAppend: a replica at the stream log's end waits for
// the follower's next append (no polling), and continues from memory once
// the log has reached it.
func TestSendLogWaitsForAppend(t *testing.T) {
	r, host, n, peer := newTestReplica(t, replicaHandshake{})
	id := replid.New()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, _, err := streamlog.Open(streamlog.Options{FS: streamlog.RootFS{Root: root}, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Reset(streamlog.Identity{ReplID: id, ReplID2: replid.None, SecondOffset: -1}, 0)
	data := bytes.Repeat([]byte("x"), 3000)
	l.Append(data[:1000], true) // offsets 1..1000; memory starts at 2001
	st := r.hist.Stream()
	st.Reset(2000)
	st.Append(data[2000:])
	rd, err := l.NewReader(1)
	if err != nil {
		t.Fatal(err)
	}
	w := &replicaWriter{r: r, conn: r.c.conn, timeout: 5 * time.Second, out: &n.out}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 2000)
		io.ReadFull(peer, b)
		got <- b
	}()
	type result struct {
		cur *replbuf.Cursor
		err error
	}
	done := make(chan result, 1)
	go func() {
		cur, err := w.sendLog(context.Background(), rd, st.Generation(), -1)
		done <- result{cur, err}
	}()
	redistest.WaitFor(t, 10*time.Second, "the log's first 1000 bytes sent", func() bool { return r.diskOff.Load() == 1001 })
	l.Append(data[1000:2000], true)
	host.appended.notify()
	res := <-done
	if res.err != nil {
		t.Fatalf("sendLog: %v", res.err)
	}
	defer res.cur.Close()
	if res.cur.Offset() != 2001 {
		t.Fatalf("back in memory at %d, want 2001", res.cur.Offset())
	}
	if b := <-got; !bytes.Equal(b, data[:2000]) {
		t.Fatal("bytes from the log differ")
	}
}

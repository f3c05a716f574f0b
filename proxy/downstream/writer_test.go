package downstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
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

// TestReplicaFullFromMemory: +FULLRESYNC, "$<len>" and a complete snapshot
// in memory, then the stream after it; the replica is online.
func TestReplicaFullFromMemory(t *testing.T) {
	e := newTestEnv(t)
	host, peer := e.host, e.peer
	st := e.hist.Stream()
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
	r := e.replica(Handshake{CapaEOF: true, CapaPSync2: true}, history.Plan{ReplID: id, Offset: 10, Snapshot: sn, Reader: rd, Cursor: cur})
	go r.Run(context.Background())
	br := bufio.NewReader(peer)
	want := "+FULLRESYNC " + id + " 10\r\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	if got := readN(t, br, peer, len(want)); string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	redistest.WaitFor(t, 10*time.Second, "online", func() bool { return r.State() == Online })
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
	e := newTestEnv(t)
	host, n := e.host, e.n
	go io.Copy(io.Discard, e.peer)
	plan, f := e.hist.PlanFull() // nothing servable: it records a fetch
	r := e.replica(Handshake{CapaEOF: true}, plan)
	go r.Run(context.Background())
	e.hist.FetchGaveUp(f, errors.New("primary refused"))
	<-host.ended
	if reason := r.Reason(); reason != CloseFullSyncFailed {
		t.Fatalf("closed for %s, want %s", reason, CloseFullSyncFailed)
	}
	var total int64
	for i := range n.closes {
		total += n.closes[i].Load()
	}
	if total != 1 {
		t.Fatalf("%d closes counted, want one", total)
	}
}

// TestSendLogWaitsForAppend: a replica at the stream log's end waits for
// the follower's next append (no polling), and continues from memory once
// the log has reached it.
func TestSendLogWaitsForAppend(t *testing.T) {
	e := newTestEnv(t)
	host, n, peer := e.host, e.n, e.peer
	r := e.replica(Handshake{}, history.Plan{})
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
	st := e.hist.Stream()
	st.Reset(2000)
	st.Append(data[2000:])
	rd, err := l.NewReader(1)
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{r: r, conn: r.conn, timeout: 5 * time.Second, out: &n.out}
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
	host.appended.Notify()
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

// linkRDB returns a small RDB file, a snapshot's payload.
func linkRDB(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package downstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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

// fullSyncPlan puts "0123456789" on e's stream and returns the plan of a
// full sync from a complete snapshot of payload at offset 10, with the
// stream after it: what PlanFull gives a replica when memory holds both.
func (e *testReplica) fullSyncPlan(t *testing.T, payload []byte) history.Plan {
	t.Helper()
	st := e.hist.Stream()
	st.Append([]byte("0123456789"))
	id := replid.New()
	sn := replbuf.NewSnapshot(id, 10, replbuf.NewPool(0), time.Now())
	sn.Append(payload)
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
	return history.Plan{ReplID: id, Offset: 10, Snapshot: sn, Reader: rd, Cursor: cur}
}

// TestReplicaFullFromMemory: +FULLRESYNC, "$<len>" and a complete snapshot
// in memory, then the stream after it; the replica is online.
func TestReplicaFullFromMemory(t *testing.T) {
	e := newTestEnv(t)
	host, peer := e.host, e.peer
	st := e.hist.Stream()
	rdb := linkRDB(t)
	plan := e.fullSyncPlan(t, rdb)
	id := plan.ReplID
	r := e.replica(Handshake{CapaEOF: true, CapaPSync2: true}, plan)
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

// TestReplicaFiltered: a replica that sent REPLCONF rdb-filter-only gets
// the RDB the primary made under that filter (the host's FetchFiltered),
// never a snapshot the proxy holds, then the stream from just after its
// offset, or nothing more when rdb-only; the primary's refusal reaches the
// replica as the primary sent it.
func TestReplicaFiltered(t *testing.T) {
	rdb := linkRDB(t)
	for _, tc := range []struct {
		name    string
		rdbOnly bool
		refuse  string
	}{
		{"replica", false, ""},
		{"rdb-only", true, ""},
		{"refused", true, "-ERR Unrecognized REPLCONF option: rdb-filter-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t)
			st := e.hist.Stream()
			st.Append([]byte("hello")) // offsets 1..5
			id := e.hist.Identity().ReplID
			var asked []string
			e.host.filtered = func(filter string) (*replbuf.Snapshot, error) {
				asked = append(asked, filter)
				if tc.refuse != "" {
					return nil, fmt.Errorf("side link: %w", refusal(tc.refuse))
				}
				sn := replbuf.NewSnapshot(id, 5, replbuf.NewPool(0), time.Now())
				if err := sn.Append(rdb); err != nil {
					return nil, err
				}
				return sn, sn.Complete()
			}
			hs := Handshake{CapaEOF: true, RDBOnly: tc.rdbOnly, Filtered: true, Filter: "functions"}
			n := e.n
			r := New(Config{ID: 1, Conn: e.conn, Reader: wire.NewCommandReader(e.conn, wire.Limits{}), Addr: "127.0.0.1:1",
				Handshake: hs, Legacy: true, Plan: e.hist.PlanFiltered(), Hist: e.hist, Host: e.host, Snapshots: e.host, Settings: e.host.settings(), Log: hclog.NewNullLogger(),
				Counters: Counters{OutputBytes: &n.out, Closes: &n.closes, Dropped: &n.dropped, ToDisk: &n.toDisk}})
			go r.Run(context.Background())

			br := bufio.NewReader(e.peer)
			e.peer.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := br.ReadString('\n')
			for err == nil && line == "\n" { // keepalives while the primary makes it
				line, err = br.ReadString('\n')
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.refuse != "" {
				if line != tc.refuse+"\r\n" {
					t.Fatalf("got %q, want the primary's refusal", line)
				}
				<-e.host.ended
				if r.Reason() != CloseFullSyncFailed {
					t.Fatalf("closed for %s", r.Reason())
				}
				return
			}
			if want := "$" + strconv.Itoa(len(rdb)) + "\r\n"; line != want {
				t.Fatalf("payload header %q, want %q", line, want)
			}
			if got := readN(t, br, e.peer, len(rdb)); !bytes.Equal(got, rdb) {
				t.Fatal("the payload is not the filtered RDB")
			}
			if len(asked) != 1 || asked[0] != "functions" {
				t.Fatalf("FetchFiltered asked for %q, want the replica's filter once", asked)
			}
			if tc.rdbOnly {
				<-e.host.ended
				if r.Reason() != CloseSnapshotSent {
					t.Fatalf("closed for %s, want %s", r.Reason(), CloseSnapshotSent)
				}
				return
			}
			st.Append([]byte(" world"))
			if got := readN(t, br, e.peer, 6); string(got) != " world" {
				t.Fatalf("then %q, want the stream after the filtered RDB's offset", got)
			}
		})
	}
}

// refusal is a primary's refusal as the upstream link reports it: a
// *wire.RefusedError, found through the errors that wrap it.
func refusal(reply string) error { return &wire.RefusedError{Command: "PSYNC", Reply: reply} }

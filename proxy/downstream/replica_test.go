package downstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// fakeHost is a Host for a replica alone: it counts what it is told.
type fakeHost struct {
	timeout  time.Duration
	window   int64
	live     bool
	appended LogSignal
	acked    atomic.Int64
	replconf atomic.Int64
	commands atomic.Int64
	ended    chan *Replica
	rate     atomic.Int64 // SyncRateLimit's answer
	// filtered answers FetchFiltered; nil refuses it.
	filtered func(filter string) (*replbuf.Snapshot, error)
}

func (h *fakeHost) LogLive() bool                { return h.live }
func (h *fakeHost) LogAppended() <-chan struct{} { return h.appended.Wait() }
func (h *fakeHost) LogCorrupt(error)             {}
func (h *fakeHost) Acked()                       { h.acked.Add(1) }
func (h *fakeHost) Replconf()                    { h.replconf.Add(1) }
func (h *fakeHost) Command(args [][]byte)        { h.commands.Add(1) }
func (h *fakeHost) Ended(r *Replica)             { h.ended <- r }

// The fake host is the replica's snapshot work too (Snapshots): it plans
// nothing, and is told nothing it needs to count.
func (h *fakeHost) PlanFull() (history.Plan, error) {
	return history.Plan{}, errors.New("no plan in this test")
}
func (h *fakeHost) PlanBackup(int64) (history.Plan, error) {
	return history.Plan{}, errors.New("no plan in this test")
}
func (h *fakeHost) FullSyncEnded(bool) {}

// settings are the fake host's timeout, rate and window as the settings
// in force, taken when a replica is made.
func (h *fakeHost) settings() *LiveSettings {
	set := &LiveSettings{}
	set.Store(Settings{ReplTimeout: h.timeout, SyncRateLimit: h.rate.Load(), MemoryWindow: h.window})
	return set
}

func (h *fakeHost) FetchFiltered(_ context.Context, filter string) (*replbuf.Snapshot, error) {
	if h.filtered == nil {
		return nil, errors.New("no filtered fetch in this test")
	}
	return h.filtered(filter)
}

// replicaCounts are a test replica's counters.
type replicaCounts struct {
	out, dropped, toDisk atomic.Int64
	closes               CloseCounts
}

// testReplica is what a replica under test is made of: one end of a pipe
// (conn; peer is the replica's peer), a fake host, counters and a history
// of its own.
type testReplica struct {
	conn, peer net.Conn
	host       *fakeHost
	n          *replicaCounts
	hist       *history.History
}

func newTestEnv(t *testing.T) *testReplica {
	t.Helper()
	conn, peer := net.Pipe()
	t.Cleanup(func() { conn.Close(); peer.Close() })
	hist := history.New(replbuf.NewPool(0), 1<<20, history.Counters{EvictedSnapshots: new(atomic.Int64), EvictedBytes: new(atomic.Int64)}, hclog.NewNullLogger())
	t.Cleanup(hist.Close)
	return &testReplica{conn: conn, peer: peer, hist: hist, n: &replicaCounts{},
		host: &fakeHost{timeout: 5 * time.Second, window: 1 << 20, ended: make(chan *Replica, 1)}}
}

// replica makes the replica, as PSYNC does, for plan.
func (e *testReplica) replica(hs Handshake, plan history.Plan) *Replica {
	n := e.n
	return New(Config{ID: 1, Conn: e.conn, Reader: wire.NewCommandReader(e.conn, wire.Limits{}), Addr: "127.0.0.1:1",
		Handshake: hs, Plan: plan, Hist: e.hist, Host: e.host, Snapshots: e.host, Settings: e.host.settings(), Log: hclog.NewNullLogger(),
		Counters: Counters{OutputBytes: &n.out, Closes: &n.closes, Dropped: &n.dropped, ToDisk: &n.toDisk}})
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
// own read loop, which tells the host of the REPLCONF (CLIENT LIST's last
// command).
func TestReplicaPartialFromMemory(t *testing.T) {
	e := newTestEnv(t)
	host, n, peer := e.host, e.n, e.peer
	st := e.hist.Stream()
	st.Append([]byte("hello"))
	cur, err := st.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	id := replid.New()
	r := e.replica(Handshake{CapaPSync2: true}, history.Plan{Partial: true, ReplID: id, Cursor: cur})
	go r.Run(context.Background())

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
	if host.acked.Load() != 1 || host.replconf.Load() != 1 {
		t.Fatalf("acked %d, REPLCONF told %d times", host.acked.Load(), host.replconf.Load())
	}
	// Counted once each write returns, which may be after the peer read it.
	redistest.WaitFor(t, 10*time.Second, "the output bytes counted", func() bool { return n.out.Load() == int64(len(want)+6) })
	peer.Close()
	if got := <-host.ended; got != r {
		t.Fatal("another replica ended")
	}
	if reason := r.Reason(); reason != ClosedByPeer || n.closes[ClosedByPeer].Load() != 1 {
		t.Fatalf("closed for %s, want %s counted once", reason, ClosedByPeer)
	}
}

// TestReplicaClosedFromOutside: a reason recorded by another closer (the
// monitor, CLIENT KILL) is the one kept; both loops then end on the closed
// connection and add none.
func TestReplicaClosedFromOutside(t *testing.T) {
	e := newTestEnv(t)
	host, n := e.host, e.n
	go io.Copy(io.Discard, e.peer)
	cur, err := e.hist.Stream().Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	r := e.replica(Handshake{}, history.Plan{Partial: true, ReplID: replid.New(), Cursor: cur})
	go r.Run(context.Background())
	redistest.WaitFor(t, 10*time.Second, "streaming", func() bool { return r.cursor.Load() != nil })
	r.Close(CloseKilled, nil)
	<-host.ended
	if reason := r.Reason(); reason != CloseKilled || n.closes[CloseKilled].Load() != 1 {
		t.Fatalf("closed for %s, want %s counted once", reason, CloseKilled)
	}
	if n.closes[CloseServerShutdown].Load() != 0 || n.closes[CloseWriteError].Load() != 0 || n.closes[ClosedByPeer].Load() != 0 {
		t.Fatal("a second reason was counted")
	}
}

// TestAckedIn: ack-policy replicas counts online replicas of the current
// epoch, not those in a full sync, rdb-only ones, closed ones or those
// planned before an upstream full resync or a new replid.
func TestAckedIn(t *testing.T) {
	add := func(epoch uint64, st State, rdbOnly bool, ack int64) *Replica {
		r := &Replica{epoch: epoch, hs: Handshake{RDBOnly: rdbOnly}, firstAck: make(chan struct{})}
		r.state.Store(int32(st))
		r.ackOff.Store(ack)
		r.ackTime.Store(ack * 10)
		return r
	}
	closed := add(2, Online, false, 400)
	closed.reason.Store(int32(CloseReplicaTimeout))
	var got []int64
	for _, r := range []*Replica{
		add(2, Online, false, 100),
		add(2, Online, false, 90),
		add(1, Online, false, 500),   // an older epoch: other offsets
		add(2, SendBulk, false, 0),   // in a full sync
		add(2, WaitBgsave, false, 0), // waiting for its snapshot
		add(2, Online, true, 300),    // rdb-only
		closed,
	} {
		if off, at, ok := r.AckedIn(2); ok {
			if at != off*10 {
				t.Errorf("the ACK of %d was at %d, want %d", off, at, off*10)
			}
			got = append(got, off)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{90, 100}) {
		t.Fatalf("counted in epoch 2: %v, want [90 100]", got)
	}
}

package upstream

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/replbuf"
)

// testHost is a Host on a bare stream, as the proxy's history would be
// before its first sync, and the link's Snapshots.
type testHost struct {
	st       *replbuf.Stream
	mu       sync.Mutex
	replID   string
	installs int
	// ack, when set, is AckOffset; nil acknowledges what was applied.
	ack func(applied int64) Ack
	// sink, when set, is what PayloadStarted returns; failed counts
	// PayloadFailed.
	sink   PayloadSink
	failed int
	// seed, when set, is Seed; nil answers as a host with no source.
	seed func(ctx context.Context, check func(string, int64) error) (Seed, bool, error)
}

func (h *testHost) Seed(ctx context.Context, check func(string, int64) error) (Seed, bool, error) {
	if h.seed == nil {
		return nil, false, nil
	}
	return h.seed(ctx, check)
}

// newTestHost returns a testHost on a new stream, closed when the test
// ends.
func newTestHost(t *testing.T) *testHost {
	t.Helper()
	h := &testHost{st: replbuf.NewStream(0, &replbuf.Config{})}
	t.Cleanup(func() { h.st.Close(nil) })
	return h
}

func (h *testHost) Stream() *replbuf.Stream { return h.st }
func (h *testHost) ResumeID() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.replID, h.replID != ""
}

func (h *testHost) Install(sn *replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Reset(sn.Offset())
	h.replID = sn.ReplID()
	h.installs++
	sn.Release()
}

func (h *testHost) ContinueAs(string) (string, int64, bool) { return "", -1, false }

func (h *testHost) Published() {}

func (h *testHost) PayloadStarted(*replbuf.Snapshot, int64) (PayloadSink, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sink, nil
}

func (h *testHost) PayloadFailed(*replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed++
}

func (h *testHost) AckOffset(applied int64) Ack {
	if h.ack != nil {
		return h.ack(applied)
	}
	return Ack{Off: applied}
}

// newTestLink returns a Link of a new testHost, configured with target,
// with a pool and counters of its own; opts gives the rest (its Log).
func newTestLink(t *testing.T, target Target, opts Options) (*Link, *testHost) {
	t.Helper()
	h := newTestHost(t)
	var c [12]atomic.Int64
	opts.Pool = replbuf.NewPool(0)
	opts.Counters = Counters{
		Connects: &c[0], FullSyncs: &c[1], PartialSyncs: &c[2], LinkFailures: &c[3], RDBBytes: &c[4],
		ChecksumFails: &c[5], StreamErrors: &c[6], ReplInputBytes: &c[7], FetchBytes: &c[8],
		QueryLimits: &c[9], LinkCorrupt: &c[10], RDBCheckFails: &c[11],
	}
	l := New(h, opts)
	// ReadCoalesce is on, so that every stream test runs through the
	// coalescer.
	l.Configure(Settings{Target: target, ListeningPort: 6380, ReadCoalesce: time.Millisecond})
	l.DeliverTo(h)
	return l, h
}

// testRDB returns testdata/rdb/small.rdb, a Redis 7.0 RDB with a valid
// CRC64 trailer.
func testRDB(t *testing.T) []byte {
	t.Helper()
	rdb, err := os.ReadFile("../../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	return rdb
}

// failWrites is a connection whose writes fail with errInjected once it has
// made ok of them.
type failWrites struct {
	net.Conn
	ok int32
	n  atomic.Int32
}

var errInjected = errors.New("injected write failure")

func (c *failWrites) Write(p []byte) (int, error) {
	if c.n.Add(1) > c.ok {
		return 0, errInjected
	}
	return c.Conn.Write(p)
}

// TestServeReturnsACKError: a session whose ACK cannot be sent ends with
// that error, the first of its two goroutines, not with the read error the
// closed connection then gives the stream loop.
func TestServeReturnsACKError(t *testing.T) {
	rdb := testRDB(t)
	l, h := newTestLink(t, Target{}, Options{})
	proxySide, primarySide := net.Pipe()
	defer primarySide.Close()
	f := redistest.NewFakeLink(primarySide)
	go func() { // the primary: answer the handshake, send a sized payload, then nothing
		f.Write("+PONG\r\n+OK\r\n+OK\r\n+FULLRESYNC " + linkReplID + " 1000\r\n$" + strconv.Itoa(len(rdb)) + "\r\n")
		f.WriteRaw(rdb)
	}()
	// Three writes go through: PING, the pipelined AUTH/REPLCONF batch, PSYNC.
	conn := &failWrites{Conn: proxySide, ok: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wasUp, err := l.Serve(ctx, conn, Target{Timeout: 5 * time.Second})
	if !wasUp || !errors.Is(err, errInjected) {
		t.Fatalf("Serve = (%v, %v), want (true, the ACK's write error)", wasUp, err)
	}
	if h.installs != 1 {
		t.Errorf("%d installs, want 1", h.installs)
	}
}

// TestLinkLost: a failed attempt signals Lost, losses merge into one
// pending signal, and Run goes on retrying meanwhile.
func TestLinkLost(t *testing.T) {
	closed := net.JoinHostPort("127.0.0.1", strconv.Itoa(redistest.FreePort(t)))
	l, _ := newTestLink(t, Target{Addr: closed, Timeout: time.Second}, Options{})
	select {
	case <-l.Lost():
		t.Fatal("Lost signalled before Run")
	default:
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for i := range 2 { // the first attempt, then a retry after the backoff
		select {
		case <-l.Lost():
		case <-time.After(5 * time.Second):
			t.Fatalf("no Lost signal for attempt %d to a closed port", i+1)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

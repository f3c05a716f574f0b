package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// writeTestLog leaves in dir a stream log holding n bytes after offset start
// under replID, as a previous run would.
func writeTestLog(t *testing.T, dir, replID string, start int64, n int) {
	t.Helper()
	sub := filepath.Join(dir, logDirName)
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(sub)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	l, _, err := streamlog.Open(streamlog.Options{FS: streamlog.RootFS{Root: root}, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Reset(streamlog.Identity{ReplID: replID, ReplID2: replid.None, SecondOffset: -1}, start); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(make([]byte, n), true); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPlanPartialLogOfOldGeneration: once an upstream full sync has started a
// new generation of the stream (the primary keeping its replid, at a later
// offset), the stream log still holds the old generation's bytes until its
// follower resets it. A replica asking for one of them must get a full
// sync, not a +CONTINUE from a log about to be reset under it, which would
// drop it with nothing to continue into (and count a partial resync that
// was never served).
func TestPlanPartialLogOfOldGeneration(t *testing.T) {
	a := replid.New()
	dir := t.TempDir()
	writeTestLog(t, dir, a, 100, 1000) // offsets 101..1100
	s := newTestProxy(t, proxySetup{idle: true, args: []string{"--dir", dir}}).Server
	h := s.hist

	plan, r := h.planPartial(a, 500, false)
	if r != partialAccepted || plan.fromLog == nil {
		t.Fatalf("before the full sync: %s (from the log %v), want a partial resync from the log", r, plan.fromLog != nil)
	}
	plan.fromLog.Close()

	// The primary forced a full sync and kept its replid: the stream starts
	// again at 5000, and the follower has not reset the log yet.
	sn := replbuf.NewSnapshot(a, 5000, h.pool, time.Now())
	if err := sn.Append(linkRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.install(sn)
	plan, r = h.planPartial(a, 500, false)
	if r == partialAccepted {
		var sent error
		if plan.fromLog != nil {
			h.disk.Reset(streamlog.Identity{ReplID: a, ReplID2: replid.None, SecondOffset: -1}, 5000) // the follower's next round
			_, sent = plan.fromLog.WriteTo(discard{}, 1<<20)
			plan.fromLog.Close()
		}
		if plan.cursor != nil {
			plan.cursor.Close()
		}
		t.Fatalf("after the full sync at 5000, offset 500 was accepted for a partial resync (from the log %v; its first read then: %v)",
			plan.fromLog != nil, sent)
	}
	if r != fullSyncOffsetOutOfRange {
		t.Fatalf("after the full sync at 5000, offset 500: %s, want offset_out_of_range", r)
	}
}

// discard is io.Discard without the io.ReaderFrom a log reader would use.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestPlanFullReturnsTheFetch: with nothing servable, planFull records the
// one fetch and returns it to be started, with no lock of the history held;
// a second plan joins it without starting another. A fetch the caller
// cannot start is undone: no longer in flight, and a replica that joined it
// meanwhile fails with errShuttingDown instead of waiting for ever; the
// next plan records a new one.
func TestPlanFullReturnsTheFetch(t *testing.T) {
	h := newHistory(replbuf.NewPool(0), 1<<20, &stats{}, hclog.NewNullLogger())
	t.Cleanup(h.close)
	h.mu.synced = true
	plan, start := h.planFull()
	if start == nil || plan.fetch != start {
		t.Fatalf("plan joined %p, start %p: want a new fetch to start", plan.fetch, start)
	}
	joined, again := h.planFull()
	if again != nil || joined.fetch != start {
		t.Fatalf("second plan: start %p, joined %p; want it to join the first", again, joined.fetch)
	}
	if n := h.fetchWaiters(start); n != 2 {
		t.Fatalf("%d waiters, want 2", n)
	}
	h.fetchNotStarted(start)
	h.leaveFetch(start)
	select {
	case <-start.ready:
	default:
		t.Fatal("a fetch that never started leaves its waiters waiting")
	}
	if !errors.Is(start.err, errShuttingDown) {
		t.Fatalf("waiters fail with %v, want errShuttingDown", start.err)
	}
	if _, next := h.planFull(); next == nil || next == start {
		t.Fatal("the undone fetch is still the one in flight")
	}
}

// TestEvictReturnsTheSpill: evict and persistNewest return the newest
// snapshot to write, recorded as being written (one write at a time);
// spillNotStarted hands it back.
func TestEvictReturnsTheSpill(t *testing.T) {
	h := newTestHistory(t, replid.New(), 100)
	sn := h.newest()
	id := snapshotID(sn)
	if got := h.evict(id); got != sn {
		t.Fatalf("evict returned %p, want the newest %p", got, sn)
	}
	if h.evict(id) != nil || h.persistNewest() != nil {
		t.Fatal("a second write started while one is recorded")
	}
	h.spillNotStarted(sn)
	if got := h.persistNewest(); got != sn {
		t.Fatalf("persistNewest returned %p after the spill was handed back, want %p", got, sn)
	}
	h.spillNotStarted(sn)
	h.mu.Lock()
	spilling := h.mu.spilling
	h.mu.Unlock()
	if spilling != nil {
		t.Fatal("the write handed back is still recorded")
	}
}

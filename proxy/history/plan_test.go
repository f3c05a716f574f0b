package history

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// openTestLog returns a stream log in dir holding n bytes after offset
// start under replID, open, as New finds one a previous run left.
func openTestLog(t *testing.T, dir, replID string, start int64, n int) *streamlog.Log {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	l, _, err := streamlog.Open(streamlog.Options{FS: streamlog.RootFS{Root: root}, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Reset(streamlog.Identity{ReplID: replID, ReplID2: replid.None, SecondOffset: -1}, start); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(make([]byte, n), true); err != nil {
		t.Fatal(err)
	}
	return l
}

// recoveredHistory returns a history recovered from l, as the proxy's New
// makes one: the stream starts at the log's end under its identity, and
// the log follows that generation.
func recoveredHistory(t *testing.T, l *streamlog.Log) *History {
	t.Helper()
	h := New(replbuf.NewPool(0), 1<<20, testCounters(), hclog.NewNullLogger())
	t.Cleanup(h.Close)
	h.SetLog(l)
	_, last := l.Bounds()
	h.RecoverFrom(l.Identity(), last)
	if !h.LogFollows(h.Stream().Generation()) {
		t.Fatal("the log does not follow the recovered generation")
	}
	return h
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
	h := recoveredHistory(t, openTestLog(t, t.TempDir(), a, 100, 1000)) // offsets 101..1100

	plan, r := h.PlanPartial(a, 500, false)
	if r != PartialAccepted || plan.FromLog == nil {
		t.Fatalf("before the full sync: %s (from the log %v), want a partial resync from the log", r, plan.FromLog != nil)
	}
	plan.FromLog.Close()

	// The primary forced a full sync and kept its replid: the stream starts
	// again at 5000, and the follower has not reset the log yet.
	sn := replbuf.NewSnapshot(a, 5000, h.pool, time.Now())
	if err := sn.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.Install(sn)
	plan, r = h.PlanPartial(a, 500, false)
	if r == PartialAccepted {
		var sent error
		if plan.FromLog != nil {
			h.disk.Reset(streamlog.Identity{ReplID: a, ReplID2: replid.None, SecondOffset: -1}, 5000) // the follower's next round
			_, sent = plan.FromLog.WriteTo(discard{}, 1<<20)
			plan.FromLog.Close()
		}
		if plan.Cursor != nil {
			plan.Cursor.Close()
		}
		t.Fatalf("after the full sync at 5000, offset 500 was accepted for a partial resync (from the log %v; its first read then: %v)",
			plan.FromLog != nil, sent)
	}
	if r != FullSyncOffsetOutOfRange {
		t.Fatalf("after the full sync at 5000, offset 500: %s, want offset_out_of_range", r)
	}
}

// discard is io.Discard without the io.ReaderFrom a log reader would use.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestPlanFullReturnsTheFetch: with nothing servable, PlanFull records the
// one fetch and returns it to be started, with no lock of the history held;
// a second plan joins it without starting another. A fetch the caller
// cannot start is undone: no longer in flight, and a replica that joined it
// meanwhile fails with ErrShuttingDown instead of waiting for ever; the
// next plan records a new one.
func TestPlanFullReturnsTheFetch(t *testing.T) {
	h := New(replbuf.NewPool(0), 1<<20, testCounters(), hclog.NewNullLogger())
	t.Cleanup(h.Close)
	h.mu.synced = true
	plan, start := h.PlanFull()
	if start == nil || plan.Fetch != start {
		t.Fatalf("plan joined %p, start %p: want a new fetch to start", plan.Fetch, start)
	}
	joined, again := h.PlanFull()
	if again != nil || joined.Fetch != start {
		t.Fatalf("second plan: start %p, joined %p; want it to join the first", again, joined.Fetch)
	}
	if n := h.FetchWaiters(start); n != 2 {
		t.Fatalf("%d waiters, want 2", n)
	}
	h.FetchNotStarted(start)
	h.LeaveFetch(start)
	select {
	case <-start.ready:
	default:
		t.Fatal("a fetch that never started leaves its waiters waiting")
	}
	if !errors.Is(start.err, ErrShuttingDown) {
		t.Fatalf("waiters fail with %v, want ErrShuttingDown", start.err)
	}
	if _, next := h.PlanFull(); next == nil || next == start {
		t.Fatal("the undone fetch is still the one in flight")
	}
}

// TestLogReaderAtCarriesGeneration: a replica whose cursor is of a stream
// generation the stream has left (an upstream full sync that kept the
// replid, before the disconnection reaches the replica) is never moved to
// the stream log, even once the log follows the new generation over the
// same offsets: those are other bytes under the same name. The log serves
// the position of a cursor of the generation it follows.
func TestLogReaderAtCarriesGeneration(t *testing.T) {
	a := replid.New()
	h := recoveredHistory(t, openTestLog(t, t.TempDir(), a, 100, 1000)) // offsets 101..1100
	old := h.Stream().Generation()
	if rd := h.LogReaderAt(old, 500); rd == nil {
		t.Fatal("the log of the stream's own generation refused offset 500")
	} else {
		rd.Close()
	}

	// The primary forced a full sync at 4000 and kept its replid; the
	// follower has reset the log for the new generation and appended to it.
	sn := replbuf.NewSnapshot(a, 4000, h.pool, time.Now())
	if err := sn.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.Install(sn)
	gen := h.Stream().Generation()
	if err := h.disk.Reset(streamlog.Identity{ReplID: a, ReplID2: replid.None, SecondOffset: -1}, 4000); err != nil {
		t.Fatal(err)
	}
	if err := h.disk.Append(make([]byte, 2000), true); err != nil { // 4001..6000
		t.Fatal(err)
	}
	if !h.LogFollows(gen) {
		t.Fatal("logFollows refused the stream's generation")
	}

	// A cursor of the old generation at 5000: its replica got the old
	// generation's bytes up to 4999 and must not get the new one's from
	// 5000 on.
	if rd := h.LogReaderAt(old, 5000); rd != nil {
		rd.Close()
		t.Fatal("a cursor of the generation the stream left was handed the new generation's log")
	}
	if rd := h.LogReaderAt(gen, 5000); rd == nil {
		t.Fatal("a cursor of the log's own generation was refused")
	} else {
		rd.Close()
	}
}

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

// TestPlanBackup: a backup (rdb-only) is served the held snapshot only
// within maxSince bytes of the stream's end; further behind it records a
// fetch of its own (FetchBackup), where a replica's full sync would take the
// held snapshot. It joins a fetch in flight that has not started (its
// snapshot will be newer than the stream's end now), but not one that
// started from further behind than maxSince.
func TestPlanBackup(t *testing.T) {
	a := replid.New()
	h := newTestHistory(t, a, 1000)
	if off, ok := h.HeldOffset(); !ok || off != 1000 {
		t.Fatalf("HeldOffset() = %d, %v; want 1000, true", off, ok)
	}
	serve := func(plan Plan) {
		t.Helper()
		if plan.Snapshot == nil || plan.Offset != 1000 || plan.Fetch != nil {
			t.Fatalf("plan %+v: want the held snapshot at 1000", plan)
		}
		plan.Reader.Close()
		plan.Cursor.Close()
	}
	plan, start, err := h.PlanBackup(0)
	if err != nil || start != nil {
		t.Fatalf("no stream since: start %p, err %v", start, err)
	}
	serve(plan)

	if err := h.st.Append(make([]byte, 100)); err != nil { // offsets 1001..1100
		t.Fatal(err)
	}
	plan, start, err = h.PlanBackup(100)
	if err != nil || start != nil {
		t.Fatalf("100 bytes since, 100 allowed: start %p, err %v", start, err)
	}
	serve(plan)
	plan, start, err = h.PlanBackup(99)
	if err != nil || start == nil || plan.Fetch != start || start.Reason() != FetchBackup {
		t.Fatalf("100 bytes since, 99 allowed: plan %+v, start %p, err %v; want a backup fetch", plan, start, err)
	}
	full, again := h.PlanFull()
	if again != nil {
		t.Fatal("a replica's full sync started a second fetch")
	}
	serve(full) // replicas still get the held snapshot and the stream after it

	// A second backup joins the fetch while it has not started.
	if joined, next, err := h.PlanBackup(0); err != nil || next != nil || joined.Fetch != start {
		t.Fatalf("second backup: joined %p, start %p, err %v; want it to join", joined.Fetch, next, err)
	}
	// Once started from offset 1050, 50 bytes behind the stream's end (a
	// payload followed in memory: the newest snapshot from its start), a
	// backup allowing 50 follows it, one allowing less is refused.
	sn := replbuf.NewSnapshot(a, 1050, h.pool, time.Now())
	if err := h.FetchStarted(start, sn, nil); err != nil {
		t.Fatal(err)
	}
	if plan, next, err := h.PlanBackup(50); err != nil || next != nil || plan.Snapshot != sn {
		t.Fatalf("started 50 behind, 50 allowed: plan %+v, start %p, err %v; want the fetched snapshot", plan, next, err)
	} else {
		plan.Reader.Close()
		plan.Cursor.Close()
	}
	if _, next, err := h.PlanBackup(49); !errors.Is(err, ErrBackupFetchBehind) || next != nil {
		t.Fatalf("started 50 behind, 49 allowed: start %p, err %v; want ErrBackupFetchBehind", next, err)
	}
	if n := h.FetchWaiters(start); n != 2 {
		t.Fatalf("%d waiters, want the 2 backups that joined (the refused one is not one)", n)
	}
}

package history

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// testCounters returns counters of the test's own.
func testCounters() Counters {
	return Counters{EvictedSnapshots: new(atomic.Int64), EvictedBytes: new(atomic.Int64)}
}

// testRDB is a small RDB, as a primary sends it.
func testRDB(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTestHistory returns a history with a complete snapshot installed at
// offset under replID, as after an upstream full sync.
func newTestHistory(t testing.TB, replID string, offset int64) *History {
	t.Helper()
	pool := replbuf.NewPool(0)
	h := New(pool, 1<<20, testCounters(), hclog.NewNullLogger())
	t.Cleanup(h.Close)
	sn := replbuf.NewSnapshot(replID, offset, pool, time.Now())
	if err := sn.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	if c := h.Install(sn); c != (Change{Epoch: 1, Kind: NewGeneration}) {
		t.Fatalf("install made %+v, want a new generation in epoch 1", c)
	}
	return h
}

// TestHistoryReplIDMatch: the one replid-match rule, through every plan that
// uses it. After +CONTINUE with a new replid, the old one still serves a
// partial resync up to second_repl_offset and no further; snapshots follow
// the same rule at their offset+1.
func TestHistoryReplIDMatch(t *testing.T) {
	a, b := replid.New(), replid.New()
	h := newTestHistory(t, a, 100)
	if _, r := h.PlanPartial(replid.New(), 101, false); r != FullSyncReplIDMismatch {
		t.Fatalf("a replid that is not ours: %s, want replid_mismatch", r)
	}
	if _, r := h.PlanPartial(a, 101+maxAhead+1, false); r != FullSyncOffsetOutOfRange {
		t.Fatalf("further than maxAhead past the end of the stream: %s, want offset_out_of_range", r)
	}
	oldID, second, c := h.ContinueAs(b)
	if oldID != a || second != 101 || c != (Change{Epoch: 2, Kind: NewReplID}) {
		t.Fatalf("continueAs = %s %d %+v, want %s 101 and a new replid in epoch 2", oldID, second, c, a)
	}
	if _, _, c := h.ContinueAs(b); c.Kind != NoChange {
		t.Fatalf("the same replid again counted as a change: %+v", c)
	}
	if err := h.Stream().Append(make([]byte, 10)); err != nil { // offset 110
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		replID string
		off    int64
		want   FullSyncReason
	}{
		{"replid2 at second_repl_offset", a, 101, PartialAccepted},
		{"replid2 past second_repl_offset", a, 102, FullSyncReplIDMismatch},
		{"replid in the backlog", b, 105, PartialAccepted},
		{"replid one past the end", b, 111, PartialAccepted},
		{"replid ahead of the end: waits for the stream", b, 112, PartialAccepted},
		{"replid maxAhead past the end", b, 111 + maxAhead, PartialAccepted},
		{"replid further past the end", b, 112 + maxAhead, FullSyncOffsetOutOfRange},
		{"question mark", "?", -1, FullSyncRequested},
		{"negative offset", b, -5, FullSyncRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, r := h.PlanPartial(tc.replID, tc.off, false)
			if r != tc.want {
				t.Fatalf("planPartial = %s, want %s", r, tc.want)
			}
			if r != PartialAccepted {
				return
			}
			defer plan.Cursor.Close()
			if plan.ReplID != b || plan.Epoch != 2 {
				t.Fatalf("plan replid %s epoch %d, want %s 2", plan.ReplID, plan.Epoch, b)
			}
		})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if sn := h.mu.snapshot; !h.servableLocked(sn) {
		t.Fatalf("the snapshot at %d (replid2 up to %d) is not servable", sn.Offset(), h.mu.secondOffset)
	}
	if h.matchesLocked(a, 102) || !h.matchesLocked(a, 101) {
		t.Fatal("matchesLocked disagrees with planPartial at second_repl_offset")
	}
}

// TestPlanPartialNoHistory: before its first sync with a primary the proxy
// has nothing to continue, whatever the replica asks for.
func TestPlanPartialNoHistory(t *testing.T) {
	h := New(replbuf.NewPool(0), 1<<20, testCounters(), hclog.NewNullLogger())
	t.Cleanup(h.Close)
	if _, r := h.PlanPartial(replid.New(), 1, false); r != FullSyncNoHistory {
		t.Fatalf("planPartial before any sync = %s, want no_history", r)
	}
	if _, r := h.PlanPartial("?", -1, true); r != FullSyncRequested {
		t.Fatalf("SYNC before any sync = %s, want requested", r)
	}
}

package proxy

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// newTestHistory returns a history with a complete snapshot installed at
// offset under replID, as after an upstream full sync.
func newTestHistory(t testing.TB, replID string, offset int64) *history {
	t.Helper()
	pool := replbuf.NewPool(0)
	h := newHistory(pool, 1<<20, &stats{}, hclog.NewNullLogger())
	t.Cleanup(h.close)
	sn := replbuf.NewSnapshot(replID, offset, pool, time.Now())
	if err := sn.Append(linkRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	if epoch := h.install(sn); epoch != 1 {
		t.Fatalf("install made epoch %d, want 1", epoch)
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
	if _, r := h.planPartial(replid.New(), 101, false); r != fullSyncReplIDMismatch {
		t.Fatalf("a replid that is not ours: %s, want replid_mismatch", r)
	}
	if _, r := h.planPartial(a, 102, false); r != fullSyncOffsetOutOfRange {
		t.Fatalf("past the end of the stream: %s, want offset_out_of_range", r)
	}
	oldID, second, epoch, changed := h.continueAs(b)
	if !changed || oldID != a || second != 101 || epoch != 2 {
		t.Fatalf("continueAs = %s %d %d %v, want %s 101 2 true", oldID, second, epoch, changed, a)
	}
	if _, _, _, changed := h.continueAs(b); changed {
		t.Fatal("the same replid again counted as a change")
	}
	if err := h.stream().Append(make([]byte, 10)); err != nil { // offset 110
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		replID string
		off    int64
		want   fullSyncReason
	}{
		{"replid2 at second_repl_offset", a, 101, partialAccepted},
		{"replid2 past second_repl_offset", a, 102, fullSyncReplIDMismatch},
		{"replid in the backlog", b, 105, partialAccepted},
		{"replid one past the end", b, 111, partialAccepted},
		{"replid past the end", b, 112, fullSyncOffsetOutOfRange},
		{"question mark", "?", -1, fullSyncRequested},
		{"negative offset", b, -5, fullSyncRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, r := h.planPartial(tc.replID, tc.off, false)
			if r != tc.want {
				t.Fatalf("planPartial = %s, want %s", r, tc.want)
			}
			if r != partialAccepted {
				return
			}
			defer plan.cursor.Close()
			if plan.replID != b || plan.epoch != 2 {
				t.Fatalf("plan replid %s epoch %d, want %s 2", plan.replID, plan.epoch, b)
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

// TestDisconnectReplicasByEpoch: after an identity change, the replicas
// planned before it are disconnected and one planned since (between the
// change and the disconnection, which no longer share a lock) keeps its
// connection.
func TestDisconnectReplicasByEpoch(t *testing.T) {
	s := linkNewServer(t, hclog.Off)
	register := func(epoch uint64) *replica {
		conn, _ := linkPipe(t)
		r := &replica{c: &client{conn: conn, srv: s}, count: s.replicaCounters(), epoch: epoch, log: hclog.NewNullLogger(), firstAck: make(chan struct{})}
		s.clients.addReplica(r)
		return r
	}
	before, since := register(1), register(2)
	s.disconnectReplicas(closeReplIDChanged, 2)
	if !before.closed() {
		t.Error("a replica planned before the change kept its connection")
	}
	if since.closed() {
		t.Error("a replica planned since the change was disconnected")
	}
}

// TestPlanPartialNoHistory: before its first sync with a primary the proxy
// has nothing to continue, whatever the replica asks for.
func TestPlanPartialNoHistory(t *testing.T) {
	h := newHistory(replbuf.NewPool(0), 1<<20, &stats{}, hclog.NewNullLogger())
	t.Cleanup(h.close)
	if _, r := h.planPartial(replid.New(), 1, false); r != fullSyncNoHistory {
		t.Fatalf("planPartial before any sync = %s, want no_history", r)
	}
	if _, r := h.planPartial("?", -1, true); r != fullSyncRequested {
		t.Fatalf("SYNC before any sync = %s, want requested", r)
	}
}

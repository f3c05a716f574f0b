package history

import (
	"testing"

	"github.com/replproxy/replproxy/replid"
)

// TestEvictReturnsTheSpill: evict and PersistNewest return the newest
// snapshot to write, recorded as being written (one write at a time);
// SpillNotStarted hands it back.
func TestEvictReturnsTheSpill(t *testing.T) {
	h := newTestHistory(t, replid.New(), 100)
	sn := h.Newest()
	id := SnapshotID(sn)
	if got := h.Evict(id); got != sn {
		t.Fatalf("evict returned %p, want the newest %p", got, sn)
	}
	if h.Evict(id) != nil || h.PersistNewest() != nil {
		t.Fatal("a second write started while one is recorded")
	}
	h.SpillNotStarted(sn)
	if got := h.PersistNewest(); got != sn {
		t.Fatalf("PersistNewest returned %p after the spill was handed back, want %p", got, sn)
	}
	h.SpillNotStarted(sn)
	h.mu.Lock()
	spilling := h.mu.spilling
	h.mu.Unlock()
	if spilling != nil {
		t.Fatal("the write handed back is still recorded")
	}
}

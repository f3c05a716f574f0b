package history

import (
	"errors"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// memPayload is a payload that may have gone to dir and stayed in memory
// (dir could not take it), as the proxy's payload rule leaves one.
type memPayload struct{}

func (memPayload) Spilled() *snapfile.File { return nil }
func (memPayload) Evicted() bool           { return false }

// TestFetchedPayloadAfterUpstreamSync: a fetched payload that may go to dir
// becomes the newest snapshot only when it ends; if an upstream full sync
// started a new generation meanwhile, under the same replid at a later
// offset, the fetch's waiters are refused and the upstream sync's snapshot
// stays the newest.
func TestFetchedPayloadAfterUpstreamSync(t *testing.T) {
	a := replid.New()
	h := newTestHistory(t, a, 100)
	f := &Fetch{ready: make(chan struct{}), reason: FetchReplicaNeeded}
	h.mu.Lock()
	h.mu.fetch = f
	h.mu.Unlock()
	fetched := replbuf.NewSnapshot(a, 100, h.pool, time.Now())
	if err := h.FetchStarted(f, fetched, memPayload{}); err != nil {
		t.Fatal(err)
	}
	if err := fetched.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := fetched.Complete(); err != nil {
		t.Fatal(err)
	}
	later := replbuf.NewSnapshot(a, 5000, h.pool, time.Now())
	if err := later.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := later.Complete(); err != nil {
		t.Fatal(err)
	}
	h.Install(later)
	h.FetchEnded(f, nil)
	<-f.done
	if !errors.Is(f.doneErr, errFetchedStale) {
		t.Errorf("the fetch's waiters told %v, want %v", f.doneErr, errFetchedStale)
	}
	if got := h.Newest(); got != later {
		t.Errorf("newest snapshot at offset %d, want the upstream sync's at 5000", got.Offset())
	}
}

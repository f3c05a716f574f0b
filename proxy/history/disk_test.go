package history

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// TestRefetchRule: the background fetch starts only for a snapshot on disk
// that is the newest, with no fetch in flight, once the stream since it
// reaches the limit or the log or the replid no longer continue it.
func TestRefetchRule(t *testing.T) {
	const off, limit = 1000, 3 << 18
	cases := []struct {
		name        string
		setup       func(h *History)
		first, last int64
		started     bool
	}{
		{"young", nil, 1, off + limit - 1, false},
		{"at the limit", nil, 1, off + limit, true},
		{"log no longer covers it", nil, off + 2, off + 10, true},
		{"replid moved on", func(h *History) { h.mu.replID = replid.New() }, 1, off + 10, true},
		{"fetch in flight", func(h *History) { h.mu.fetch = &Fetch{} }, 1, off + limit, false},
		{"newer snapshot in memory", func(h *History) {
			h.mu.snapshot = replbuf.NewSnapshot(h.mu.replID, off+5, h.pool, time.Now())
		}, 1, off + limit, false},
		{"nothing on disk", func(h *History) { h.mu.spilled = nil }, 1, off + limit, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := New(replbuf.NewPool(0), 1<<20, testCounters(), hclog.NewNullLogger())
			h.mu.synced = true
			h.mu.spilled = &snapfile.File{ReplID: h.mu.replID, Offset: off}
			if tc.setup != nil {
				tc.setup(h)
			}
			f, got := h.RefetchSpilled(tc.first, tc.last, limit)
			if (got != nil) != tc.started || (f != nil) != tc.started {
				t.Fatalf("started %v (fetch %v), want %v", got != nil, f != nil, tc.started)
			}
			if tc.started && h.mu.fetch != f {
				t.Fatal("a started fetch is not the one in flight")
			}
		})
	}
}

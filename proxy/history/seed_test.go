package history

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// TestBeginAt: a seed starts a new generation at the source's position;
// the stream after it is pinned until the seed ends, however far the
// backlog moves on, so that its snapshot is servable when it arrives; a
// replica that needs a full sync meanwhile joins the seed's fetch.
func TestBeginAt(t *testing.T) {
	pool := replbuf.NewPool(0)
	h := New(pool, 64<<10, testCounters(), hclog.NewNullLogger())
	t.Cleanup(h.Close)
	id := replid.New()
	f := NewSeed()
	epoch := h.Epoch()
	if got := h.BeginAt(f, id, 5000); got.Epoch == epoch || got.Kind != NewGeneration {
		t.Fatalf("BeginAt made %+v, want a new generation past epoch %d", got, epoch)
	}
	if got := h.Identity(); got.ReplID != id || !got.History || h.Stream().Offset() != 5000 {
		t.Fatalf("identity %+v at %d, want %s at 5000", got, h.Stream().Offset(), id)
	}
	plan, start := h.PlanFull()
	if start != nil || plan.Fetch != f {
		t.Fatalf("a full sync meanwhile planned %+v (new fetch %v), want it to join the seed", plan, start != nil)
	}
	h.LeaveFetch(f)
	// Four times the backlog goes by before the payload arrives.
	st := h.Stream()
	chunk := make([]byte, 16<<10)
	for range 16 {
		if err := st.Append(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if first, _ := st.Backlog(); first != 5001 {
		t.Fatalf("the backlog starts at %d while the seed arrives, want 5001 (pinned)", first)
	}
	sn := replbuf.NewSnapshot(id, 5000, pool, time.Now())
	if err := h.FetchStarted(f, sn, nil); err != nil {
		t.Fatal(err)
	}
	if err := sn.Append(testRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	h.FetchEnded(f, nil)
	if off, ok := h.HeldOffset(); !ok || off != 5000 {
		t.Errorf("held snapshot at %d (%v), want the seed's at 5000", off, ok)
	}
	if first, _ := st.Backlog(); first == 5001 {
		t.Error("the stream is still pinned after the seed ended")
	}
}

// TestContinues: a source's snapshot continues the history when its replid
// is the stream's and the bytes after it are held or yet to come, within
// maxAhead of its end.
func TestContinues(t *testing.T) {
	id := replid.New()
	h := newTestHistory(t, id, 1000)
	st := h.Stream()
	if err := st.Append(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		replID string
		offset int64
		want   string
	}{
		{id, 1000, ""},
		{id, 1050, ""},
		{id, 5000, ""}, // ahead: the stream reaches it
		{id, 1100 + maxAhead, ""},
		{id, 1101 + maxAhead, "ahead"}, // further: another history's
		{id, 998, "behind"},
		{replid.New(), 1050, "replid"},
	} {
		err := h.Continues(tc.replID, tc.offset)
		var nc *replid.NotContinued
		got := ""
		if errors.As(err, &nc) {
			got = nc.Reason
		}
		if got != tc.want {
			t.Errorf("Continues(%s, %d) = %v, want %q", tc.replID[:6], tc.offset, err, tc.want)
		}
	}
}

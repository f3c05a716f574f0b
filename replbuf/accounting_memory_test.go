package replbuf

import (
	"runtime"
	"testing"
)

// TestMemoryAccountingMatchesHeap retains 256 MiB of stream (all of it pinned
// by a slow cursor, beyond a 1 MiB backlog) and compares the Go heap's growth,
// after a GC, with what the stream and pool account for. The bound is stated
// here: the difference must stay under 64 KiB, about 0.025% of what is held
// (the stream, pool and cursor structs themselves are a few KiB).
func TestMemoryAccountingMatchesHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("retains 256 MiB")
	}
	const retained = 256 << 20
	const bound = 64 << 10
	chunk := pattern(1, 100_000) // allocated before the baseline

	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()

	pool := NewPool(0)
	s := NewStream(0, &Config{Pool: pool}) // default 1 MiB backlog
	c, err := s.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	for s.Offset() < retained {
		if err := s.Append(chunk); err != nil {
			t.Fatal(err)
		}
	}
	grown := heap() - before
	u := s.Usage()
	accounted := u.Allocated() + pool.Stats().FreeBytes
	diff := grown - accounted
	t.Logf("heap grew %d bytes; accounted %d (blocks %d, index %d, free list %d); difference %d",
		grown, accounted, u.Total, u.Index, pool.Stats().FreeBytes, diff)
	if diff < -bound || diff > bound {
		t.Fatalf("heap growth and accounting differ by %d bytes, bound %d", diff, bound)
	}
	if u.Replicas != u.Total-DefaultBacklogSize || u.NotCountedForEvict <= u.Total-DefaultBacklogSize-100*BlockOverhead {
		t.Fatalf("a slow cursor's 256 MiB not reported as replica memory: %+v", u)
	}
	if got := c.OutputBufferSize(); got != u.Total {
		t.Fatalf("cursor output buffer %d, stream total %d", got, u.Total)
	}

	// Releasing the cursor gives everything beyond the backlog back; the heap
	// shrinks with the accounting.
	c.Close()
	shrunk := heap() - before
	u = s.Usage()
	accounted = u.Allocated() + pool.Stats().FreeBytes
	t.Logf("after close: heap %d above baseline; accounted %d", shrunk, accounted)
	if d := shrunk - accounted; d < -bound || d > bound {
		t.Fatalf("after close heap and accounting differ by %d bytes", d)
	}
	if u.Total > DefaultBacklogSize+2*BlockFootprint+BlockFootprint {
		t.Fatalf("backlog did not shrink back: %+v", u)
	}
	runtime.KeepAlive(s)
	runtime.KeepAlive(chunk)
}

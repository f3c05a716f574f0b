package streamlog

import (
	"bytes"
	"os"
	"slices"
	"syscall"
	"testing"
)

// TestAppendBuffers: slices of any size (empty ones too) appended as one
// call land as their concatenation, cut into records that cross neither
// RecordMax nor a segment's size, with the boundary on the last only; the
// caller's slices are left as they were, and recovery keeps it all.
func TestAppendBuffers(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30, SegmentBytes: 600 << 10}
	l, _ := openDir(t, dir, opts)
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	data := stream(3<<20+123, 21)
	sizes := []int{0, 1, 16 << 10, 0, 5000, RecordMax, 16 << 10, 3, RecordMax + 7, 0, 100 << 10}
	var want []byte
	for p, k := data, 0; len(p) > 0; k++ {
		var bufs [][]byte
		for _, n := range sizes[k%len(sizes):] {
			n = min(n, len(p))
			bufs = append(bufs, p[:n])
			p = p[n:]
		}
		saved := slices.Clone(bufs)
		if err := l.AppendBuffers(bufs, true); err != nil {
			t.Fatal(err)
		}
		for i := range bufs {
			if len(bufs[i]) != len(saved[i]) || (len(bufs[i]) > 0 && &bufs[i][0] != &saved[i][0]) {
				t.Fatalf("AppendBuffers changed slice %d", i)
			}
		}
		for _, b := range saved {
			want = append(want, b...)
		}
	}
	if got := readAll(t, l, 1); !bytes.Equal(got, want) {
		t.Fatal("bytes read differ from the slices appended")
	}
	l.mu.RLock()
	for _, s := range l.segs {
		if s.size() > opts.SegmentBytes {
			t.Errorf("segment at %d holds %d bytes, more than SegmentBytes", s.first, s.size())
		}
		for j := range s.ends {
			if n := s.ends[j] - s.recordStart(j); n > RecordMax {
				t.Errorf("segment at %d, record %d: %d bytes", s.first, j, n)
			}
		}
	}
	segs := len(l.segs)
	l.mu.RUnlock()
	if segs < 2 {
		t.Fatalf("%d segments: the test wants records cut at a segment's end", segs)
	}
	l.Close()
	l2, rec := openDir(t, dir, opts)
	if rec.Problem != "" || rec.Cut != 0 || rec.Unfinished != 0 || rec.Verified != int64(len(want)) {
		t.Fatalf("recovery %+v, want all %d bytes verified", rec, len(want))
	}
	if got := readAll(t, l2, 1); !bytes.Equal(got, want) {
		t.Fatal("bytes recovered differ")
	}
}

// TestAppendBuffersBoundary: only the record that ends the call carries the
// boundary, so recovery cuts a call appended without one back to the last
// call that had one.
func TestAppendBuffersBoundary(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30}
	l, _ := openDir(t, dir, opts)
	l.Reset(testID, 0)
	first := stream(700<<10, 22)
	if err := l.AppendBuffers([][]byte{first[:300<<10], first[300<<10:]}, true); err != nil {
		t.Fatal(err)
	}
	second := stream(600<<10, 23)
	if err := l.AppendBuffers([][]byte{second[:100], second[100:]}, false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2, rec := openDir(t, dir, opts)
	if _, last := l2.Bounds(); last != int64(len(first)) || rec.Unfinished != int64(len(second)) {
		t.Fatalf("recovered to %d (%+v), want %d with %d unfinished", last, rec, len(first), len(second))
	}
}

// TestAppendBuffersAllocs: appending a batch of blocks allocates nothing
// (between segment rolls), as the follower's fan-in should.
func TestAppendBuffersAllocs(t *testing.T) {
	l, _ := openDir(t, t.TempDir(), Options{MaxBytes: 1 << 30, SegmentBytes: 1 << 30})
	l.Reset(testID, 0)
	bufs := make([][]byte, 64)
	for i := range bufs {
		bufs[i] = stream(16<<10, uint64(i))
	}
	l.AppendBuffers(bufs, true) // the first segment, and the index's first growth
	// One record of the index per 256 KiB: its slices grow now and then,
	// so the bound is on the average, well under one allocation per call.
	if n := testing.AllocsPerRun(100, func() {
		if err := l.AppendBuffers(bufs, true); err != nil {
			t.Fatal(err)
		}
	}); n > 0.5 {
		t.Fatalf("%v allocations per AppendBuffers of 64 blocks", n)
	}
}

// TestSegmentPreallocated: a new segment's blocks are allocated ahead
// (where the file system can) without changing its size, so that recovery
// still finds its end at its size; sealing cuts the blocks past it, and a
// spare is prepared for the next segment while the log grows.
func TestSegmentPreallocated(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30, SegmentBytes: 4 << 20}
	l, _ := openDir(t, dir, opts)
	l.Reset(testID, 0)
	data := stream(100<<10, 24)
	if err := l.Append(data, true); err != nil {
		t.Fatal(err)
	}
	seg := segFiles(t, dir, segExt)[0]
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts on this system")
	}
	if fi.Size() != int64(len(data)) {
		t.Fatalf("segment file is %d bytes, want what was written, %d", fi.Size(), len(data))
	}
	if st.Blocks*512 < opts.SegmentBytes {
		t.Skipf("%d bytes allocated: the file system did not preallocate (fallocate unsupported?)", st.Blocks*512)
	}
	if _, err := os.Stat(dir + "/" + spareName); err != nil {
		t.Errorf("no spare prepared for the next segment: %v", err)
	}
	l.Close()
	fi, _ = os.Stat(seg)
	if st := fi.Sys().(*syscall.Stat_t); fi.Size() != int64(len(data)) || st.Blocks*512 >= opts.SegmentBytes {
		t.Errorf("sealed segment: %d bytes, %d allocated; want %d, the blocks past it cut", fi.Size(), st.Blocks*512, len(data))
	}
	l2, rec := openDir(t, dir, opts)
	if rec.Problem != "" || rec.Verified != int64(len(data)) {
		t.Fatalf("recovery %+v", rec)
	}
	if got := readAll(t, l2, 1); !bytes.Equal(got, data) {
		t.Fatal("bytes recovered differ")
	}
}

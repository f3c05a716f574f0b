package streamlog

import (
	"bytes"
	"runtime"
	"slices"
	"testing"
)

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestIndexBounded: under small writes (chunks of one
// command, 150 bytes here; 197 on average measured behind a proxy under
// redis-benchmark -c 1) the in-memory index costs a bounded share of the
// stream, when appended and when recovered, and Stats counts it. Before,
// it held 13 bytes and more per chunk: 100,000 chunks (15 MB of stream)
// grew the heap by about 2 MB, so 1 GB of log held 70 to 135 MB of index.
func TestIndexBounded(t *testing.T) {
	const chunks, size = 100_000, 150
	data := stream(chunks*size, 5)
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30}
	l, _ := openDir(t, dir, opts)
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	before := heapInUse()
	for i := 0; i < len(data); i += size {
		if err := l.Append(data[i:i+size], true); err != nil {
			t.Fatal(err)
		}
	}
	appended := heapInUse() - before
	// Two records hold at least mergeBelow bytes; 12 bytes each, with the
	// slices' spare capacity (at most as much again). The heap's own noise
	// between two collections (tens of KiB) is allowed on top: before, the
	// index grew it by 1.4 MB here.
	limit := int64(len(data)) / (mergeBelow / 2) * 12 * 2
	if appended > limit+256<<10 {
		t.Errorf("appending %d chunks of %d bytes grew the heap by %d bytes (%.1f per chunk), want at most %d",
			chunks, size, appended, float64(appended)/chunks, limit)
	}
	if st := l.Stats(); st.IndexBytes <= 0 || st.IndexBytes > limit+1<<10 {
		t.Errorf("Stats.IndexBytes %d, want in (0, %d]", st.IndexBytes, limit)
	}
	if got := readAll(t, l, 1); !bytes.Equal(got, data) {
		t.Fatal("the log does not read back as appended")
	}
	l.Close()

	before = heapInUse()
	l2, rec := openDir(t, dir, opts)
	recovered := heapInUse() - before
	if rec.Verified != int64(len(data)) || rec.Problem != "" {
		t.Fatalf("recovery %+v", rec)
	}
	if recovered > limit+256<<10 {
		t.Errorf("recovering %d chunks of %d bytes grew the heap by %d bytes (%.1f per chunk), want at most %d",
			chunks, size, recovered, float64(recovered)/chunks, limit)
	}
	t.Logf("index of %d bytes of stream in %d chunks: heap +%d bytes appended, +%d recovered", len(data), chunks, appended, recovered)
	if got := readAll(t, l2, 1); !bytes.Equal(got, data) {
		t.Fatal("the recovered log does not read back as appended")
	}
	// Appends after recovery continue the last record, and read back.
	more := stream(10*size, 6)
	for i := 0; i < len(more); i += size {
		if err := l2.Append(more[i:i+size], true); err != nil {
			t.Fatal(err)
		}
	}
	if got := readAll(t, l2, 1); !bytes.Equal(got, append(slices.Clone(data), more...)) {
		t.Fatal("the log does not read back after appends that follow recovery")
	}
}

// totalAllocated is the bytes allocated so far, ever.
func totalAllocated() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.TotalAlloc)
}

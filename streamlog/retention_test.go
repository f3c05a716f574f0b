package streamlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRetention: the oldest segments go once the others hold MaxBytes; a
// reader at a removed offset gets ErrNotHeld.
func TestRetention(t *testing.T) {
	l, _ := openDir(t, t.TempDir(), Options{MaxBytes: 256 << 10, SegmentBytes: 64 << 10})
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	old, _ := l.NewReader(1)
	defer old.Close()
	data := stream(1<<20, 3)
	appendChunks(t, l, data)
	st := l.Stats()
	if st.Bytes > 256<<10+64<<10 || st.Bytes < 256<<10 {
		t.Fatalf("%d bytes kept, want about 256 KiB", st.Bytes)
	}
	if got := readAll(t, l, st.First); !bytes.Equal(got, data[st.First-1:]) {
		t.Fatal("retained bytes differ")
	}
	if _, err := old.WriteTo(io.Discard, 100); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("reader at a removed offset: %v, want ErrNotHeld", err)
	}
	if _, err := l.NewReader(1); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("NewReader at a removed offset: %v", err)
	}
}

// TestRecycledSegments: a segment retention drops becomes the spare, the
// next segment overwrites it, and what reads back (live, after a clean
// Close, and after a crash that left the older file's bytes past the
// newest record) is exactly what was appended, with nothing reported cut.
func TestRecycledSegments(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 256 << 10, SegmentBytes: 64 << 10}
	l, _ := openDir(t, dir, opts)
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	data := stream(700<<10, 9)
	appendChunks(t, l, data[:600<<10])
	spare := filepath.Join(dir, spareName)
	if _, err := os.Stat(spare); err != nil {
		t.Fatalf("no spare after retention dropped segments: %v", err)
	}
	before := segments(t, dir)
	appendChunks(t, l, data[600<<10:]) // rolls: the newest segments are recycled files
	newest := segments(t, dir)
	if len(newest) == 0 || slices.Contains(before, newest[len(newest)-1]) {
		t.Fatalf("no new segment: before %v, after %v", before, newest)
	}
	st := l.Stats()
	if got := readAll(t, l, st.First); !bytes.Equal(got, data[st.First-1:]) {
		t.Fatal("bytes read back differ from those appended")
	}
	var reused int
	for _, name := range segFiles(t, dir, crcExt) {
		if b, err := os.ReadFile(name); err == nil && string(b[:len(crcMagic)]) == crcMagicReused {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("no segment marked as a recycled file")
	}

	// A crash: the newest segment, a recycled file, still holds its older
	// bytes past the last record. Recovery keeps every record and reports
	// nothing cut.
	if !l.reused {
		t.Fatal("the newest segment is not a recycled file")
	}
	_, last := l.Bounds()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "crashed")
	copyDir(t, dir, crashed)
	seg := segments(t, crashed)
	size := l.curSize()
	if fi, _ := os.Stat(seg[len(seg)-1]); fi.Size() <= size {
		t.Fatalf("the newest segment's file has %d bytes, no more than its %d of records: no older bytes past them", fi.Size(), size)
	}
	l2, rec := openDir(t, crashed, opts)
	if _, last2 := l2.Bounds(); last2 != last || rec.Cut != 0 || rec.Problem != "" {
		t.Fatalf("after the crash: end %d (want %d), recovery %+v", last2, last, rec)
	}
	first, _ := l2.Bounds()
	if got := readAll(t, l2, first); !bytes.Equal(got, data[first-1:last]) {
		t.Fatal("bytes recovered differ from those appended")
	}

	// A clean Close cuts the recycled file to its records.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg = segments(t, dir)
	if fi, _ := os.Stat(seg[len(seg)-1]); fi.Size() != size {
		t.Fatalf("after Close the newest segment's file has %d bytes, want its %d of records", fi.Size(), size)
	}
	l3, rec := openDir(t, dir, opts)
	if _, last3 := l3.Bounds(); last3 != last || rec.Cut != 0 || rec.Problem != "" {
		t.Fatalf("after Close: end %d (want %d), recovery %+v", last3, last, rec)
	}
}

// TestRecycleSkipsOpenSegment: a segment a reader has open is removed, not
// recycled, so the bytes the reader verified are the bytes it sends.
func TestRecycleSkipsOpenSegment(t *testing.T) {
	dir := t.TempDir()
	l, _ := openDir(t, dir, Options{MaxBytes: 256 << 10, SegmentBytes: 64 << 10})
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	data := stream(1<<20, 10)
	appendChunks(t, l, data[:200<<10])
	r, err := l.NewReader(1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got bytes.Buffer
	if _, err := r.WriteTo(onlyWriter{&got}, 100); err != nil { // opens the first segment
		t.Fatal(err)
	}
	firstSeg := segFiles(t, dir, segExt)[0]
	held, err := os.Open(firstSeg)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	appendChunks(t, l, data[200<<10:]) // the first segment is dropped; many rolls follow
	b := make([]byte, 1000)
	if _, err := held.ReadAt(b, 0); err != nil || !bytes.Equal(b, data[:1000]) {
		t.Fatalf("the open segment's file was overwritten: %v", err)
	}
	if _, err := r.WriteTo(io.Discard, 100); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("reader in a dropped segment: %v, want ErrNotHeld", err)
	}
}

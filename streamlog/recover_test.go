package streamlog

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/replid"
)

// TestRecoveryCutsAtCorruption: a byte flipped in the newest segment while
// the log is closed ends the log at the record holding it; the bytes before
// are kept and the ones after are never served, and appends continue from
// the cut.
func TestRecoveryCutsAtCorruption(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30, SegmentBytes: 64 << 10}
	l, _ := openDir(t, dir, opts)
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	data := stream(220<<10, 4)                 // the newest segment: records of 8 KiB, 10 KiB, 10 KiB
	for i := 0; i < len(data); i += 10 << 10 { // records of 10 KiB
		if err := l.Append(data[i:i+10<<10], true); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	segs := segFiles(t, dir, segExt)
	newest := segs[len(segs)-1]
	var newestFirst int64
	for _, s := range segs[:len(segs)-1] {
		fi, _ := os.Stat(s)
		newestFirst += fi.Size()
	}
	flip(t, newest, 15<<10) // in the newest segment's second record

	l2, rec := openDir(t, dir, opts)
	wantEnd := newestFirst + 8<<10
	if _, last := l2.Bounds(); last != wantEnd {
		t.Fatalf("recovered end %d, want %d (the record before the flipped one)", last, wantEnd)
	}
	if rec.Problem == "" || !strings.Contains(rec.Problem, "checksum") || rec.Cut != int64(len(data))-wantEnd {
		t.Fatalf("recovery %+v, want a checksum problem and %d bytes cut", rec, int64(len(data))-wantEnd)
	}
	if got := readAll(t, l2, 1); !bytes.Equal(got, data[:wantEnd]) {
		t.Fatal("recovered bytes differ")
	}
	fresh := stream(30<<10, 5)
	if err := l2.Append(fresh, true); err != nil {
		t.Fatal(err)
	}
	want := append(bytes.Clone(data[:wantEnd]), fresh...)
	if got := readAll(t, l2, 1); !bytes.Equal(got, want) {
		t.Fatal("appends after the cut differ")
	}
}

// TestRecoveryTornTail: bytes written without their checksum entry (a crash
// between the two writes) are cut; so is a torn entry.
func TestRecoveryTornTail(t *testing.T) {
	dir := t.TempDir()
	l, _ := openDir(t, dir, Options{MaxBytes: 1 << 30})
	l.Reset(testID, 50)
	data := stream(30<<10, 6)
	l.Append(data, true)
	l.Close()
	seg := segFiles(t, dir, segExt)[0]
	crc := segFiles(t, dir, crcExt)[0]
	f, _ := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte("bytes with no entry"))
	f.Close()
	f, _ = os.OpenFile(crc, os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{1, 2, 3}) // a torn entry
	f.Close()

	l2, rec := openDir(t, dir, Options{MaxBytes: 1 << 30})
	if _, last := l2.Bounds(); last != 50+int64(len(data)) {
		t.Fatalf("end %d, want %d", last, 50+len(data))
	}
	if rec.Cut != int64(len("bytes with no entry")) {
		t.Fatalf("recovery %+v", rec)
	}
	if fi, _ := os.Stat(seg); fi.Size() != int64(len(data)) {
		t.Fatalf("segment file not cut back: %d bytes", fi.Size())
	}
}

// TestRecoveryMissingPieces: a missing middle segment ends the log before
// it; a bad meta.json starts an empty log and removes the segments; stray
// files are removed and others left alone.
func TestRecoveryMissingPieces(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30, SegmentBytes: 64 << 10}
	l, _ := openDir(t, dir, opts)
	l.Reset(testID, 0)
	appendChunks(t, l, stream(300<<10, 9))
	l.Close()
	segs := segFiles(t, dir, segExt)
	os.Remove(segs[2])
	os.WriteFile(filepath.Join(dir, "00000000000000000099.seg"), []byte("stray"), 0o600)
	os.WriteFile(filepath.Join(dir, "unrelated.txt"), []byte("keep"), 0o600)

	l2, rec := openDir(t, dir, opts)
	fi0, _ := os.Stat(segs[0])
	fi1, _ := os.Stat(segs[1])
	if _, last := l2.Bounds(); last != fi0.Size()+fi1.Size() {
		t.Fatalf("end %d, want %d (the two segments before the missing one)", last, fi0.Size()+fi1.Size())
	}
	if rec.Problem == "" {
		t.Fatal("no problem reported for a missing segment")
	}
	if _, err := os.Stat(filepath.Join(dir, "00000000000000000099.seg")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("stray segment file not removed")
	}
	if _, err := os.Stat(segs[3]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("segment after the missing one not removed")
	}
	if _, err := os.Stat(filepath.Join(dir, "unrelated.txt")); err != nil {
		t.Fatal("a file not the log's was removed")
	}
	l2.Close()

	os.WriteFile(filepath.Join(dir, metaName), []byte(`{"version":1,"replid":"../../etc"}`), 0o600)
	l3, rec := openDir(t, dir, opts)
	if rec.Problem == "" || l3.Identity().ReplID != "" {
		t.Fatalf("bad meta.json: recovery %+v, identity %+v", rec, l3.Identity())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(m) != 0 {
		t.Fatalf("segments left after a bad meta.json: %v", m)
	}
}

// TestRecoveryEndsAtCommandBoundary: records appended after the last one that
// ends a command are cut at recovery (a PSYNC from the end must ask for whole
// commands), across segments; with no boundary at all the log is empty and
// starts where it did.
func TestRecoveryEndsAtCommandBoundary(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30, SegmentBytes: 64 << 10}
	l, _ := openDir(t, dir, opts)
	l.Reset(testID, 100)
	data := stream(200<<10, 11)
	l.Append(data[:50<<10], true)
	l.Append(data[50<<10:], false) // spans three more segments
	l.Close()
	l2, rec := openDir(t, dir, opts)
	if first, last := l2.Bounds(); first != 101 || last != 100+50<<10 {
		t.Fatalf("Bounds %d, %d, want 101, %d", first, last, 100+50<<10)
	}
	if rec.Unfinished != 150<<10 || rec.Problem != "" || rec.Verified != 50<<10 {
		t.Fatalf("recovery %+v", rec)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(m) != 1 {
		t.Fatalf("segments after the cut: %v, want 1", m)
	}
	more := stream(10<<10, 12)
	l2.Append(more, true)
	if got := readAll(t, l2, 101); !bytes.Equal(got, append(bytes.Clone(data[:50<<10]), more...)) {
		t.Fatal("bytes after the cut and an append differ")
	}
	l2.Reset(testID, 7)
	l2.Append(data[:1000], false)
	l2.Close()
	l3, rec := openDir(t, dir, opts)
	if first, last := l3.Bounds(); first != 8 || last != 7 || rec.Unfinished != 1000 {
		t.Fatalf("no boundary: Bounds %d, %d, recovery %+v", first, last, rec)
	}
}

// FuzzRecover: whatever the files in the log's directory hold (a torn or
// corrupted segment, CRC file or meta.json), Open never panics, and what it
// keeps reads back as exactly the bytes a good log held there: recovery
// keeps a prefix of what retention kept, or nothing. The log is small
// enough that retention drops segments and the newest ones are recycled
// files.
func FuzzRecover(f *testing.F) {
	f.Add(uint8(0), uint16(100), byte(0xff), []byte(nil))
	f.Add(uint8(1), uint16(8), byte(0x01), []byte("RPLCRC1\n"))
	f.Add(uint8(2), uint16(3), byte(0x7f), []byte(`{"version":1,"replid":"`))
	f.Fuzz(func(t *testing.T, which uint8, at uint16, xor byte, tail []byte) {
		dir := t.TempDir()
		// Small enough that retention drops segments and recycles files.
		opts := Options{MaxBytes: 128 << 10, SegmentBytes: 64 << 10}
		l, _ := openDir(t, dir, opts)
		l.Reset(testID, 0)
		data := stream(400<<10, 13)
		// Chunks of several sizes, some not at a command boundary, so that
		// the index merges chunks and recovery cuts inside a record.
		sizes := []int{10 << 10, 700, 3000, 150}
		for i, k := 0, 0; i < len(data); k++ {
			n := min(sizes[k%len(sizes)], len(data)-i)
			l.Append(data[i:i+n], k%3 != 1 || i+n == len(data))
			i += n
		}
		l.Close()
		names := []string{metaName}
		for _, ext := range []string{segExt, crcExt} {
			m, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
			for _, p := range m {
				names = append(names, filepath.Base(p))
			}
		}
		path := filepath.Join(dir, names[int(which)%len(names)])
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 0 {
			b[int(at)%len(b)] ^= xor
		}
		b = append(b, tail...)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}

		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		opts.FS = RootFS{root}
		l2, _, err := Open(opts)
		if err != nil {
			return // an error is an answer; a panic is not
		}
		defer l2.Close()
		first, last := l2.Bounds()
		if last < first { // empty
			return
		}
		if first < 1 || last > int64(len(data)) {
			t.Fatalf("recovered [%d, %d] of a log of %d bytes", first, last, len(data))
		}
		if got := readAll(t, l2, first); !bytes.Equal(got, data[first-1:last]) {
			t.Fatalf("recovered %d bytes that differ from what was appended", len(got))
		}
	})
}

// TestRecoveryOffsetsInRange: offsets read from the
// directory are checked against replid.MaxOffset and each other before use.
// A segment listed past the largest offset (whose end would overflow) or
// out of order means the log is not adopted, and the report says why; a
// segment whose records run past the largest offset ends the log before
// the first that does. Bounds are never negative.
func TestRecoveryOffsetsInRange(t *testing.T) {
	data := stream(10000, 21)
	cases := []struct {
		name     string
		start    int64
		firsts   []int64
		keepLast int64 // the end the log keeps; 0: not adopted (empty)
		why      string
	}{
		{"segment past the largest offset", 0, []int64{9223372036854770000}, 0, "out of range"},
		{"segments out of order", 0, []int64{20001, 10001}, 0, "out of range"},
		{"segment at or before the start", 500, []int64{500}, 0, "out of range"},
		{"records past the largest offset", replid.MaxOffset - 5000, []int64{replid.MaxOffset - 4999}, replid.MaxOffset, "past the largest offset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeHandLog(t, dir, tc.start, tc.firsts, data, 1000)
			l, rec := openDir(t, dir, Options{MaxBytes: 1 << 30})
			first, last := l.Bounds()
			if !strings.Contains(rec.Problem, tc.why) {
				t.Errorf("recovery problem %q, want it to say %q", rec.Problem, tc.why)
			}
			if first < 0 || last < 0 || first > last+1 || last > replid.MaxOffset {
				t.Fatalf("bounds [%d, %d] out of range", first, last)
			}
			if tc.keepLast == 0 {
				if last >= first || l.Identity().ReplID != "" {
					t.Fatalf("an out-of-range log was adopted: [%d, %d] under %q", first, last, l.Identity().ReplID)
				}
				return
			}
			if last != tc.keepLast {
				t.Fatalf("log ends at %d, want %d", last, tc.keepLast)
			}
		})
	}
}

// TestRecoveryHostileCRC: a CRC file made of the smallest
// valid entries (one byte each, 8 times its segment's size) and then
// megabytes past them is read as a stream: recovery allocates a bounded
// amount whatever the file holds. Before, it read the file whole, up to 8
// times its segment's size, and indexed 13 bytes per entry.
func TestRecoveryHostileCRC(t *testing.T) {
	const size = 256 << 10
	data := stream(size, 8)
	dir := t.TempDir()
	writeHandLog(t, dir, 0, []int64{1}, data, 1)
	f, err := os.OpenFile(filepath.Join(dir, segName(1, crcExt)), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 8<<20)); err != nil { // past the data: never read
		t.Fatal(err)
	}
	f.Close()
	before := totalAllocated()
	l, rec := openDir(t, dir, Options{MaxBytes: 1 << 30})
	allocated := totalAllocated() - before
	t.Logf("recovering %d one-byte entries and 8 MiB past them allocated %d bytes", size, allocated)
	if rec.Verified != size {
		t.Fatalf("recovery %+v, want all %d bytes verified", rec, size)
	}
	if allocated > 1<<20 {
		t.Errorf("recovery allocated %d bytes for a %d-byte segment, want at most 1 MiB", allocated, size)
	}
	if got := readAll(t, l, 1); !bytes.Equal(got, data) {
		t.Fatal("the log does not read back as written")
	}
}

// TestRecoveryCutsInsideRecord: chunks merged into one record of the index
// are cut at the last command boundary among them, and the CRC file at the
// matching entry, so that appends continue from there and a second
// recovery finds the same log.
func TestRecoveryCutsInsideRecord(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MaxBytes: 1 << 30}
	l, _ := openDir(t, dir, opts)
	l.Reset(testID, 0)
	data := stream(1000, 14)
	l.Append(data[:100], true)
	l.Append(data[100:300], true)
	l.Append(data[300:1000], false) // one record with the two before it
	if n := len(l.segs[0].ends); n != 1 {
		t.Fatalf("%d records in the index for three small chunks, want 1", n)
	}
	l.Close()
	l2, rec := openDir(t, dir, opts)
	if _, last := l2.Bounds(); last != 300 || rec.Unfinished != 700 || rec.Problem != "" {
		t.Fatalf("end %d, recovery %+v; want 300 and 700 unfinished", last, rec)
	}
	if fi, err := os.Stat(filepath.Join(dir, segName(1, crcExt))); err != nil || fi.Size() != int64(len(crcMagic))+2*entrySize {
		t.Fatalf("CRC file after the cut: %v, %v; want two entries", fi.Size(), err)
	}
	more := stream(500, 15)
	l2.Append(more, true)
	want := append(slices.Clone(data[:300]), more...)
	if got := readAll(t, l2, 1); !bytes.Equal(got, want) {
		t.Fatal("bytes after the cut and an append differ")
	}
	l2.Close()
	l3, rec := openDir(t, dir, opts)
	if _, last := l3.Bounds(); last != 800 || rec.Problem != "" || rec.Unfinished != 0 {
		t.Fatalf("second recovery: end %d, %+v", last, rec)
	}
	if got := readAll(t, l3, 1); !bytes.Equal(got, want) {
		t.Fatal("the second recovery reads back differently")
	}
}

package streamlog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/replid"
)

// testID is an identity for tests.
var testID = Identity{ReplID: strings.Repeat("a", 40), ReplID2: replid.None, SecondOffset: -1}

// openDir opens the log in dir with opts (FS set to dir's root unless given).
func openDir(t testing.TB, dir string, opts Options) (*Log, Recovery) {
	t.Helper()
	if opts.FS == nil {
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { root.Close() })
		opts.FS = RootFS{root}
	}
	l, rec, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, rec
}

// stream returns n pseudo-random bytes.
func stream(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// appendChunks appends data in chunks of random sizes up to 40 KiB.
func appendChunks(t *testing.T, l *Log, data []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	for len(data) > 0 {
		n := min(len(data), 1+r.IntN(40<<10))
		if err := l.Append(data[:n], true); err != nil {
			t.Fatalf("Append: %v", err)
		}
		data = data[n:]
	}
}

// readAll reads the log from off to its end through a Reader.
func readAll(t testing.TB, l *Log, off int64) []byte {
	t.Helper()
	r, err := l.NewReader(off)
	if err != nil {
		t.Fatalf("NewReader(%d): %v", off, err)
	}
	defer r.Close()
	var out bytes.Buffer
	for {
		_, err := r.WriteTo(onlyWriter{&out}, 7000)
		if errors.Is(err, io.EOF) {
			return out.Bytes()
		}
		if err != nil {
			t.Fatalf("WriteTo at %d: %v", r.Offset(), err)
		}
	}
}

// onlyWriter hides bytes.Buffer's ReadFrom, to test the buffer path.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

// TestAppendReadReopen: what is appended reads back from any offset, across
// segments, by both send paths, and again after Close and Open.
func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	l, rec := openDir(t, dir, Options{MaxBytes: 1 << 30, SegmentBytes: 100 << 10})
	if rec.Problem != "" || l.Identity().ReplID != "" {
		t.Fatalf("empty dir: recovery %+v, identity %+v", rec, l.Identity())
	}
	if err := l.Append([]byte("x"), true); err == nil {
		t.Fatal("Append before Reset succeeded")
	}
	if err := l.Reset(testID, 1000); err != nil {
		t.Fatal(err)
	}
	data := stream(700<<10, 7)
	appendChunks(t, l, data)
	if first, last := l.Bounds(); first != 1001 || last != 1000+int64(len(data)) {
		t.Fatalf("Bounds = %d, %d", first, last)
	}
	if st := l.Stats(); st.Segments < 7 || st.Bytes != int64(len(data)) {
		t.Fatalf("Stats = %+v, want 7+ segments of %d bytes", st, len(data))
	}
	for _, off := range []int64{1001, 1002, 1001 + 100<<10, 1000 + int64(len(data))} {
		if got := readAll(t, l, off); !bytes.Equal(got, data[off-1001:]) {
			t.Fatalf("read from %d: %d bytes differ from what was appended", off, len(got))
		}
	}
	// The sendfile path: an *os.File segment into an io.ReaderFrom.
	r, _ := l.NewReader(1001)
	var viaReadFrom bytes.Buffer
	for {
		if _, err := r.WriteTo(&viaReadFrom, 1<<20); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
	}
	r.Close()
	if !bytes.Equal(viaReadFrom.Bytes(), data) {
		t.Fatal("ReadFrom path: bytes differ")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l2, rec := openDir(t, dir, Options{MaxBytes: 1 << 30, SegmentBytes: 100 << 10})
	if rec.Problem != "" || rec.Cut != 0 || rec.Verified != int64(len(data)) {
		t.Fatalf("recovery %+v, want %d verified and nothing cut", rec, len(data))
	}
	if l2.Identity() != testID {
		t.Fatalf("identity %+v, want %+v", l2.Identity(), testID)
	}
	more := stream(50<<10, 8)
	appendChunks(t, l2, more)
	if got := readAll(t, l2, 1001); !bytes.Equal(got, append(bytes.Clone(data), more...)) {
		t.Fatal("after reopen and more appends: bytes differ")
	}
}

// segFiles returns the log's segment files in dir, oldest first.
func segFiles(t *testing.T, dir, ext string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	// A segment's files only: not the spare a new segment will be.
	m := slices.DeleteFunc(all, func(p string) bool { return !isSegFile(filepath.Base(p)) })
	if err != nil || len(m) == 0 {
		t.Fatalf("no %s files in %s: %v", ext, dir, err)
	}
	return m
}

// flip inverts one byte of a file.
func flip(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// TestReaderRefusesCorruption: bytes that go bad on disk after recovery are
// an error for the reader, never sent.
func TestReaderRefusesCorruption(t *testing.T) {
	dir := t.TempDir()
	l, _ := openDir(t, dir, Options{MaxBytes: 1 << 30})
	l.Reset(testID, 0)
	data := stream(20<<10, 10)
	l.Append(data, true)
	flip(t, segFiles(t, dir, segExt)[0], 100)
	r, _ := l.NewReader(1)
	defer r.Close()
	var out bytes.Buffer
	if n, err := r.WriteTo(&out, 1<<20); !errors.Is(err, ErrCorrupt) || n != 0 || out.Len() != 0 {
		t.Fatalf("WriteTo over a flipped byte: %d bytes, %v", n, err)
	}
}

// segments lists dir's segment files, oldest first, without the spare.
func segments(t *testing.T, dir string) []string {
	return slices.DeleteFunc(segFiles(t, dir, segExt), func(name string) bool { return filepath.Base(name) == spareName })
}

// copyDir copies the files of dir into a new directory to, as a crash
// would leave them (the page cache holds what was written).
func copyDir(t *testing.T, dir, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// writeHandLog writes a log by hand in dir: meta.json with the stream after
// start and the given segment firsts, and one segment at each first holding
// data in records of rec bytes, each marked as a command boundary.
func writeHandLog(t testing.TB, dir string, start int64, firsts []int64, data []byte, rec int) {
	t.Helper()
	m := meta{Version: metaVersion, ReplID: testID.ReplID, ReplID2: replid.None, SecondOffset: -1, Start: start, Segments: firsts}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, metaName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, first := range firsts {
		crcs := []byte(crcMagic)
		for i := 0; i < len(data); i += rec {
			p := data[i:min(i+rec, len(data))]
			crcs = binary.LittleEndian.AppendUint32(crcs, uint32(len(p))|boundaryFlag)
			crcs = binary.LittleEndian.AppendUint32(crcs, crc32.Checksum(p, castagnoli))
		}
		if err := os.WriteFile(filepath.Join(dir, segName(first, segExt)), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, segName(first, crcExt)), crcs, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

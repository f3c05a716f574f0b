package streamlog

import (
	"bytes"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
)

// countFS counts, per file name, the writes and syncs of the files it opens,
// and the renames onto each name, so that tests can see what a roll and a
// Sync cost the disk. Its files are not *os.File: the log writes them
// slice by slice and syncs them by their Sync.
type countFS struct {
	FS
	mu      sync.Mutex
	writes  map[string]int
	syncs   map[string]int
	renames map[string]int
}

func newCountFS(fsys FS) *countFS {
	return &countFS{FS: fsys, writes: map[string]int{}, syncs: map[string]int{}, renames: map[string]int{}}
}

func (c *countFS) count(m map[string]int, name string) {
	c.mu.Lock()
	m[name]++
	c.mu.Unlock()
}

func (c *countFS) get(m map[string]int, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[name]
}

func (c *countFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countFile{f, c, name}, nil
}

func (c *countFS) Rename(oldName, newName string) error {
	c.count(c.renames, newName)
	return c.FS.Rename(oldName, newName)
}

type countFile struct {
	File
	fs   *countFS
	name string
}

func (f countFile) Write(p []byte) (int, error) {
	f.fs.count(f.fs.writes, f.name)
	return f.File.Write(p)
}

func (f countFile) Sync() error {
	f.fs.count(f.fs.syncs, f.name)
	return f.File.Sync()
}

// openCounted opens a log in a new directory through a countFS.
func openCounted(t *testing.T, opts Options) (*Log, *countFS, string) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	cfs := newCountFS(RootFS{root})
	opts.FS = cfs
	l, _ := openDir(t, dir, opts)
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	return l, cfs, dir
}

// TestRollWritesMetaOnce: a new segment costs one replacement of meta.json,
// which lists it and unlists what retention drops at the same time, and the
// log still reads back whole and reopens as written.
func TestRollWritesMetaOnce(t *testing.T) {
	l, cfs, dir := openCounted(t, Options{MaxBytes: 256 << 10, SegmentBytes: 64 << 10})
	afterReset := cfs.get(cfs.renames, metaName)
	data := stream(1<<20, 7)
	block := 16 << 10
	for i := 0; i < len(data); i += 4 * block {
		if err := l.AppendBuffers([][]byte{data[i : i+block], data[i+block : i+2*block], data[i+2*block : i+3*block], data[i+3*block : i+4*block]}, true); err != nil {
			t.Fatal(err)
		}
	}
	rolls := 0
	cfs.mu.Lock()
	for name := range cfs.writes {
		if strings.HasSuffix(name, crcExt) {
			rolls++ // every new segment's CRC file gets its header written
		}
	}
	cfs.mu.Unlock()
	st := l.Stats()
	if rolls != 16 || st.Segments >= rolls {
		t.Fatalf("%d segments started, %d kept; want 16 (1 MiB in 64 KiB segments), fewer kept", rolls, st.Segments)
	}
	if got := cfs.get(cfs.renames, metaName) - afterReset; got != rolls {
		t.Fatalf("meta.json replaced %d times for %d new segments; want once each", got, rolls)
	}
	first, last := l.Bounds()
	if got := readAll(t, l, first); last != int64(len(data)) || !bytes.Equal(got, data[first-1:]) {
		t.Fatalf("log [%d, %d] does not read back as the stream's end", first, last)
	}
	l.Close()
	l2, rec := openDir(t, dir, Options{MaxBytes: 256 << 10, SegmentBytes: 64 << 10})
	if f2, last2 := l2.Bounds(); f2 != first || last2 != last || rec.Problem != "" || rec.Cut != 0 {
		t.Fatalf("reopened [%d, %d] (%+v), want [%d, %d] and nothing cut", f2, last2, rec, first, last)
	}
}

// TestSealedSegmentSyncedBySync: sealing a segment waits for no fsync and
// tells the syncer (SealedReady); the next Sync syncs the sealed segment's
// files before the newest one's, and Synced covers both. Without a Sync,
// up to maxSealed sealed segments wait, and the writer syncs the oldest
// only past that; Close syncs those left.
func TestSealedSegmentSyncedBySync(t *testing.T) {
	const seg = 64 << 10
	l, cfs, _ := openCounted(t, Options{MaxBytes: 1 << 30, SegmentBytes: seg})
	synced := func(first int64) (int, int) {
		return cfs.get(cfs.syncs, segName(first, segExt)), cfs.get(cfs.syncs, segName(first, crcExt))
	}
	ready := func() bool {
		select {
		case <-l.SealedReady():
			return true
		default:
			return false
		}
	}
	data := stream((maxSealed+3)*seg, 9)
	// Into the second segment: the first is sealed, not synced.
	if err := l.Append(data[:seg+100], true); err != nil {
		t.Fatal(err)
	}
	if !ready() {
		t.Fatal("a segment was sealed, and SealedReady did not say so")
	}
	// A CRC file is synced once when its segment starts (its header,
	// before meta.json lists it): the counts below are past that.
	if s, c := synced(1); s != 0 || c != 1 {
		t.Fatalf("sealed segment synced %d+%d times by the roll; want none but its CRC file's header (the next Sync's)", s, c-1)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if s, c := synced(1); s != 1 || c != 2 {
		t.Fatalf("sealed segment synced %d+%d times by Sync; want once each", s, c-1)
	}
	if s, _ := synced(seg + 1); s != 1 {
		t.Fatalf("newest segment synced %d times by Sync; want once", s)
	}
	if st := l.Stats(); st.Synced != seg+100 {
		t.Fatalf("Synced %d, want %d", st.Synced, seg+100)
	}
	// maxSealed+1 rolls without a Sync: the last syncs the oldest waiting.
	if err := l.Append(data[seg+100:(maxSealed+2)*seg+100], true); err != nil {
		t.Fatal(err)
	}
	if s, c := synced(seg + 1); s != 2 || c != 3 {
		t.Fatalf("the oldest of %d sealed segments waiting synced %d+%d times; want twice each (by Sync, then by the writer)", maxSealed+1, s, c-1)
	}
	for k := int64(2); k <= maxSealed+1; k++ {
		if s, c := synced(k*seg + 1); s != 0 || c != 1 {
			t.Fatalf("sealed segment %d synced %d+%d times; want none yet", k, s, c-1)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for k := int64(2); k <= maxSealed+2; k++ {
		if s, _ := synced(k*seg + 1); s != 1 {
			t.Fatalf("segment %d synced %d times by Close; want once", k, s)
		}
	}
}

// TestEntriesOneWritePerCall: the CRC entries of a call's records go to the
// CRC file in one write after the records' bytes, not one each.
func TestEntriesOneWritePerCall(t *testing.T) {
	l, cfs, _ := openCounted(t, Options{MaxBytes: 1 << 30, SegmentBytes: 64 << 20})
	blocks := make([][]byte, 64)
	for i := range blocks {
		blocks[i] = stream(16<<10, uint64(i))
	}
	if err := l.Append([]byte("x"), true); err != nil { // the segment started, its CRC header written
		t.Fatal(err)
	}
	name := segName(1, crcExt)
	for range 3 {
		before := cfs.get(cfs.writes, name)
		if err := l.AppendBuffers(blocks, true); err != nil {
			t.Fatal(err)
		}
		if got := cfs.get(cfs.writes, name) - before; got != 1 {
			t.Fatalf("one call of 1 MiB (4 records) wrote the CRC file %d times; want once", got)
		}
	}
	if st := l.Stats(); st.Bytes != 3<<20+1 || l.segs[0].entries != 13 {
		t.Fatalf("%d bytes, %d entries; want 3 MiB and 1 in 13 records", st.Bytes, l.segs[0].entries)
	}
}

// TestSyncDuringRolls: a syncer that syncs at every seal (SealedReady), as
// the proxy's does, beside a writer rolling small segments faster than it
// syncs them: no Sync fails (none fsyncs a file the writer has closed, the
// newest it took included, even once more than maxSealed rolls have passed
// since), everything reads back, and Close leaves it all synced.
func TestSyncDuringRolls(t *testing.T) {
	const seg = 64 << 10
	l, _ := openDir(t, t.TempDir(), Options{MaxBytes: 1 << 30, SegmentBytes: seg})
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	syncErr := make(chan error, 1)
	go func() {
		defer close(syncErr)
		for {
			select {
			case <-stop:
				return
			case <-l.SealedReady():
			}
			if err := l.Sync(); err != nil {
				syncErr <- err
				return
			}
		}
	}()
	data := stream(200*seg, 12)
	for p := data; len(p) > 0; {
		n := min(len(p), 20000)
		if err := l.Append(p[:n], true); err != nil {
			t.Fatalf("append: %v", err)
		}
		p = p[n:]
	}
	close(stop)
	if err := <-syncErr; err != nil {
		t.Fatalf("a Sync beside the rolls failed: %v", err)
	}
	if got := readAll(t, l, 1); !bytes.Equal(got, data) {
		t.Fatal("the log does not read back as appended")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

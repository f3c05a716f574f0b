package streamlog

import (
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blockFS holds the next fsync of a file, once armed, until release is
// closed: a disk that takes its time.
type blockFS struct {
	FS
	armed   atomic.Bool
	entered chan struct{} // closed when the held fsync starts
	release chan struct{}
}

func (b *blockFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := b.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return blockFile{f, b}, nil
}

type blockFile struct {
	File
	fs *blockFS
}

func (f blockFile) Sync() error {
	if f.fs.armed.CompareAndSwap(true, false) {
		close(f.fs.entered)
		<-f.fs.release
	}
	return f.File.Sync()
}

// stuckAfter is how long a call may take before the test calls it stuck:
// a deadline for a wait, not a performance goal.
const stuckAfter = 10 * time.Second

// syncHeld opens a log in a fresh dir, appends 100 KiB of stream(seed), and
// starts a Sync whose fsync is held inside a blocking FS: it returns once
// that fsync has begun, with the log, the bytes appended, the Sync's result
// to come, and release, which lets the fsync go on (idempotent). The caller
// defers release before the log's cleanup, which waits for the Sync.
func syncHeld(t *testing.T, seed uint64) (l *Log, data []byte, synced <-chan error, release func()) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	bfs := &blockFS{FS: RootFS{root}, entered: make(chan struct{}), release: make(chan struct{})}
	l, _ = openDir(t, dir, Options{FS: bfs, MaxBytes: 1 << 30})
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	data = stream(100<<10, seed)
	if err := l.Append(data, true); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { close(bfs.release) }) }
	bfs.armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- l.Sync() }()
	select {
	case <-bfs.entered:
	case <-time.After(stuckAfter):
		release()
		t.Fatal("the Sync never reached the disk")
	}
	return l, data, done, release
}

// TestStatsDuringSync: the figures INFO and /metrics read (Stats, Err,
// IndexBytes) come back while an fsync is in progress, instead of waiting
// behind it; they show the bytes appended, and Synced moves once the fsync
// is done.
func TestStatsDuringSync(t *testing.T) {
	l, data, synced, release := syncHeld(t, 7)
	defer release() // before openDir's Close, which waits for the Sync

	read := make(chan Stats, 1)
	go func() {
		st := l.Stats()
		l.Err()
		l.IndexBytes()
		read <- st
	}()
	select {
	case st := <-read:
		if st.Last != int64(len(data)) || st.Bytes != int64(len(data)) || st.Synced != 0 || st.Err != nil {
			t.Errorf("Stats during the fsync: %+v, want the %d bytes appended, none synced yet", st, len(data))
		}
	case <-time.After(stuckAfter):
		t.Fatalf("Stats did not return within %v while an fsync was held: it waits behind the disk", stuckAfter)
	}

	release()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Synced != int64(len(data)) || st.LastSync.IsZero() {
		t.Errorf("Stats after the fsync: %+v, want synced to %d", st, len(data))
	}
}

// TestAppendDuringSync: an Append does not wait for a Sync's fsync in
// progress (the syncer's fsync is outside the writer's lock), and the Sync
// makes durable what was written before it began: Synced stops there, not
// at the bytes appended during it.
func TestAppendDuringSync(t *testing.T) {
	l, before, synced, release := syncHeld(t, 8)
	defer release() // before openDir's Close, which waits for the Sync
	during := stream(50<<10, 9)
	appended := make(chan error, 1)
	go func() { appended <- l.Append(during, true) }()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(stuckAfter):
		t.Fatalf("Append did not return within %v while an fsync was held: it waits behind the syncer", stuckAfter)
	}
	release()
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Synced != int64(len(before)) || st.Last != int64(len(before)+len(during)) {
		t.Errorf("Stats after the fsync: %+v, want synced to %d (what was written before it began) of %d", st, len(before), len(before)+len(during))
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.Synced != int64(len(before)+len(during)) {
		t.Errorf("Synced %d after the next Sync, want %d", st.Synced, len(before)+len(during))
	}
}

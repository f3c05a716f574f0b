package streamlog

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestSyncFromAnotherGoroutine: Sync called from another goroutine than the
// one appending (the proxy's syncer under repl-log-fsync everysec) is safe
// (under -race) and syncs what was appended; when it fails, the failure is
// sticky for the writer and shows in the figures.
func TestSyncFromAnotherGoroutine(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ffs := &faultFS{FS: RootFS{root}}
	l, _ := openDir(t, dir, Options{FS: ffs, MaxBytes: 1 << 30, SegmentBytes: 64 << 10})
	if err := l.Reset(testID, 0); err != nil {
		t.Fatal(err)
	}
	data := stream(1<<20, 9)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var syncErr error
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := l.Sync(); err != nil {
				syncErr = err
				return
			}
		}
	})
	for p := data; len(p) > 0; p = p[min(len(p), 4<<10):] {
		if err := l.Append(p[:min(len(p), 4<<10)], true); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if syncErr != nil {
		t.Fatal(syncErr)
	}
	wg.Go(func() { syncErr = l.Sync() })
	wg.Wait()
	if st := l.Stats(); syncErr != nil || st.Synced != int64(len(data)) || st.Segments < 2 {
		t.Fatalf("after a Sync from another goroutine: %v, %+v; want %d bytes synced over several segments", syncErr, st, len(data))
	}
	if got := readAll(t, l, 1); !bytes.Equal(got, data) {
		t.Fatal("the stream does not read back as appended")
	}

	ffs.fail(true)
	wg.Go(func() { syncErr = l.Sync() })
	wg.Wait()
	ffs.fail(false)
	if syncErr == nil {
		t.Fatal("Sync on a failing disk succeeded")
	}
	if st := l.Stats(); !errors.Is(st.Err, syncErr) || !errors.Is(l.Err(), syncErr) {
		t.Fatalf("after a failed Sync: Stats.Err %v, Err %v; want the sync's error, %v", st.Err, l.Err(), syncErr)
	}
	if err := l.Append([]byte("more"), true); !errors.Is(err, syncErr) {
		t.Fatalf("Append after a failed Sync: %v, want the sticky %v", err, syncErr)
	}
}

// TestIdentityAndReset: SetIdentity survives a reopen; Reset drops the old
// generation's files.
func TestIdentityAndReset(t *testing.T) {
	dir := t.TempDir()
	l, _ := openDir(t, dir, Options{MaxBytes: 1 << 30})
	l.Reset(testID, 0)
	l.Append(stream(1000, 1), true)
	id2 := Identity{ReplID: strings.Repeat("b", 40), ReplID2: testID.ReplID, SecondOffset: 1001}
	if err := l.SetIdentity(id2); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l2, _ := openDir(t, dir, Options{MaxBytes: 1 << 30})
	if l2.Identity() != id2 {
		t.Fatalf("identity %+v, want %+v", l2.Identity(), id2)
	}
	if err := l2.Reset(testID, 5000); err != nil {
		t.Fatal(err)
	}
	if first, last := l2.Bounds(); first != 5001 || last != 5000 {
		t.Fatalf("after Reset: %d, %d", first, last)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(m) != 0 {
		t.Fatalf("old generation's segments left: %v", m)
	}
	// A reader of the old generation must not read the new one's bytes at
	// the same offsets.
	stale, err := l2.NewReader(5001)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	l2.Reset(testID, 0)
	l2.Append(stream(10000, 3), true)
	if _, err := stale.WriteTo(io.Discard, 100); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("reader across a Reset: %v, want ErrNotHeld", err)
	}
	if first, last := l2.Bounds(); first != 1 || last != 10000 {
		t.Fatalf("after Reset: %d, %d", first, last)
	}
}

// faultFS fails writes (and syncs) while failing is set.
type faultFS struct {
	FS
	mu      sync.Mutex
	failing bool
}

func (f *faultFS) fail(on bool) { f.mu.Lock(); f.failing = on; f.mu.Unlock() }

func (f *faultFS) broken() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.failing }

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) != 0 && f.broken() {
		return nil, errors.New("injected: no space left on device")
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

type faultFile struct {
	File
	fs *faultFS
}

func (f faultFile) Write(p []byte) (int, error) {
	if f.fs.broken() {
		return 0, errors.New("injected: no space left on device")
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if f.fs.broken() {
		return errors.New("injected: input/output error")
	}
	return f.File.Sync()
}

// TestFaultsAreSticky: a failing disk makes Append fail and keep failing
// (a failed fsync is not retried on the same file); the bytes before the
// failure stay readable; Reset, once the disk works, starts over.
func TestFaultsAreSticky(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	ffs := &faultFS{FS: RootFS{root}}
	l, _ := openDir(t, dir, Options{FS: ffs, MaxBytes: 1 << 30})
	l.Reset(testID, 0)
	data := stream(10<<10, 2)
	if err := l.Append(data, true); err != nil {
		t.Fatal(err)
	}
	ffs.fail(true)
	if err := l.Sync(); err == nil {
		t.Fatal("Sync on a failing disk succeeded")
	}
	ffs.fail(false)
	if err := l.Append([]byte("more"), true); err == nil || l.Err() == nil {
		t.Fatal("Append after a failed sync succeeded: the failure must be sticky")
	}
	if got := readAll(t, l, 1); !bytes.Equal(got, data) {
		t.Fatal("bytes before the failure unreadable")
	}
	if err := l.Reset(testID, 20000); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]byte("after"), true); err != nil || l.Err() != nil {
		t.Fatalf("Append after Reset: %v", err)
	}
}

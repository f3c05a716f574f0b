package streamlog

import (
	"bytes"
	"errors"
	"os"
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

package history

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// syncFaultFS fails every Sync of the log's files while failing is set.
type syncFaultFS struct {
	streamlog.FS
	mu      sync.Mutex
	failing bool
}

var errSyncInjected = errors.New("injected: sync failed")

func (f *syncFaultFS) set(on bool) { f.mu.Lock(); f.failing = on; f.mu.Unlock() }

func (f *syncFaultFS) broken() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.failing }

func (f *syncFaultFS) OpenFile(name string, flag int, perm fs.FileMode) (streamlog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncFaultFile{file, f}, nil
}

type syncFaultFile struct {
	streamlog.File
	fs *syncFaultFS
}

func (f syncFaultFile) Sync() error {
	if f.fs.broken() {
		return errSyncInjected
	}
	return f.File.Sync()
}

// TestFollower: the follower appends what the stream publishes to the log
// under the stream's identity, and the log serves plans; a failed sync
// (everysec, nothing appended after it) stops the log at once, counted and
// with its error; Run returns once its context ends.
func TestFollower(t *testing.T) {
	ffs := &syncFaultFS{}
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	ffs.FS = streamlog.RootFS{Root: root}
	l, _, err := streamlog.Open(streamlog.Options{FS: ffs, MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := replid.New()
	h := newTestHistory(t, a, 100) // a sync completed: the stream from 101 on
	h.SetLog(l)
	f := NewFollower(h, l, hclog.NewNullLogger(), FollowerConfig{
		Fsync:       func() Fsync { return FsyncEverySec },
		BehindLimit: func() int64 { return 0 },
		Retry:       time.Hour, // one outage: no retry within the test
		SyncEvery:   10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	defer func() { cancel(); <-done }()

	if err := h.Stream().Append([]byte("*1\r\n$4\r\nPING\r\n")); err != nil { // offsets 101..114
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "the log to hold the stream", func() bool { _, last := l.Bounds(); return last == 114 })
	if id := l.Identity(); id.ReplID != a {
		t.Fatalf("log under replid %s, want the stream's %s", id.ReplID, a)
	}
	if plan, r := h.PlanPartial(a, 101, false); r != PartialAccepted {
		t.Fatalf("PlanPartial from the log's first byte: %s", r)
	} else if plan.Cursor != nil {
		plan.Cursor.Close()
	} else if plan.FromLog != nil {
		plan.FromLog.Close()
	}
	if f.Down() || f.Errors() != 0 {
		t.Fatalf("down %v with %d errors before any fault", f.Down(), f.Errors())
	}

	ffs.set(true)
	redistest.WaitFor(t, 10*time.Second, "the failed sync to stop the log", f.Down)
	if f.Errors() != 1 || !strings.Contains(f.LastError(), "sync failed") || !strings.Contains(f.LastError(), "injected") {
		t.Fatalf("%d errors, last %q; want one, the failed sync's", f.Errors(), f.LastError())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return once its context ended")
	}
}

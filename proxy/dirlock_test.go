package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/streamlog"
)

// TestDirLockedWithoutLog: a second proxy on the dir of a
// running one refuses to start even with the stream log off, before it
// touches a file: the first one's snapshot on disk survives, and it still
// serves it. CONFIG SET dir to a dir another proxy holds is refused too.
func TestDirLockedWithoutLog(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 1000, "key", 100)
	dir := t.TempDir()
	_, xc := startProxyOf(t, primary, "--dir", dir)
	waitSnapshotOnDisk(t, xc)
	files := []string{snapfile.FileName, snapfile.MetaName}
	before := map[string]os.FileInfo{}
	for _, name := range files {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		before[name] = fi
	}

	cfg, err := config.Parse([]string{"--port", "0", "--bind", "127.0.0.1", "--dir", dir, "--repl-log-size", "0"})
	if err != nil {
		t.Fatal(err)
	}
	if srv, err := New(cfg, Options{Logger: hclog.NewNullLogger()}); !errors.Is(err, streamlog.ErrDirLocked) {
		if srv != nil {
			srv.Close()
		}
		t.Errorf("second proxy (repl-log-size 0) on the same dir: %v, want streamlog.ErrDirLocked", err)
	}
	for _, name := range files {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !os.SameFile(fi, before[name]) {
			t.Fatalf("the running proxy's %s after a second start on its dir: %v", name, err)
		}
	}

	// A new replica still gets the snapshot on disk: no fork, no fetch.
	forks := pc.InfoInt(t, "stats", "total_forks")
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
		t.Errorf("primary total_forks %d→%d: the snapshot on disk was not served", forks, got)
	}

	// CONFIG SET dir, log off: the lock moves with dir, and a held dir is
	// refused.
	other := startProxy(t, "--repl-log-size", "0")
	oc := redistest.Dial(t, other.AddrString())
	if _, err := oc.Do("CONFIG", "SET", "dir", dir); err == nil || !strings.Contains(err.Error(), streamlog.ErrDirLocked.Error()) {
		t.Errorf("CONFIG SET dir to a held dir: %v, want %q", err, streamlog.ErrDirLocked)
	}
	free := t.TempDir()
	oc.MustDo(t, "CONFIG", "SET", "dir", free)
	if _, err := streamlog.LockDir(free); !errors.Is(err, streamlog.ErrDirLocked) {
		t.Errorf("after CONFIG SET dir, the new dir's lock: %v, want held", err)
	}
}

package proxy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
)

// spillSnapshot returns a complete snapshot holding testdata's small RDB,
// taken at (replID, offset), released when the test ends.
func spillSnapshot(t testing.TB, p *testProxy, replID string, offset int64) *replbuf.Snapshot {
	t.Helper()
	sn := replbuf.NewSnapshot(replID, offset, p.pool, time.Now())
	if err := sn.Append(linkRDB(t)); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sn.Release)
	return sn
}

// spillNow makes sn the proxy's newest snapshot and spills it to dir, as
// evict-snapshots does, waiting for the spill to finish.
func spillNow(t testing.TB, p *testProxy, sn *replbuf.Snapshot, dir string) {
	t.Helper()
	p.hist.SetNewest(sn)
	if p.hist.Evict(history.SnapshotID(sn)) != sn {
		t.Fatal("the newest snapshot was not handed out to spill")
	}
	p.spill(context.Background(), sn, dir)
}

// spillDirNames lists dir's entries.
func spillDirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestSpillReplIDCannotEscapeDir: the replication ID comes from the primary;
// whatever it holds, the spill writes one file inside dir, under a name the
// proxy chose, and nothing anywhere else.
func TestSpillReplIDCannotEscapeDir(t *testing.T) {
	for _, replID := range []string{
		"x/../../outside",
		"../../../../../../../../../../../../../tmp",
		"/abs/olute/path/that/is/forty/chars/long",
		"a\x00b",
	} {
		t.Run(filepath.Base(replID), func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "dir")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			p := startProxy(t, "--dir", dir)
			spillNow(t, p, spillSnapshot(t, p, replID, 7), dir)
			if got := spillDirNames(t, base); !slices.Equal(got, []string{"dir"}) {
				t.Fatalf("spill wrote beside dir: %q", got)
			}
			if got := spillDirNames(t, dir); !slices.Equal(got, []string{logDirName, snapfile.MetaName, snapfile.FileName, lockFileName}) {
				t.Fatalf("dir holds %q, want only %q, its metadata and the stream log's", got, snapfile.FileName)
			}
			sp := p.hist.SpilledSnapshot()
			if sp == nil || sp.ReplID != replID || sp.Offset != 7 {
				t.Fatalf("spilled record %+v: the replid and offset stay in memory", sp)
			}
		})
	}
}

// TestSpillIgnoresPlantedSymlinks: symlinks planted where the spill writes
// (its final name, the temporary name it is about to pick, and the names
// earlier versions used) are never followed: their targets stay untouched,
// and the snapshot still lands in dir.
func TestSpillIgnoresPlantedSymlinks(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "--dir", dir)
	const replID = "3e6f7fa1b2ac2025fc6edcca60effe8ade398925"
	sn := spillSnapshot(t, p, replID, 1000)

	// The first random draw names a planted link; the second is free; the
	// third names the metadata's temporary file (the stream log is on).
	planted := "replproxy-snapshot-0101010101010101.tmp"
	p.spillRand = bytes.NewReader(slices.Concat(bytes.Repeat([]byte{1}, 8), bytes.Repeat([]byte{2}, 8), bytes.Repeat([]byte{3}, 8)))
	names := []string{
		snapfile.FileName,
		planted,
		"replproxy-" + replID + "-1000.rdb",
		"replproxy-" + replID + "-1000.rdb.tmp",
	}
	const victim = "precious data\n"
	var targets []string
	for i, name := range names {
		target := filepath.Join(base, "target"+itoa(int64(i)))
		if err := os.WriteFile(target, []byte(victim), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	spillNow(t, p, sn, dir)

	for _, target := range targets {
		if b, err := os.ReadFile(target); err != nil || string(b) != victim {
			t.Fatalf("symlink target %s: %q %v; the spill followed a link", target, b, err)
		}
	}
	fi, err := os.Lstat(filepath.Join(dir, snapfile.FileName))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v %v, want the spilled regular file in place of the link", snapfile.FileName, fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, snapfile.FileName)); !bytes.Equal(b, linkRDB(t)) {
		t.Fatal("spilled file does not hold the snapshot")
	}
	if fi, err := os.Lstat(filepath.Join(dir, planted)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("planted link %s: %v %v, want it left alone", planted, fi, err)
	}
}

// TestSpillLeftoversRemovedAtStart: a spilled snapshot cannot be served after
// a restart (nothing records its replid), and a temporary file is a spill
// that never finished: both are removed at start, with the files of earlier
// versions; nothing else in dir is touched.
func TestSpillLeftoversRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	leftovers := []string{
		snapfile.FileName,
		"replproxy-snapshot-0123456789abcdef.tmp",
		"replproxy-snapshot-.tmp",
		"replproxy-3e6f7fa1b2ac2025fc6edcca60effe8ade398925-1000.rdb",
		"replproxy-3e6f7fa1b2ac2025fc6edcca60effe8ade398925-1000.rdb.tmp",
	}
	kept := []string{
		"dump.rdb",
		"replproxy.conf",
		"replproxy-snapshot.rdb.bak",
		"replproxy-notes.tmp",
		"replproxy-3e6f7fa1b2ac2025fc6edcca60effe8ade39892-1000.rdb", // 39 hex
	}
	for _, name := range append(slices.Clone(leftovers), kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startProxy(t, "--dir", dir)
	got := spillDirNames(t, dir)
	kept = append(kept, logDirName, lockFileName) // the stream log's
	slices.Sort(kept)
	if !slices.Equal(got, kept) {
		t.Fatalf("dir after start holds %q, want %q", got, kept)
	}
}

// TestSpillOpenedOnlyIfUnchanged: a full sync is served from the spilled
// file only while dir still holds the very file the proxy wrote. A FIFO, a
// symlink or another file put in its place is refused (without blocking)
// and the sync falls back to a fetch.
func TestSpillOpenedOnlyIfUnchanged(t *testing.T) {
	cases := []struct {
		name    string
		replace func(t *testing.T, path string)
		served  bool
	}{
		{"unchanged", func(t *testing.T, path string) {}, true},
		{"fifo", func(t *testing.T, path string) {
			os.Remove(path)
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"symlink to a copy", func(t *testing.T, path string) {
			cp := filepath.Join(t.TempDir(), "copy.rdb")
			if err := os.WriteFile(cp, linkRDB(t), 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			if err := os.Symlink(cp, path); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another file of the same size", func(t *testing.T, path string) {
			other := path + ".other"
			if err := os.WriteFile(other, linkRDB(t), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startProxy(t, "--dir", dir)
			replID := p.hist.Identity().ReplID
			spillNow(t, p, spillSnapshot(t, p, replID, p.hist.Stream().Offset()), dir)
			sp := p.hist.SpilledSnapshot()
			if sp == nil {
				t.Fatal("nothing spilled")
			}
			tc.replace(t, filepath.Join(dir, snapfile.FileName))

			type result struct {
				plan history.Plan
				err  error
			}
			done := make(chan result, 1)
			go func() {
				plan, err := p.planFull()
				done <- result{plan, err}
			}()
			var res result
			select {
			case res = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("planning a full sync blocked on the spilled file")
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.plan.Cursor != nil {
				res.plan.Cursor.Close()
			}
			if res.plan.File != nil {
				res.plan.File.Close()
			}
			if served := res.plan.File != nil; served != tc.served {
				t.Fatalf("served from the spilled file: %v, want %v", served, tc.served)
			}
			if !tc.served && res.plan.Fetch == nil {
				t.Fatal("refused file, but no fetch planned")
			}
			forgotten := p.hist.SpilledSnapshot() == nil
			if forgotten == tc.served {
				t.Fatalf("spilled record forgotten: %v; want it forgotten only once refused", forgotten)
			}
		})
	}
}

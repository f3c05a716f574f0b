package snapshots

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
)

// newDirKeeper is a Keeper of a new history writing to dir with the stream
// log's metadata (Durable), as a proxy with the log on; its leftovers in dir
// are removed, as at a proxy's start. It is not run: spillNow writes on the
// test's goroutine, and a fetch it plans is never made.
func newDirKeeper(t *testing.T, dir string) *Keeper {
	t.Helper()
	pool := replbuf.NewPool(0)
	h := newHistory(pool)
	t.Cleanup(h.Close)
	src := &fakeSource{connected: true, hist: h, pool: pool}
	k := New(Options{History: h, Source: src, Host: fakeHost{}, Settings: Settings{Primary: testPrimary, Dir: dir}, Durable: true,
		Backoff: func(time.Duration) time.Duration { return time.Millisecond }})
	t.Cleanup(func() { k.Close() })
	k.RemoveLeftovers(dir)
	return k
}

// spillSnapshot returns a complete snapshot holding testRDB, taken at
// (replID, offset), released when the test ends.
func spillSnapshot(t testing.TB, k *Keeper, replID string, offset int64) *replbuf.Snapshot {
	t.Helper()
	sn := replbuf.NewSnapshot(replID, offset, replbuf.NewPool(0), time.Now())
	if err := sn.Append(testRDB); err != nil {
		t.Fatal(err)
	}
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sn.Release)
	return sn
}

// spillNow makes sn the history's newest snapshot and spills it to dir, as
// evict-snapshots does (Evict), on the test's goroutine.
func spillNow(t testing.TB, k *Keeper, sn *replbuf.Snapshot, dir string) {
	t.Helper()
	k.hist.SetNewest(sn)
	if k.hist.Evict(history.SnapshotID(sn)) != sn {
		t.Fatal("the newest snapshot was not handed out to spill")
	}
	k.writeSnapshot(context.Background(), sn, dir, true)
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
			k := newDirKeeper(t, dir)
			spillNow(t, k, spillSnapshot(t, k, replID, 7), dir)
			if got := spillDirNames(t, base); !slices.Equal(got, []string{"dir"}) {
				t.Fatalf("spill wrote beside dir: %q", got)
			}
			if got := spillDirNames(t, dir); !slices.Equal(got, []string{snapfile.MetaName, snapfile.FileName}) {
				t.Fatalf("dir holds %q, want only %q and its metadata", got, snapfile.FileName)
			}
			sp := k.hist.SpilledSnapshot()
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
	k := newDirKeeper(t, dir)
	const replID = "3e6f7fa1b2ac2025fc6edcca60effe8ade398925"
	sn := spillSnapshot(t, k, replID, 1000)

	// The first random draw names a planted link; the second is free; the
	// third names the metadata's temporary file (the stream log is on).
	planted := "replproxy-snapshot-0101010101010101.tmp"
	k.random = bytes.NewReader(slices.Concat(bytes.Repeat([]byte{1}, 8), bytes.Repeat([]byte{2}, 8), bytes.Repeat([]byte{3}, 8)))
	names := []string{
		snapfile.FileName,
		planted,
		"replproxy-" + replID + "-1000.rdb",
		"replproxy-" + replID + "-1000.rdb.tmp",
	}
	const victim = "precious data\n"
	var targets []string
	for i, name := range names {
		target := filepath.Join(base, "target"+strconv.Itoa(i))
		if err := os.WriteFile(target, []byte(victim), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	spillNow(t, k, sn, dir)

	for _, target := range targets {
		if b, err := os.ReadFile(target); err != nil || string(b) != victim {
			t.Fatalf("symlink target %s: %q %v; the spill followed a link", target, b, err)
		}
	}
	fi, err := os.Lstat(filepath.Join(dir, snapfile.FileName))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v %v, want the spilled regular file in place of the link", snapfile.FileName, fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, snapfile.FileName)); !bytes.Equal(b, testRDB) {
		t.Fatal("spilled file does not hold the snapshot")
	}
	if fi, err := os.Lstat(filepath.Join(dir, planted)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("planted link %s: %v %v, want it left alone", planted, fi, err)
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
			if err := os.WriteFile(cp, testRDB, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(path)
			if err := os.Symlink(cp, path); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another file of the same size", func(t *testing.T, path string) {
			other := path + ".other"
			if err := os.WriteFile(other, testRDB, 0o600); err != nil {
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
			k := newDirKeeper(t, dir)
			replID := k.hist.Identity().ReplID
			spillNow(t, k, spillSnapshot(t, k, replID, k.hist.Stream().Offset()), dir)
			sp := k.hist.SpilledSnapshot()
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
				plan, err := k.PlanFull()
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
			forgotten := k.hist.SpilledSnapshot() == nil
			if forgotten == tc.served {
				t.Fatalf("spilled record forgotten: %v; want it forgotten only once refused", forgotten)
			}
		})
	}
}

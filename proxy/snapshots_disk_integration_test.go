package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replid"
)

// waitSnapshotOnDisk waits until the proxy's newest snapshot is on disk and
// no longer in memory, and checks that this was no eviction.
func waitSnapshotOnDisk(t testing.TB, xc *redistest.Client) {
	t.Helper()
	redistest.WaitFor(t, 15*time.Second, "the snapshot on disk and out of memory", func() bool {
		return xc.Info(t, "persistence")["repl_snapshot_on_disk"] == "1" && memInfo(t, xc)["mem_snapshots"] == 0
	})
	if ev := xc.InfoInt(t, "stats", "evicted_snapshots"); ev != 0 {
		t.Fatalf("evicted_snapshots %d: writing the snapshot for the stream log is no eviction", ev)
	}
}

// editSnapshotMeta rewrites the snapshot's metadata in dir with edit.
func editSnapshotMeta(t testing.TB, dir string, edit func(*snapfile.Meta)) {
	t.Helper()
	path := filepath.Join(dir, snapfile.MetaName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m snapfile.Meta
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotOnDiskRestart: the proxy's snapshot
// goes to dir as soon as it is complete (memory drops it, and it is no
// eviction); after a clean restart a new replica, never synced, gets its full
// sync from that file and the stream log after it, with no fork on the
// primary, and ends with the primary's data. A file that is corrupt (by its
// CRC64, or by the RDB walk though its metadata agrees with it), or that the
// log no longer continues, is not adopted (and removed, saying why): the new
// replica then gets a fresh fetch.
func TestSnapshotOnDiskRestart(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, dir string)
		adopted bool
		why     string // in the log line of a refusal
	}{
		{"clean", func(*testing.T, string) {}, true, ""},
		{"flipped byte", func(t *testing.T, dir string) {
			path := filepath.Join(dir, snapfile.FileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x01
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false, snapfile.FileName + ": "}, // refused by the walk or by the CRC64, whichever meets the byte first
		{"junk under a zero checksum, its metadata sound", func(t *testing.T, dir string) {
			// What an attacker's source once had the proxy keep: the file
			// and its metadata agree (size, CRC64), only the walk refuses it.
			junk := redistest.JunkRDB()
			if err := os.WriteFile(filepath.Join(dir, snapfile.FileName), junk, 0o600); err != nil {
				t.Fatal(err)
			}
			editSnapshotMeta(t, dir, func(m *snapfile.Meta) { m.Size, m.CRC64 = int64(len(junk)), rdbcheck.CRC64(0, junk) })
		}, false, "corrupt RDB"},
		{"stale: the log does not continue it", func(t *testing.T, dir string) {
			editSnapshotMeta(t, dir, func(m *snapfile.Meta) { m.Offset -= 10 })
		}, false, "not the stream after offset"},
		{"another replid", func(t *testing.T, dir string) {
			editSnapshotMeta(t, dir, func(m *snapfile.Meta) { m.ReplID = replid.New() })
		}, false, "is not the stream log's"},
		{"metadata gone", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, snapfile.MetaName)); err != nil {
				t.Fatal(err)
			}
		}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			primary, pc := startPrimary(t)
			pc.MustDo(t, "DEBUG", "POPULATE", 2000, "key", 100)
			// A direct replica gives the primary a backlog, so that its
			// offset, and the proxy's snapshot's, are past 0.
			_, direct := redistest.StartReplicas(t, 1, primary.Addr())
			// Written once the replica is attached, or the primary, having
			// no backlog yet, leaves its offset at 0 and the stale case's
			// edited offset is refused as out of range instead.
			redistest.WaitFor(t, 15*time.Second, "the direct replica attached", func() bool {
				return pc.InfoInt(t, "replication", "connected_slaves") == 1
			})
			writeValues(t, pc, "before", 10, 100)
			redistest.WaitSynced(t, pc, direct...)
			if off := pc.InfoInt(t, "replication", "master_repl_offset"); off <= 10 {
				t.Fatalf("primary master_repl_offset %d after the writes: want past 10", off)
			}
			p := newTestProxy(t, proxySetup{args: append(replicaOf(primary), "--dir", dir)})
			xc := redistest.Dial(t, p.AddrString())
			waitLinkUp(t, xc)
			waitSnapshotOnDisk(t, xc)
			if !p.Log.Contains("snapshot written to disk") {
				t.Fatal("no log line for the snapshot written to disk")
			}
			writeValues(t, pc, "k", 200, 1000)
			waitOffsetsEqual(t, pc, xc)
			waitLogged(t, pc, xc)

			p2, x2 := restartProxy(t, p, dir, primary, pc, nil, func() { tc.damage(t, dir) })
			waitLinkUp(t, x2)
			forks, full := pc.InfoInt(t, "stats", "total_forks"), pc.InfoInt(t, "stats", "sync_full")
			if got := x2.Info(t, "persistence")["repl_snapshot_on_disk"] == "1"; got != tc.adopted {
				t.Fatalf("snapshot on disk after the restart: %v, want %v", got, tc.adopted)
			}
			if tc.adopted != p2.Log.Contains("snapshot on disk adopted") {
				t.Fatalf("adopted %v, but the log says otherwise", tc.adopted)
			}
			if tc.why != "" && !p2.Log.Contains(tc.why) {
				t.Fatalf("the refusal was not logged with %q", tc.why)
			}
			if !tc.adopted {
				if _, err := os.Lstat(filepath.Join(dir, snapfile.FileName)); err == nil {
					t.Fatal("a snapshot that was not adopted is still in dir")
				}
			}

			_, rcs := redistest.StartReplicas(t, 1, x2.Addr())
			redistest.WaitSynced(t, pc, rcs...)
			writeValues(t, pc, "after", 100, 1000)
			redistest.WaitSynced(t, pc, rcs...)
			gotForks, gotFull := pc.InfoInt(t, "stats", "total_forks"), pc.InfoInt(t, "stats", "sync_full")
			fetches := x2.InfoInt(t, "proxy", "snapshot_fetches")
			if tc.adopted {
				if gotForks != forks || gotFull != full || fetches != 0 {
					t.Fatalf("primary total_forks %d→%d, sync_full %d→%d, proxy snapshot_fetches %d: want no fork, no sync, no fetch",
						forks, gotForks, full, gotFull, fetches)
				}
			} else if gotFull != full+1 || fetches != 1 {
				t.Fatalf("primary sync_full %d→%d, proxy snapshot_fetches %d: want one fresh fetch", full, gotFull, fetches)
			}
			if got := x2.InfoInt(t, "stats", "sync_full"); got != 1 {
				t.Fatalf("proxy sync_full %d, want 1 (the new replica)", got)
			}
		})
	}
}

// TestSnapshotRefetchBeforeStale: under repl-snapshot-refresh, with a small
// repl-log-size, once the stream written since the snapshot on disk nears
// what the log keeps, the proxy fetches a fresh snapshot in the background,
// with no replica asking (one fetch), so that a new replica's full sync then
// needs no fork.
func TestSnapshotRefetchBeforeStale(t *testing.T) {
	primary, pc := startPrimary(t)
	p, xc := startProxyOf(t, primary, "--repl-log-size", "1mb", "--repl-snapshot-refresh", "1")
	waitSnapshotOnDisk(t, xc)
	first := xc.InfoInt(t, "persistence", "repl_snapshot_offset")
	full := pc.InfoInt(t, "stats", "sync_full")

	writeValues(t, pc, "k", 100, 10<<10) // 1 MB: past 3/4 of the log
	redistest.WaitFor(t, 15*time.Second, "a fresh snapshot on disk", func() bool {
		info := xc.Info(t, "persistence")
		return info["repl_snapshot_on_disk"] == "1" && info["repl_snapshot_offset"] != itoa(first)
	})
	if !p.Log.Contains("fetching a fresh snapshot") {
		t.Fatal("no log line for the background fetch")
	}
	if got := pc.InfoInt(t, "stats", "sync_full"); got != full+1 {
		t.Fatalf("primary sync_full %d→%d, want one background fetch", full, got)
	}
	if off, last := xc.InfoInt(t, "persistence", "repl_snapshot_offset"), xc.InfoInt(t, "persistence", "repl_log_last_offset"); last-off >= 3<<18 {
		t.Fatalf("the fresh snapshot at %d is as far behind the log's end %d as the old one", off, last)
	}

	forks := pc.InfoInt(t, "stats", "total_forks")
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
		t.Fatalf("primary total_forks %d→%d: the new replica's full sync waited for a fork", forks, got)
	}
	if got := xc.InfoInt(t, "proxy", "snapshot_fetches"); got != 1 {
		t.Fatalf("snapshot_fetches %d, want 1", got)
	}
	if got := xc.InfoInt(t, "proxy", "snapshot_fetches_refresh"); got != 1 {
		t.Fatalf("snapshot_fetches_refresh %d, want 1", got)
	}
}

// TestSnapshotMaxStreamSince: repl-snapshot-max-stream-since, not the log's
// size, sets how much stream may pass since the snapshot on disk before the
// background refetch under repl-snapshot-refresh; INFO
// repl_snapshot_stream_since shows the stream since the held snapshot, and
// falls back once the fresh one is in place. CONFIG SET moves the bound.
func TestSnapshotMaxStreamSince(t *testing.T) {
	primary, pc := startPrimary(t, "--repl-ping-replica-period", "3600")
	// 1gb of log: ¾ of it (the default bound) is never reached here.
	_, xc := startProxyOf(t, primary, "--repl-snapshot-refresh", "1", "--repl-snapshot-max-stream-since", "1mb")
	waitSnapshotOnDisk(t, xc)
	first := xc.InfoInt(t, "persistence", "repl_snapshot_offset")
	full := pc.InfoInt(t, "stats", "sync_full")

	writeValues(t, pc, "ms", 50, 10<<10) // 500 KiB: within the bound
	waitOffsetsEqual(t, pc, xc)
	since := xc.InfoInt(t, "persistence", "repl_snapshot_stream_since")
	if since < 500<<10 || since != xc.InfoInt(t, "replication", "master_repl_offset")-first {
		t.Fatalf("repl_snapshot_stream_since %d, want the stream since the snapshot at %d", since, first)
	}
	if got := pc.InfoInt(t, "stats", "sync_full"); got != full {
		t.Fatalf("primary sync_full %d→%d: a fetch within repl-snapshot-max-stream-since", full, got)
	}

	xc.MustDo(t, "CONFIG", "SET", "repl-snapshot-max-stream-since", "256kb")
	if got := xc.MustDo(t, "CONFIG", "GET", "repl-snapshot-max-stream-since").Array(); len(got) != 2 || got[1].String() != "262144" {
		t.Fatalf("CONFIG GET repl-snapshot-max-stream-since = %v", got)
	}
	redistest.WaitFor(t, 15*time.Second, "a fresh snapshot on disk", func() bool {
		info := xc.Info(t, "persistence")
		return info["repl_snapshot_on_disk"] == "1" && info["repl_snapshot_offset"] != itoa(first)
	})
	if got := xc.InfoInt(t, "proxy", "snapshot_fetches_refresh"); got != 1 {
		t.Fatalf("snapshot_fetches_refresh %d, want 1", got)
	}
	if got := pc.InfoInt(t, "stats", "sync_full"); got != full+1 {
		t.Fatalf("primary sync_full %d→%d, want one background fetch", full, got)
	}
	if since := xc.InfoInt(t, "persistence", "repl_snapshot_stream_since"); since >= 256<<10 {
		t.Fatalf("repl_snapshot_stream_since %d after the refetch, want under the bound", since)
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
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	kept = append(kept, logDirName, lockFileName) // the stream log's
	slices.Sort(kept)
	if !slices.Equal(got, kept) {
		t.Fatalf("dir after start holds %q, want %q", got, kept)
	}
}

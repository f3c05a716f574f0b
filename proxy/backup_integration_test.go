package proxy

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// Backups through the proxy (REPLCONF rdb-only 1, what redis-cli --rdb
// sends): the file must hold what the primary holds when it is asked for,
// never an older snapshot the proxy happens to keep.

// quietPrimary starts a primary that puts nothing in the stream unless
// written to: its replication PINGs (every 10 s by default) would otherwise
// make any held snapshot "behind" the stream by a few bytes.
func quietPrimary(t *testing.T, args ...string) (*redistest.Server, *redistest.Client) {
	t.Helper()
	return startPrimary(t, append([]string{"--repl-ping-replica-period", "3600"}, args...)...)
}

// keysRead matches redis-check-rdb's count of the keys a file holds.
var keysRead = regexp.MustCompile(`\[info\] (\d+) keys read`)

// backupKeys takes a backup with redis-cli --rdb from addr and returns the
// number of keys redis-check-rdb reads in the file, with the file's path.
func backupKeys(t *testing.T, addr string) (keys int64, file string) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	file = filepath.Join(t.TempDir(), "backup.rdb")
	out := redistest.RedisCLI(t, "-h", host, "-p", port, "--rdb", file)
	if !strings.Contains(out, "Transfer finished with success") {
		t.Fatalf("redis-cli --rdb:\n%s", out)
	}
	return checkRDB(t, file), file
}

// checkRDB runs redis-check-rdb on file and returns the keys it read.
func checkRDB(t *testing.T, file string) int64 {
	t.Helper()
	checker := redistest.RequireTool(t, "redis-check-rdb")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, checker, file)
	cmd.WaitDelay = time.Second
	check, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(check), "RDB looks OK") {
		t.Fatalf("redis-check-rdb %s: %v\n%s", file, err, check)
	}
	m := keysRead.FindSubmatch(check)
	if m == nil {
		t.Fatalf("redis-check-rdb printed no key count:\n%s", check)
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// setKeys writes n new keys named prefix:i.
func setKeys(t *testing.T, c *redistest.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		if err := c.Send("SET", prefix+":"+strconv.Itoa(i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := c.Receive(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupAfterWrites: redis-cli --rdb through the proxy after writes
// yields the primary's keys at the time of the request (nothing is written
// during it), not the snapshot the proxy took at its own sync; a second
// backup with no stream since is served from the snapshot just fetched,
// without another fork.
func TestBackupAfterWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"log on", nil}, // the held snapshot lives on disk
		{"log off", []string{"--repl-log-size", "0"}}, // and in memory
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary, pc := quietPrimary(t)
			pc.MustDo(t, "DEBUG", "POPULATE", 1000, "bk:pop", 16)
			_, xc := startProxyOf(t, primary, tc.args...)
			waitOffsetsEqual(t, pc, xc)
			if since := xc.InfoInt(t, "persistence", "repl_snapshot_stream_since"); since != 0 {
				t.Fatalf("repl_snapshot_stream_since %d right after the proxy's sync, want 0", since)
			}

			setKeys(t, pc, "bk:new", 321)
			waitOffsetsEqual(t, pc, xc)
			if since := xc.InfoInt(t, "persistence", "repl_snapshot_stream_since"); since <= 0 {
				t.Fatalf("repl_snapshot_stream_since %d after writes, want the bytes written", since)
			}
			want := pc.MustDo(t, "DBSIZE").Integer()
			forks := pc.InfoInt(t, "stats", "total_forks")
			if got, _ := backupKeys(t, xc.Addr()); int64(got) != int64(want) {
				t.Fatalf("backup holds %d keys, the primary %d", got, want)
			}
			if got := pc.InfoInt(t, "stats", "total_forks"); got != forks+1 {
				t.Errorf("primary total_forks %d→%d, want one fork for the fresh snapshot", forks, got)
			}
			if got := xc.InfoInt(t, "proxy", "snapshot_fetches_backup"); got != 1 {
				t.Errorf("snapshot_fetches_backup %d, want 1", got)
			}

			// Nothing written since: the snapshot just fetched is as fresh.
			redistest.WaitFor(t, 10*time.Second, "the fetched snapshot held", func() bool {
				return xc.InfoInt(t, "persistence", "repl_snapshot_stream_since") == 0
			})
			if got, _ := backupKeys(t, xc.Addr()); int64(got) != int64(want) {
				t.Fatalf("second backup holds %d keys, the primary %d", got, want)
			}
			if got := pc.InfoInt(t, "stats", "total_forks"); got != forks+1 {
				t.Errorf("primary total_forks %d→%d: the second backup forked again", forks, got)
			}
		})
	}
}

// TestBackupAfterFailover: the proxy's primary is replaced by its replica
// (REPLICAOF NO ONE, the proxy re-pointed), which then takes writes. A
// backup through the proxy holds the new primary's keys, although the
// proxy still holds its snapshot from before the failover (servable through
// replid2) and continued by partial resync.
func TestBackupAfterFailover(t *testing.T) {
	oldPrimary, oc := quietPrimary(t)
	oc.MustDo(t, "DEBUG", "POPULATE", 500, "bk:pop", 16)
	newPrimary := redistest.StartServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(oldPrimary.Port()),
		"--repl-ping-replica-period", "3600", "--repl-diskless-sync-delay", "0")
	nc := redistest.Dial(t, newPrimary.Addr())
	redistest.WaitSynced(t, oc, nc)
	_, xc := startProxyOf(t, oldPrimary)
	waitOffsetsEqual(t, oc, xc)
	setKeys(t, oc, "bk:before", 100)
	waitOffsetsEqual(t, oc, xc)
	redistest.WaitSynced(t, oc, nc)

	nc.MustDo(t, "REPLICAOF", "NO", "ONE")
	xc.MustDo(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(newPrimary.Port()))
	redistest.WaitFor(t, 15*time.Second, "proxy following the new primary", func() bool {
		info := xc.Info(t, "replication")
		return info["master_port"] == strconv.Itoa(newPrimary.Port()) && info["master_link_status"] == "up"
	})
	setKeys(t, nc, "bk:after", 250)
	waitOffsetsEqual(t, nc, xc)
	if got := xc.InfoInt(t, "proxy", "upstream_full_syncs"); got != 1 {
		t.Fatalf("upstream_full_syncs %d: the proxy did not follow the failover by partial resync", got)
	}

	want := nc.MustDo(t, "DBSIZE").Integer()
	if got, _ := backupKeys(t, xc.Addr()); int64(got) != int64(want) {
		t.Fatalf("backup holds %d keys, the new primary %d", got, want)
	}
	if want != 850 {
		t.Fatalf("the new primary holds %d keys, want 850", want)
	}
}

// TestBackupMaxStreamSince: backup-max-stream-since lets a backup be served
// from a held snapshot that far behind, without a fork; past it, a fresh one
// is fetched.
func TestBackupMaxStreamSince(t *testing.T) {
	primary, pc := quietPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 200, "bk:pop", 16)
	_, xc := startProxyOf(t, primary, "--backup-max-stream-since", "64kb")
	waitOffsetsEqual(t, pc, xc)
	held := pc.MustDo(t, "DBSIZE").Integer()

	setKeys(t, pc, "bk:small", 10) // a few hundred bytes of stream
	waitOffsetsEqual(t, pc, xc)
	forks := pc.InfoInt(t, "stats", "total_forks")
	if got, _ := backupKeys(t, xc.Addr()); int64(got) != int64(held) {
		t.Fatalf("backup within the bound holds %d keys, want the held snapshot's %d", got, held)
	}
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
		t.Fatalf("primary total_forks %d→%d: a backup within the bound forked", forks, got)
	}

	writeValues(t, pc, "bk:big", 10, 10<<10) // 100 KiB: past the bound
	waitOffsetsEqual(t, pc, xc)
	want := pc.MustDo(t, "DBSIZE").Integer()
	if got, _ := backupKeys(t, xc.Addr()); int64(got) != int64(want) {
		t.Fatalf("backup past the bound holds %d keys, the primary %d", got, want)
	}
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks+1 {
		t.Fatalf("primary total_forks %d→%d, want one fork past the bound", forks, got)
	}

	// CONFIG SET moves the bound at once.
	xc.MustDo(t, "CONFIG", "SET", "backup-max-stream-since", "0")
	setKeys(t, pc, "bk:last", 1)
	waitOffsetsEqual(t, pc, xc)
	if got, _ := backupKeys(t, xc.Addr()); int64(got) != int64(want)+1 {
		t.Fatalf("backup holds %d keys, want %d", got, want+1)
	}
}

// replyOf is what a command got: the simple string, or the error's text.
func replyOf(t *testing.T, c *redistest.Client, args ...any) string {
	t.Helper()
	v, err := c.Do(args...)
	if err != nil {
		var re *redistest.ReplyError
		if errors.As(err, &re) {
			return "-" + re.Msg
		}
		t.Fatalf("%v: %v", args, err)
	}
	return v.String()
}

// TestFilteredRDB: REPLCONF rdb-filter-only is answered as the primary
// answers it (an empty filter, redis-cli --replica's, is +OK), a filtered
// SYNC needs capa eof as in Redis, and redis-cli --functions-rdb through the
// proxy gets the primary's functions and none of its keys (a fresh
// redis-server loading the file has the library and no key).
func TestFilteredRDB(t *testing.T) {
	primary, pc := quietPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 100, "fr:pop", 16)
	const lib = "#!lua name=frlib\nredis.register_function('frf', function() return 7 end)"
	pc.MustDo(t, "FUNCTION", "LOAD", lib)
	p, xc := startProxyOf(t, primary)
	waitOffsetsEqual(t, pc, xc)

	for _, args := range [][]any{
		{"REPLCONF", "rdb-filter-only", ""},
		{"REPLCONF", "rdb-filter-only", "functions"},
		{"REPLCONF", "rdb-filter-only", "functions keys"},
		{"REPLCONF", "rdb-only", "1", "rdb-filter-only", "x"},
	} {
		want := replyOf(t, redistest.Dial(t, primary.Addr()), args...)
		if got := replyOf(t, redistest.Dial(t, p.AddrString()), args...); got != want {
			t.Errorf("%q: proxy %q, primary %q", args, got, want)
		}
	}
	noEOF := func(addr string) string {
		c := redistest.Dial(t, addr)
		c.MustDo(t, "REPLCONF", "rdb-filter-only", "")
		return replyOf(t, c, "PSYNC", "?", "-1")
	}
	if got, want := noEOF(p.AddrString()), noEOF(primary.Addr()); got != want {
		t.Errorf("filtered PSYNC without capa eof: proxy %q, primary %q", got, want)
	}

	forks := pc.InfoInt(t, "stats", "total_forks")
	dir := t.TempDir()
	file := filepath.Join(dir, "functions.rdb")
	out := redistest.RedisCLI(t, "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port()), "--functions-rdb", file)
	if !strings.Contains(out, "Transfer finished with success") {
		t.Fatalf("redis-cli --functions-rdb:\n%s", out)
	}
	if n := checkRDB(t, file); n != 0 {
		t.Fatalf("the functions-only RDB holds %d keys", n)
	}
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks+1 {
		t.Errorf("primary total_forks %d→%d, want the one fork the same request costs it directly", forks, got)
	}
	if got := xc.InfoInt(t, "proxy", "snapshot_fetches_filtered"); got != 1 {
		t.Errorf("snapshot_fetches_filtered %d, want 1", got)
	}
	loaded := redistest.StartServer(t, "--dir", dir, "--dbfilename", "functions.rdb")
	lc := redistest.Dial(t, loaded.Addr())
	if n := lc.MustDo(t, "DBSIZE").Integer(); n != 0 {
		t.Errorf("loaded from the functions-only RDB: %d keys", n)
	}
	if got := lc.MustDo(t, "FCALL", "frf", 0).Integer(); got != 7 {
		t.Errorf("FCALL frf on the loaded RDB = %d, want 7", got)
	}
	// The proxy's own snapshot was left alone: a backup still has the keys.
	if n, _ := backupKeys(t, xc.Addr()); n != 100 {
		t.Errorf("a backup after it holds %d keys, want 100", n)
	}
}

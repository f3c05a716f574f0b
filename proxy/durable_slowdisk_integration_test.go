package proxy

import (
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/streamlog"
)

// slowFS is a disk whose segment writes take as long as rate bytes per
// second allows (0: as fast as the disk below): the sleep stands for the
// device's time, it synchronises nothing. While held (hold), every segment
// write waits until release: a disk that takes nothing.
type slowFS struct {
	streamlog.FS
	rate atomic.Int64
	held atomic.Pointer[chan struct{}]
}

// hold makes the segment writes wait until release.
func (f *slowFS) hold() {
	ch := make(chan struct{})
	f.held.Store(&ch)
}

// release lets the held writes go, and those after them.
func (f *slowFS) release() {
	if ch := f.held.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (f *slowFS) OpenFile(name string, flag int, perm fs.FileMode) (streamlog.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".seg") {
		return file, err
	}
	return slowFile{file, f}, nil
}

type slowFile struct {
	streamlog.File
	fs *slowFS
}

func (f slowFile) Write(p []byte) (int, error) {
	if ch := f.fs.held.Load(); ch != nil {
		<-*ch
	}
	if rate := f.fs.rate.Load(); rate > 0 {
		time.Sleep(time.Duration(int64(len(p)) * int64(time.Second) / rate))
	}
	return f.File.Write(p)
}

// TestLogSlowDisk: with the log's disk slowed
// below the stream's rate, memory stays within the window, the lag is
// reported in bytes and seconds, real replicas are unaffected (equal
// digests, no full sync), and the log catches up when it can and otherwise
// restarts as a new generation, counted, with one WARN each, and follows
// the stream again once the disk keeps up.
func TestLogSlowDisk(t *testing.T) {
	sfs := &slowFS{}
	primary, pc := startPrimary(t)
	p := newTestProxy(t, proxySetup{
		args: append(replicaOf(primary), "--repl-backlog-size", "1mb"),
		opts: Options{
			logFS:    func(inner streamlog.FS) streamlog.FS { sfs.FS = inner; return sfs },
			logRetry: 200 * time.Millisecond,
		},
	})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	_, rcs := redistest.StartReplicas(t, 2, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	waitLogged(t, pc, xc)
	fullSyncs := xc.InfoInt(t, "stats", "sync_full")
	persistence := func() map[string]string { return xc.Info(t, "persistence") }
	lagSeconds := func(info map[string]string) float64 {
		s, err := strconv.ParseFloat(info["repl_log_lag_seconds"], 64)
		if err != nil {
			t.Fatalf("repl_log_lag_seconds %q: %v", info["repl_log_lag_seconds"], err)
		}
		return s
	}

	// A disk slower than the stream, by less than the window: the log falls
	// behind, says by how much, and catches up.
	sfs.rate.Store(8 << 20)
	writeValues(t, pc, "slow", 40, 100<<10) // 4 MB: half a second of disk
	var behind map[string]string
	redistest.WaitFor(t, 10*time.Second, "the log's lag reported in bytes and seconds", func() bool {
		behind = persistence()
		return behind["repl_log_lag_bytes"] != "0" && lagSeconds(behind) > 0
	})
	redistest.WaitSynced(t, pc, rcs...)
	redistest.WaitFor(t, 20*time.Second, "the log to catch up", func() bool {
		info := persistence()
		return info["repl_log_lag_bytes"] == "0" && lagSeconds(info) == 0
	})
	waitLogged(t, pc, xc)
	if n := xc.InfoInt(t, "persistence", "repl_log_restarts"); n != 0 {
		t.Fatalf("repl_log_restarts %d after a lag within the window, want 0", n)
	}
	t.Logf("within the window: lag reported at %s bytes, %s s", behind["repl_log_lag_bytes"], behind["repl_log_lag_seconds"])
	firstBefore := xc.InfoInt(t, "persistence", "repl_log_first_offset")

	// Slower than the stream for far more than the window: what the proxy
	// pins beyond its backlog stays within the window plus what arrives
	// while one record (256 KiB, 64 ms here) is written, with room for a
	// loaded machine's scheduling (the slack), where a follower holding on
	// would pin all 96 MB.
	sfs.rate.Store(4 << 20)
	window, slack := logBehindLimit(p.config()), int64(32<<20)
	var peak, peakLag, maxLag int64
	var maxAge float64
	for i := range 48 { // 48 × 20 × 100 KB = 96 MB
		writeValues(t, pc, "fast"+itoa(int64(i))+"-", 20, 100<<10)
		info := xc.Info(t, "everything")
		num := func(k string) int64 {
			n, err := strconv.ParseInt(info[k], 10, 64)
			if err != nil {
				t.Fatalf("INFO %s = %q", k, info[k])
			}
			return n
		}
		if pinned := num("mem_total_replication_buffers") - num("mem_replication_backlog"); pinned > peak {
			peak, peakLag = pinned, num("repl_log_lag_bytes")
		}
		maxLag, maxAge = max(maxLag, num("repl_log_lag_bytes")), max(maxAge, lagSeconds(info))
	}
	redistest.WaitSynced(t, pc, rcs...)
	if peak > window+slack {
		t.Fatalf("the proxy pinned up to %d bytes beyond its backlog (the log %d behind), want at most %d", peak, peakLag, window+slack)
	}
	if maxLag == 0 || maxAge == 0 {
		t.Fatalf("the log's lag peaked at %d bytes, %.3f s; want both above 0", maxLag, maxAge)
	}
	restarts := xc.InfoInt(t, "persistence", "repl_log_restarts")
	if restarts < 1 {
		t.Fatal("repl_log_restarts 0 after the disk fell behind by more than the window")
	}

	// A disk that keeps up again: the log follows the stream as a new
	// generation, from after where it started before, with no error.
	sfs.rate.Store(0)
	writeValues(t, pc, "after", 10, 1000)
	redistest.WaitSynced(t, pc, rcs...)
	redistest.WaitFor(t, 20*time.Second, "the log following the stream again", func() bool {
		info := persistence()
		return info["repl_log_status"] == "ok" && info["repl_log_lag_bytes"] == "0" &&
			info["repl_log_last_offset"] == itoa(pc.InfoInt(t, "replication", "master_repl_offset"))
	})
	info := persistence()
	restarts = xc.InfoInt(t, "persistence", "repl_log_restarts")
	if first := xc.InfoInt(t, "persistence", "repl_log_first_offset"); first <= firstBefore {
		t.Fatalf("repl_log_first_offset %d after a restart, want past %d (a new generation)", first, firstBefore)
	}
	if info["repl_log_errors"] != "0" {
		t.Fatalf("repl_log_errors %s (%s): a slow disk is not a fault", info["repl_log_errors"], info["repl_log_last_error"])
	}
	if n := p.Log.Count("stream log fell behind the memory window"); int64(n) != restarts {
		t.Fatalf("%d WARN lines for %d restarts", n, restarts)
	}
	if full := xc.InfoInt(t, "stats", "sync_full"); full != fullSyncs {
		t.Fatalf("sync_full %d, was %d: the replicas were affected", full, fullSyncs)
	}
	t.Logf("96 MB past a 4 MB/s disk: pinned beyond the backlog at most %d bytes, lag up to %d bytes and %.3f s, %d restarts",
		peak, maxLag, maxAge, restarts)
}

// TestLogBlockedDisk: while the log's disk takes
// no write at all, replicas receive the stream as soon as with a disk that
// keeps up (a value written to the primary is readable on a replica of the
// proxy as quickly), the log's lag is reported and grows, what the proxy
// pins stays within the window, and once the disk takes writes again the
// log catches up, with no restart and no full sync.
func TestLogBlockedDisk(t *testing.T) {
	sfs := &slowFS{}
	t.Cleanup(sfs.release) // a write still held would hold the proxy's stop
	primary, pc := startPrimary(t)
	p := newTestProxy(t, proxySetup{
		args: replicaOf(primary),
		opts: Options{logFS: func(inner streamlog.FS) streamlog.FS { sfs.FS = inner; return sfs }},
	})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	waitLogged(t, pc, xc)
	fullSyncs := xc.InfoInt(t, "stats", "sync_full")

	const n, every = 60, 10 * time.Millisecond
	free := replicaLatencies(t, pc, rcs[0], "free", n, every)
	sfs.hold()
	held := replicaLatencies(t, pc, rcs[0], "held", n, every)
	info := xc.Info(t, "everything")
	num := func(k string) int64 {
		v, err := strconv.ParseInt(info[k], 10, 64)
		if err != nil {
			t.Fatalf("INFO %s = %q", k, info[k])
		}
		return v
	}
	lagBytes, lagSeconds := num("repl_log_lag_bytes"), info["repl_log_lag_seconds"]
	pinned := num("mem_total_replication_buffers") - num("mem_replication_backlog")
	sfs.release()

	f50, f90 := percentile(free, 50), percentile(free, 90)
	h50, h90 := percentile(held, 50), percentile(held, 90)
	t.Logf("write to replica: disk free p50 %v p90 %v; disk held p50 %v p90 %v; log %d bytes, %s s behind; pinned %d",
		f50, f90, h50, h90, lagBytes, lagSeconds, pinned)
	// The same latency, within what a loaded machine scatters: a relay
	// that waited for its disk would not deliver at all while it is held.
	if h50 > 2*f50+5*time.Millisecond || h90 > 2*f90+20*time.Millisecond {
		t.Fatalf("with the disk held, p50 %v and p90 %v, against %v and %v with it free", h50, h90, f50, f90)
	}
	if lagBytes == 0 || lagSeconds == "0" {
		t.Fatalf("the log's lag %d bytes, %s s with its disk held; want both above 0", lagBytes, lagSeconds)
	}
	if limit := logBehindLimit(p.config()); pinned > limit {
		t.Fatalf("pinned %d bytes beyond the backlog, over the window %d", pinned, limit)
	}
	waitLogged(t, pc, xc)
	if r := xc.InfoInt(t, "persistence", "repl_log_restarts"); r != 0 {
		t.Fatalf("repl_log_restarts %d after a hold within the window, want 0", r)
	}
	if full := xc.InfoInt(t, "stats", "sync_full"); full != fullSyncs {
		t.Fatalf("sync_full %d, was %d", full, fullSyncs)
	}
}

// replicaLatencies writes n values to the primary, one per every, and
// returns how long each took to be readable on the replica rc.
func replicaLatencies(t *testing.T, pc, rc *redistest.Client, prefix string, n int, every time.Duration) []time.Duration {
	t.Helper()
	out := make([]time.Duration, 0, n)
	for i := range n {
		key, val := prefix+itoa(int64(i)), strings.Repeat("v", 512)
		start := time.Now()
		pc.MustDo(t, "SET", key, val)
		for {
			v, err := rc.Do("GET", key)
			if err != nil {
				t.Fatal(err)
			}
			if v.String() == val {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s not on the replica after 10 s", key)
			}
		}
		out = append(out, time.Since(start))
		time.Sleep(every)
	}
	return out
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// TestLogWindowDirective: repl-log-window is the follower's window, shown in
// INFO persistence as it applies: at least the memory window.
func TestLogWindowDirective(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	window := func() string {
		t.Helper()
		for _, line := range strings.Split(a.do("INFO", "persistence"), "\r\n") {
			if v, ok := strings.CutPrefix(line, "repl_log_window:"); ok {
				return v
			}
		}
		t.Fatal("no repl_log_window in INFO persistence")
		return ""
	}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, "67108864"},
		{[]string{"repl-log-window", "128mb"}, "134217728"},
		{[]string{"repl-backlog-size", "256mb"}, "268435456"}, // the memory window is larger
		{[]string{"repl-backlog-size", "1mb"}, "134217728"},
	} {
		if tc.set != nil {
			if r := a.do(append([]string{"CONFIG", "SET"}, tc.set...)...); r != "+OK\r\n" {
				t.Fatalf("CONFIG SET %q: %q", tc.set, r)
			}
		}
		if got := window(); got != tc.want || strconv.FormatInt(logBehindLimit(p.config()), 10) != tc.want {
			t.Fatalf("after %q: repl_log_window %s, follower's limit %d; want %s", tc.set, got, logBehindLimit(p.config()), tc.want)
		}
	}
	if r := a.do("CONFIG", "SET", "repl-log-window", "1mb"); !strings.HasPrefix(r, "-ERR") {
		t.Fatalf("CONFIG SET repl-log-window 1mb: %q, want an error", r)
	}
}

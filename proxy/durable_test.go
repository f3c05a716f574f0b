package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/streamlog"
)

// writeValues writes n keys of size bytes each to the primary, pipelined.
func writeValues(t *testing.T, pc *redistest.Client, prefix string, n, size int) {
	t.Helper()
	dsSetBig(t, pc, prefix, n, n, size)
}

// waitLogged waits until the proxy's stream log holds the stream up to the
// primary's offset.
func waitLogged(t *testing.T, pc, xc *redistest.Client) {
	t.Helper()
	redistest.WaitFor(t, 15*time.Second, "the stream log up to the primary's offset", func() bool {
		return xc.Info(t, "persistence")["repl_log_last_offset"] == itoa(pc.InfoInt(t, "replication", "master_repl_offset"))
	})
}

// TestLogServesBeyondBacklog: a replica whose offset the 16 KiB memory
// backlog no longer holds continues by partial resync from the stream log,
// and ends with the primary's data.
func TestLogServesBeyondBacklog(t *testing.T) {
	primary, pc := startPrimary(t)
	_, xc := startProxyOf(t, primary, "--repl-backlog-size", "16kb", "--repl-log-size", "64mb")
	reps, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)

	reps[0].Pause()
	// 32 MB: more than the socket buffers hold, far past the memory backlog.
	writeValues(t, pc, "k", 320, 100<<10)
	waitOffsetsEqual(t, pc, xc)
	waitLogged(t, pc, xc)
	xc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	// The closed replica's cursor no longer pins the blocks: the next
	// publish trims them down to the backlog.
	writeValues(t, pc, "more", 10, 100)
	waitOffsetsEqual(t, pc, xc)
	if first := xc.InfoInt(t, "replication", "repl_backlog_first_byte_offset"); first < 1<<20 {
		t.Fatalf("the memory backlog still starts at %d", first)
	}
	reps[0].Resume()
	redistest.WaitSynced(t, pc, rcs...)

	info := xc.Info(t, "everything")
	for field, want := range map[string]string{
		"sync_full": "1", "sync_partial_ok": "1", "repl_log_partial_syncs": "1", "repl_log_status": "ok",
	} {
		if info[field] != want {
			t.Errorf("INFO %s = %q, want %s", field, info[field], want)
		}
	}
}

// restartProxy stops p (gracefully), writes more to the primary meanwhile,
// and starts a proxy on the same dir, pointing the replicas at it.
func restartProxy(t *testing.T, p *testProxy, dir string, primary *redistest.Server, pc *redistest.Client,
	rcs []*redistest.Client, between func()) (*testProxy, *redistest.Client) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	writeValues(t, pc, "while-down", 100, 1000)
	if between != nil {
		between()
	}
	p2 := newTestProxy(t, proxySetup{args: append(replicaOf(primary), "--dir", dir)})
	x2 := redistest.Dial(t, p2.AddrString())
	host, port, _ := strings.Cut(p2.AddrString(), ":")
	for _, rc := range rcs {
		rc.MustDo(t, "REPLICAOF", host, port)
	}
	return p2, x2
}

// logSetup runs a primary, a proxy on a dir of its own and n replicas of the
// proxy, all in sync after keys writes of 1000 bytes.
func logSetup(t *testing.T, n, keys int) (dir string, primary *redistest.Server, pc *redistest.Client, p *testProxy, rcs []*redistest.Client) {
	t.Helper()
	dir = t.TempDir()
	primary, pc = startPrimary(t)
	p = newTestProxy(t, proxySetup{args: append(replicaOf(primary), "--dir", dir)})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	_, rcs = redistest.StartReplicas(t, n, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	writeValues(t, pc, "k", keys, 1000)
	redistest.WaitSynced(t, pc, rcs...)
	return dir, primary, pc, p, rcs
}

// TestLogRestart: after a restart on the same dir the proxy continues from
// the primary by partial resync (no fork, no full sync there) and serves its
// replicas partial resyncs from the recovered log: no full sync anywhere.
func TestLogRestart(t *testing.T) {
	dir, primary, pc, p, rcs := logSetup(t, 3, 500)
	fullBefore, forksBefore := pc.InfoInt(t, "stats", "sync_full"), pc.InfoInt(t, "stats", "total_forks")
	partialBefore := pc.InfoInt(t, "stats", "sync_partial_ok")

	_, x2 := restartProxy(t, p, dir, primary, pc, rcs, nil)
	waitLinkUp(t, x2)
	writeValues(t, pc, "after", 100, 1000)
	redistest.WaitSynced(t, pc, rcs...)
	if got := pc.InfoInt(t, "stats", "sync_full"); got != fullBefore {
		t.Errorf("primary sync_full %d after the restart, want %d", got, fullBefore)
	}
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forksBefore {
		t.Errorf("primary total_forks %d after the restart, want %d", got, forksBefore)
	}
	if got := pc.InfoInt(t, "stats", "sync_partial_ok"); got != partialBefore+1 {
		t.Errorf("primary sync_partial_ok %d after the restart, want %d (the proxy's link)", got, partialBefore+1)
	}
	info := x2.Info(t, "everything")
	if info["sync_full"] != "0" || info["sync_partial_ok"] != "3" {
		t.Errorf("restarted proxy: sync_full %s, sync_partial_ok %s; want 0 and 3", info["sync_full"], info["sync_partial_ok"])
	}
}

// TestLogCorruptionCut: bytes flipped in the newest segment while the proxy
// is down are found at recovery, reported, and never sent: the log ends
// before them, the proxy fetches the rest from the primary, and the
// replicas, some of them ahead of the cut, end with the primary's data.
func TestLogCorruptionCut(t *testing.T) {
	dir, primary, pc, p, rcs := logSetup(t, 2, 300)

	p2, x2 := restartProxy(t, p, dir, primary, pc, rcs, func() {
		// The segments (named by their first offset), not the spare file
		// the log keeps ready for the next one.
		segs, err := filepath.Glob(filepath.Join(dir, logDirName, "[0-9]*.seg"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("no segments: %v", err)
		}
		newest := segs[len(segs)-1]
		fi, err := os.Stat(newest)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(newest, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte("XXXX"), fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	})
	if cut := x2.InfoInt(t, "persistence", "repl_log_recovery_cut_bytes"); cut <= 0 {
		t.Fatalf("repl_log_recovery_cut_bytes %d after a corruption, want > 0", cut)
	}
	if !p2.Log.Contains("stream log: cut while recovering") {
		t.Fatal("the corruption was not logged")
	}
	writeValues(t, pc, "after", 100, 1000)
	redistest.WaitSynced(t, pc, rcs...)
	if got := x2.InfoInt(t, "stats", "sync_full"); got != 0 {
		t.Errorf("restarted proxy sync_full %d, want 0", got)
	}
}

// TestLogDirLocked: a second proxy on a dir another one holds refuses to
// start, and leaves the first one's files alone.
func TestLogDirLocked(t *testing.T) {
	dir := t.TempDir()
	newTestProxy(t, proxySetup{args: []string{"--dir", dir}})
	cfg, err := config.Parse([]string{"--port", "0", "--bind", "127.0.0.1", "--dir", dir})
	if err != nil {
		t.Fatal(err)
	}
	if srv, err := New(cfg, Options{Logger: hclog.NewNullLogger()}); !errors.Is(err, streamlog.ErrDirLocked) {
		if srv != nil {
			srv.Close()
		}
		t.Fatalf("second proxy on the same dir: %v, want streamlog.ErrDirLocked", err)
	}
}

// faultFS makes every write and sync of the stream log fail while failing
// is set, and every sync alone while syncFailing is.
type faultFS struct {
	streamlog.FS
	mu          sync.Mutex
	failing     bool
	syncFailing bool
}

func (f *faultFS) set(on bool) { f.mu.Lock(); f.failing = on; f.mu.Unlock() }

func (f *faultFS) setSync(on bool) { f.mu.Lock(); f.syncFailing = on; f.mu.Unlock() }

func (f *faultFS) broken() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.failing }

func (f *faultFS) syncBroken() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failing || f.syncFailing
}

var errInjected = errors.New("injected: no space left on device")

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (streamlog.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) != 0 && f.broken() {
		return nil, errInjected
	}
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

type faultFile struct {
	streamlog.File
	fs *faultFS
}

func (f faultFile) Write(p []byte) (int, error) {
	if f.fs.broken() {
		return 0, errInjected
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if f.fs.syncBroken() {
		return errInjected
	}
	return f.File.Sync()
}

// TestLogDiskFailure: a disk that fails stops the log, never the relay: the
// replica keeps receiving the stream, INFO says the log is down (one WARN for
// the outage), and once the disk works the log resumes by itself.
func TestLogDiskFailure(t *testing.T) {
	ffs := &faultFS{}
	primary, pc := startPrimary(t)
	p := newTestProxy(t, proxySetup{
		args: replicaOf(primary),
		opts: Options{
			logFS:    func(inner streamlog.FS) streamlog.FS { ffs.FS = inner; return ffs },
			logRetry: 100 * time.Millisecond,
		},
	})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)

	ffs.set(true)
	for i := range 5 {
		writeValues(t, pc, "k"+itoa(int64(i)), 50, 1000)
		redistest.WaitSynced(t, pc, rcs...)
	}
	redistest.WaitFor(t, 10*time.Second, "repl_log_status:down", func() bool {
		return xc.Info(t, "persistence")["repl_log_status"] == "down"
	})
	// Retries fail meanwhile (every 100ms), each counted.
	redistest.WaitFor(t, 10*time.Second, "a failed retry counted", func() bool {
		return xc.InfoInt(t, "persistence", "repl_log_errors") >= 2
	})
	if info := xc.Info(t, "persistence"); !strings.Contains(info["repl_log_last_error"], "injected") {
		t.Fatalf("INFO persistence while the disk fails: %v", info)
	}
	if n := p.Log.Count("stream log stopped"); n != 1 {
		t.Fatalf("%d WARN lines for one outage, want 1", n)
	}

	ffs.set(false)
	redistest.WaitFor(t, 10*time.Second, "repl_log_status:ok", func() bool {
		return xc.Info(t, "persistence")["repl_log_status"] == "ok"
	})
	writeValues(t, pc, "after", 50, 1000)
	redistest.WaitSynced(t, pc, rcs...)
	waitLogged(t, pc, xc)
	if !p.Log.Contains("stream log resumed") {
		t.Fatal("no log line for the resumed log")
	}
}

// TestLogSyncFailureShows: a failed fsync (repl-log-fsync everysec, the
// disk otherwise fine, nothing appended after it) is a fault of the log like
// a failed write: the log stops at once, INFO persistence says
// repl_log_status:down with the sync's error, and one WARN says why, rather
// than INFO saying ok until the next append fails on the log's sticky
// error.
func TestLogSyncFailureShows(t *testing.T) {
	ffs := &faultFS{}
	primary, pc := startPrimary(t)
	// No PING from the primary meanwhile: nothing is appended after the
	// failure, so only the syncer can tell.
	pc.MustDo(t, "CONFIG", "SET", "repl-ping-replica-period", "3600")
	p := newTestProxy(t, proxySetup{
		args: replicaOf(primary),
		opts: Options{
			logFS:    func(inner streamlog.FS) streamlog.FS { ffs.FS = inner; return ffs },
			logRetry: time.Hour, // one outage, no retry within the test
		},
	})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	writeValues(t, pc, "k", 10, 100)
	waitLogged(t, pc, xc)

	// The syncer syncs what was appended since its last sync: one more
	// value, written while the disk fails syncs (its write succeeds).
	ffs.setSync(true)
	writeValues(t, pc, "last", 1, 100)
	redistest.WaitFor(t, 10*time.Second, "repl_log_status:down after a failed sync", func() bool {
		return xc.Info(t, "persistence")["repl_log_status"] == "down"
	})
	info := xc.Info(t, "persistence")
	if !strings.Contains(info["repl_log_last_error"], "sync") || !strings.Contains(info["repl_log_last_error"], "injected") {
		t.Fatalf("repl_log_last_error %q, want the failed sync's", info["repl_log_last_error"])
	}
	if n := xc.InfoInt(t, "persistence", "repl_log_errors"); n != 1 {
		t.Fatalf("repl_log_errors %d, want 1", n)
	}
	if n := p.Log.Count("stream log stopped"); n != 1 {
		t.Fatalf("%d WARN lines for the failed sync, want 1", n)
	}
}

// TestLogReplicaFallsBackToDisk: a replica
// SIGSTOPped while 96 MB pass, with a 1 MB memory backlog, moves to the stream
// log instead of pinning the stream: what it pins stays under the memory
// window (16 MiB) the whole time, and the replica, resumed, catches up from
// the log and then from memory with no full sync.
func TestLogReplicaFallsBackToDisk(t *testing.T) {
	primary, pc := startPrimary(t)
	_, xc := startProxyOf(t, primary, "--repl-backlog-size", "1mb")
	reps, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)

	reps[0].Pause()
	// What the proxy holds beyond the backlog is what cursors pin: the
	// replica's, at most the memory window (repl-backlog-size, at least 16
	// MiB) plus what arrives while one write slice (20 ms) runs out, here a
	// 1 MB burst, and the log follower's, what the disk has not taken yet
	// (the offset it lags by, read in the same INFO). Without the fallback
	// the stopped replica pins all 96 MB.
	const window, slack = minMemoryWindow, 4 << 20
	var peak, worst int64
	sample := func() {
		info := xc.Info(t, "everything")
		num := func(k string) int64 {
			n, err := strconv.ParseInt(info[k], 10, 64)
			if err != nil {
				t.Fatalf("INFO %s = %q", k, info[k])
			}
			return n
		}
		total := num("mem_total_replication_buffers")
		peak = max(peak, total)
		followerLag := num("master_repl_offset") - num("repl_log_last_offset")
		worst = max(worst, total-num("mem_replication_backlog")-followerLag)
	}
	for i := range 96 { // 96 × 10 × 100 KB = 96 MB, in bursts of 1 MB
		writeValues(t, pc, "k"+itoa(int64(i))+"-", 10, 100<<10)
		if i%4 == 0 {
			sample()
		}
	}
	waitOffsetsEqual(t, pc, xc)
	waitLogged(t, pc, xc)
	sample()
	if worst > window+slack {
		t.Fatalf("the stopped replica pinned up to %d bytes beyond the backlog and the log's lag, want under %d", worst, window+slack)
	}
	if moved := xc.InfoInt(t, "persistence", "repl_log_replicas_moved_to_disk"); moved < 1 {
		t.Fatalf("repl_log_replicas_moved_to_disk %d, want at least 1", moved)
	}
	reps[0].Resume()
	redistest.WaitSynced(t, pc, rcs...)
	if full := xc.InfoInt(t, "stats", "sync_full"); full != 1 {
		t.Fatalf("sync_full %d after the replica resumed, want 1 (its first sync only)", full)
	}
	t.Logf("while 96 MB passed a stopped replica: mem_total_replication_buffers peaked at %d; beyond the backlog and the log's lag, at %d", peak, worst)
}

// TestLogLagLimit: with the stream log, client-output-buffer-limit replica
// bounds how far behind a replica may be, not what it pins: a stopped
// replica, moved to the log, is dropped once it lags by the hard limit.
func TestLogLagLimit(t *testing.T) {
	primary, pc := startPrimary(t)
	_, xc := startProxyOf(t, primary, "--repl-backlog-size", "1mb", "--client-output-buffer-limit", "replica", "24mb", "0", "0")
	reps, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	reps[0].Pause()
	for i := range 12 { // 48 MB, past the socket buffers, the window and the limit
		writeValues(t, pc, "k"+itoa(int64(i))+"-", 40, 100<<10)
	}
	redistest.WaitFor(t, 10*time.Second, "the lagging replica dropped by the hard limit", func() bool {
		return xc.InfoInt(t, "proxy", "replicas_closed_output_hard_limit") == 1
	})
	if moved := xc.InfoInt(t, "persistence", "repl_log_replicas_moved_to_disk"); moved < 1 {
		t.Fatalf("repl_log_replicas_moved_to_disk %d: the replica was dropped before it moved to the log", moved)
	}
	reps[0].Resume()
	redistest.WaitSynced(t, pc, rcs...) // it comes back, by partial resync from the log
	if full := xc.InfoInt(t, "stats", "sync_full"); full != 1 {
		t.Fatalf("sync_full %d, want 1: the dropped replica continues from the log", full)
	}
}

// TestLogRecoveredOffsetsInRange: a meta.json that lists a
// segment near the largest int64 (a valid segment there, whose end would
// overflow) is not adopted: the proxy starts with an empty log, says why,
// and INFO never shows a negative offset.
func TestLogRecoveredOffsetsInRange(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, logDirName)
	if err := os.Mkdir(logDir, 0o700); err != nil {
		t.Fatal(err)
	}
	const first = 9223372036854770000
	data := []byte(strings.Repeat("*1\r\n$4\r\nPING\r\n", 1000))
	name := fmt.Sprintf("%020d", first)
	crcs := []byte("RPLCRC1\n")
	crcs = binary.LittleEndian.AppendUint32(crcs, uint32(len(data))|1<<31)
	crcs = binary.LittleEndian.AppendUint32(crcs, crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
	meta := fmt.Sprintf(`{"version":1,"replid":"%s","replid2":"%s","second_offset":-1,"start":0,"segments":[%d]}`,
		strings.Repeat("a", 40), strings.Repeat("0", 40), int64(first))
	for file, b := range map[string][]byte{name + ".seg": data, name + ".crc": crcs, "meta.json": []byte(meta)} {
		if err := os.WriteFile(filepath.Join(logDir, file), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := startProxy(t, "--dir", dir)
	xc := redistest.Dial(t, p.AddrString())
	info := xc.Info(t, "everything")
	for _, field := range []string{"master_repl_offset", "repl_log_first_offset", "repl_log_last_offset", "repl_backlog_first_byte_offset"} {
		if n, err := strconv.ParseInt(info[field], 10, 64); err != nil || n < 0 {
			t.Errorf("INFO %s = %q after recovering a log listed past the largest offset", field, info[field])
		}
	}
	if info["repl_log_replid"] == strings.Repeat("a", 40) {
		t.Error("the out-of-range log was adopted")
	}
	if !p.Log.Contains("out of range") {
		t.Error("the log line does not say why the log was not adopted")
	}
}

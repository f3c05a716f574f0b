package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// vmHWM returns a process's peak resident set size (VmHWM in
// /proc/<pid>/status), in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// bigSyncWait bounds each 2 GB transfer of TestLargeSnapshotBoundedRSS. The
// proxy is this test binary, built with -race when the suite is, and the
// suite shares two cores with its other packages: 2 GB took close to two
// minutes under that load, so the bound is a deadline against a hang, not a
// speed the test asks for.
const bigSyncWait = 5 * time.Minute

// TestLargeSnapshotBoundedRSS: a primary whose
// RDB is 2 GB (2048 values of 1 MiB, without compression, through a
// diskless sync: an EOF-marked payload) and a proxy (the real binary) with
// maxmemory 64mb and the stream log on, as by default. The proxy writes the
// payload to dir as it arrives: its peak RSS stays under 200 MB while it
// receives it and while a real replica syncs from it (the file, sent with
// sendfile), and the replica ends with the primary's data (DEBUG DIGEST).
// It costs the machine about 4 GB (the primary and the replica) and a
// minute on two shared cores. The declared-length case is
// TestDeclaredPayloadLargerThanDisk (package proxy), on a fake primary.
func TestLargeSnapshotBoundedRSS(t *testing.T) {
	redistest.Require(t)
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: the peak RSS cannot be read")
	}
	const (
		keys, valueSize = 2048, 1 << 20
		rssBound        = 200 << 20
	)
	dir := t.TempDir()
	xPort := redistest.FreePort(t)
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--rdbcompression", "no").Port()
	// DEBUG DIGEST of 2 GB takes seconds: longer than go-redis's 3 s read timeout.
	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2, ReadTimeout: time.Minute})
	defer pc.Close()
	ctx := context.Background()
	redistest.WaitFor(t, 10*time.Second, "the primary up", func() bool { return pc.Ping(ctx).Err() == nil })
	if err := pc.Do(ctx, "DEBUG", "POPULATE", keys, "key", valueSize).Err(); err != nil {
		t.Fatal(err)
	}

	proxyDir := filepath.Join(dir, "proxy")
	os.MkdirAll(proxyDir, 0o755)
	logfile := filepath.Join(dir, "replproxy.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("proxy log:\n%s", b)
		}
	})
	proxy := exec.Command(os.Args[0], "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
		"--maxmemory", "64mb", "--dir", proxyDir, "--logfile", logfile)
	proxy.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	checkJSONLog(t, logfile)
	redistest.StartProcess(t, proxy)
	xc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(xPort)), Protocol: 2})
	defer xc.Close()
	redistest.WaitFor(t, bigSyncWait, "the proxy's link up after its full sync", func() bool {
		return replInfo(xc, "master_link_status") == "up"
	})
	rdb := infoInt(t, xc, "upstream_rdb_bytes")
	afterSync := vmHWM(t, proxy.Process.Pid)
	t.Logf("payload of %d MB received: proxy peak RSS %d MB", rdb>>20, afterSync>>20)
	if rdb < 2*rssBound {
		t.Fatalf("payload of %d bytes is not well above the RSS bound: the test tests nothing", rdb)
	}
	if afterSync > rssBound {
		t.Errorf("proxy peak RSS %d MB while a %d MB payload arrived, want under %d MB", afterSync>>20, rdb>>20, rssBound>>20)
	}

	rPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(xPort)).Port()
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(rPort)), Protocol: 2, ReadTimeout: time.Minute})
	defer rc.Close()
	redistest.WaitFor(t, bigSyncWait, "the replica in sync through the proxy", func() bool {
		return replInfo(rc, "master_link_status") == "up" &&
			replInfo(rc, "master_repl_offset") == replInfo(pc, "master_repl_offset")
	})
	want, err := pc.Do(ctx, "DEBUG", "DIGEST").Text()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Do(ctx, "DEBUG", "DIGEST").Text(); err != nil || got != want {
		t.Errorf("replica's DEBUG DIGEST %q (%v), want the primary's %q", got, err, want)
	}
	afterServe := vmHWM(t, proxy.Process.Pid)
	t.Logf("replica synced: proxy peak RSS %d MB", afterServe>>20)
	if afterServe > rssBound {
		t.Errorf("proxy peak RSS %d MB after serving the snapshot, want under %d MB", afterServe>>20, rssBound>>20)
	}
}

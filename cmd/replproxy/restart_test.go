package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestSIGKILLRestartNoFullSync: primary →
// replproxy (the real binary) → three real replicas under continuous writes;
// the proxy is SIGKILLed and restarted on the same dir. Its link comes back
// by partial resync (the primary's sync_full and total_forks do not move),
// it serves no full sync, and the replicas end with the primary's data.
func TestSIGKILLRestartNoFullSync(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	xPort := redistest.FreePort(t)
	// The primary's backlog must cover the proxy's absence, as for any
	// replica that reconnects: what it no longer holds needs a full sync.
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--repl-backlog-size", "512mb").Port()
	proxyDir := filepath.Join(dir, "proxy")
	os.MkdirAll(proxyDir, 0o755)
	startProxy := func(n int) (*exec.Cmd, <-chan error) {
		cmd := exec.Command(os.Args[0], "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
			"--dir", proxyDir, "--logfile", filepath.Join(dir, "replproxy-"+itoa(n)+".log"))
		cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
		checkJSONLog(t, filepath.Join(dir, "replproxy-"+itoa(n)+".log"))
		return cmd, redistest.StartProcess(t, cmd)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []string{"1", "2"} {
				b, _ := os.ReadFile(filepath.Join(dir, "replproxy-"+n+".log"))
				t.Logf("proxy %s's log:\n%s", n, b)
			}
		}
	})
	proxy1, exited1 := startProxy(1)
	var rcs []*redis.Client
	for range 3 {
		port := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(xPort)).Port()
		rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(port)), Protocol: 2})
		defer rc.Close()
		rcs = append(rcs, rc)
	}
	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2})
	defer pc.Close()
	ctx := context.Background()
	allInSync := func() bool {
		want := replInfo(pc, "master_repl_offset")
		for _, rc := range rcs {
			if replInfo(rc, "master_link_status") != "up" || replInfo(rc, "master_repl_offset") != want {
				return false
			}
		}
		return true
	}
	redistest.WaitFor(t, 30*time.Second, "three replicas in sync through the proxy", allInSync)
	statsOf := func(field string) int64 {
		t.Helper()
		return infoInt(t, pc, field)
	}
	fullBefore, forksBefore := statsOf("sync_full"), statsOf("total_forks")

	// Continuous writes, through the kill and the restart.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		v := strings.Repeat("v", 512)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pipe := pc.Pipeline()
			for j := range 100 {
				pipe.Set(ctx, "k"+strconv.Itoa((i*100+j)%50000), v, 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Errorf("writes to the primary: %v", err)
				return
			}
		}
	})
	// Each phase lasts until the primary's stream has grown by 4 MB (some
	// 8,000 SETs), so that the kill falls amid writes the proxy relays,
	// writes go on with the proxy down, and again once it is back.
	offset := func() int64 {
		n, err := strconv.ParseInt(replInfo(pc, "master_repl_offset"), 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	grown := func(what string) {
		t.Helper()
		from := offset()
		redistest.WaitFor(t, 30*time.Second, what, func() bool { return offset() >= from+4<<20 })
	}
	grown("writes flowing through the first proxy")
	syscall.Kill(-proxy1.Process.Pid, syscall.SIGKILL)
	<-exited1
	grown("writes with the proxy down")
	_, _ = startProxy(2)
	xc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(xPort)), Protocol: 2})
	defer xc.Close()
	redistest.WaitFor(t, 30*time.Second, "the restarted proxy's link up", func() bool {
		return replInfo(xc, "master_link_status") == "up"
	})
	grown("writes through the restarted proxy")
	close(stop)
	wg.Wait()

	redistest.WaitFor(t, 60*time.Second, "the replicas in sync after the restart", allInSync)
	digestsEqual(t, pc, rcs)
	if got := statsOf("sync_full"); got != fullBefore {
		t.Errorf("primary sync_full %d after the restart, want %d: the proxy's link took a full sync", got, fullBefore)
	}
	if got := statsOf("total_forks"); got != forksBefore {
		t.Errorf("primary total_forks %d after the restart, want %d", got, forksBefore)
	}
	if got := infoInt(t, xc, "sync_full"); got != 0 {
		t.Errorf("restarted proxy sync_full %d, want 0", got)
	}
	if got := infoInt(t, xc, "sync_partial_ok"); got != 3 {
		t.Errorf("restarted proxy sync_partial_ok %d, want 3", got)
	}
}

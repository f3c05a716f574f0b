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
)

// TestSIGKILLRestartNoFullSync is issue 10's first must-show: primary →
// replproxy (the real binary) → three real replicas under continuous writes;
// the proxy is SIGKILLed and restarted on the same dir. Its link comes back
// by partial resync (the primary's sync_full and total_forks do not move),
// it serves no full sync, and the replicas end with the primary's data.
func TestSIGKILLRestartNoFullSync(t *testing.T) {
	redisBin := needRedis(t)
	dir := t.TempDir()
	redisArgs := redisArgsIn(dir)
	pPort, xPort := freePort(t), freePort(t)
	// The primary's backlog must cover the proxy's absence, as for any
	// replica that reconnects: what it no longer holds needs a full sync.
	startProcess(t, exec.Command(redisBin, redisArgs(pPort, "primary", "--repl-backlog-size", "512mb")...))
	proxyDir := filepath.Join(dir, "proxy")
	os.MkdirAll(proxyDir, 0o755)
	startProxy := func(n int) (*exec.Cmd, <-chan error) {
		cmd := exec.Command(os.Args[0], "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
			"--dir", proxyDir, "--logfile", filepath.Join(dir, "replproxy-"+itoa(n)+".log"))
		cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
		return cmd, startProcess(t, cmd)
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
	for i := range 3 {
		port := freePort(t)
		startProcess(t, exec.Command(redisBin, redisArgs(port, "replica"+itoa(i), "--replicaof", "127.0.0.1", itoa(xPort))...))
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
	waitUntil(t, 30*time.Second, "three replicas in sync through the proxy", allInSync)
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
	time.Sleep(time.Second)
	syscall.Kill(-proxy1.Process.Pid, syscall.SIGKILL)
	<-exited1
	time.Sleep(500 * time.Millisecond) // writes go on with the proxy down
	_, _ = startProxy(2)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	waitUntil(t, 60*time.Second, "the replicas in sync after the restart", allInSync)
	digest := func(c *redis.Client) string {
		s, err := c.Do(ctx, "DEBUG", "DIGEST").Text()
		if err != nil {
			t.Fatalf("DEBUG DIGEST: %v", err)
		}
		return s
	}
	want := digest(pc)
	for i, rc := range rcs {
		if got := digest(rc); got != want {
			t.Errorf("replica %d digest %s, primary %s", i, got, want)
		}
	}
	if got := statsOf("sync_full"); got != fullBefore {
		t.Errorf("primary sync_full %d after the restart, want %d: the proxy's link took a full sync", got, fullBefore)
	}
	if got := statsOf("total_forks"); got != forksBefore {
		t.Errorf("primary total_forks %d after the restart, want %d", got, forksBefore)
	}
	xc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(xPort)), Protocol: 2})
	defer xc.Close()
	if got := infoInt(t, xc, "sync_full"); got != 0 {
		t.Errorf("restarted proxy sync_full %d, want 0", got)
	}
	if got := infoInt(t, xc, "sync_partial_ok"); got != 3 {
		t.Errorf("restarted proxy sync_partial_ok %d, want 3", got)
	}
}

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

// TestSnapshotFromReplicaNoFork, on the real binary: a primary holding 1 GB
// and a replica R0 of it; a fresh proxy with snapshot-from R0 and an empty
// dir, then four replicas of the proxy, all under steady writes. The primary's total_forks and sync_full do not
// move (its sync_partial_ok moves by one: the proxy's PSYNC at R0's
// position), R0 forks once, and every replica ends with the primary's
// data. Then the proxy is SIGKILLed, its dir wiped, and it is started
// again: again no fork on the primary (R0 forks once more).
//
// It costs the machine about 8 GB (the primary, R0 and four replicas at
// 1 GB each, and R0's fork) and a few minutes on two shared cores; -short
// skips it.
func TestSnapshotFromReplicaNoFork(t *testing.T) {
	redistest.Require(t)
	if testing.Short() {
		t.Skip("-short: a 1 GB primary, a source and four replicas")
	}
	const keys, valueSize = 1 << 20, 1000 // 1 GB of values
	dir := t.TempDir()
	ctx := context.Background()
	// DEBUG DIGEST of 1 GB takes seconds: longer than go-redis's 3 s read timeout.
	client := func(port int) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(port)), Protocol: 2, ReadTimeout: time.Minute})
		t.Cleanup(func() { c.Close() })
		return c
	}
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()
	pc := client(pPort)
	redistest.WaitFor(t, 10*time.Second, "the primary up", func() bool { return pc.Ping(ctx).Err() == nil })
	if err := pc.Do(ctx, "DEBUG", "POPULATE", keys, "key", valueSize).Err(); err != nil {
		t.Fatal(err)
	}
	r0Port := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(pPort)).Port()
	r0 := client(r0Port)
	offsetOf := func(c *redis.Client) string { return replInfo(c, "master_repl_offset") }
	redistest.WaitFor(t, 2*time.Minute, "R0 in sync with the 1 GB primary", func() bool {
		return replInfo(r0, "master_link_status") == "up" && offsetOf(r0) == offsetOf(pc)
	})

	xPort := redistest.FreePort(t)
	proxyDir := filepath.Join(dir, "proxy")
	startProxy := func(n int) (*exec.Cmd, <-chan error) {
		os.MkdirAll(proxyDir, 0o755)
		log := filepath.Join(dir, "replproxy-"+itoa(n)+".log")
		cmd := exec.Command(os.Args[0], "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
			"--snapshot-from", "127.0.0.1", itoa(r0Port), "--dir", proxyDir, "--logfile", log)
		cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
		checkJSONLog(t, log)
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

	type counts struct{ forks, syncFull, partialOK, r0Forks int64 }
	countNow := func() counts {
		return counts{infoInt(t, pc, "total_forks"), infoInt(t, pc, "sync_full"), infoInt(t, pc, "sync_partial_ok"),
			infoInt(t, r0, "total_forks")}
	}
	before := countNow()

	// Steady writes, about 2 MB/s, through everything that follows.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		v := strings.Repeat("v", 512)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pipe := pc.Pipeline()
			for j := range 40 {
				pipe.Set(ctx, "steady:"+strconv.Itoa((i*40+j)%50000), v, 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Errorf("writes to the primary: %v", err)
				return
			}
		}
	})
	stopWrites := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWrites()

	proxy1, exited1 := startProxy(1)
	xc := client(xPort)
	var rcs []*redis.Client
	for range 4 {
		rcs = append(rcs, client(redistest.StartServer(t, "--replicaof", "127.0.0.1", itoa(xPort)).Port()))
	}
	allOnline := func() bool {
		for _, rc := range rcs {
			if replInfo(rc, "master_link_status") != "up" {
				return false
			}
		}
		return true
	}
	redistest.WaitFor(t, 5*time.Minute, "four replicas online through the proxy", allOnline)
	after := countNow()
	t.Logf("first sync: primary forks +%d sync_full +%d sync_partial_ok +%d; R0 forks +%d", after.forks-before.forks,
		after.syncFull-before.syncFull, after.partialOK-before.partialOK, after.r0Forks-before.r0Forks)
	if after.forks != before.forks || after.syncFull != before.syncFull {
		t.Errorf("primary total_forks %d→%d, sync_full %d→%d: want both unchanged", before.forks, after.forks, before.syncFull, after.syncFull)
	}
	if after.partialOK != before.partialOK+1 {
		t.Errorf("primary sync_partial_ok %d→%d, want +1", before.partialOK, after.partialOK)
	}
	if after.r0Forks != before.r0Forks+1 {
		t.Errorf("R0 total_forks %d→%d, want +1", before.r0Forks, after.r0Forks)
	}

	// Then killed, dir wiped, started again.
	syscall.Kill(-proxy1.Process.Pid, syscall.SIGKILL)
	<-exited1
	if err := os.RemoveAll(proxyDir); err != nil {
		t.Fatal(err)
	}
	startProxy(2)
	redistest.WaitFor(t, 2*time.Minute, "the restarted proxy's link up", func() bool {
		return replInfo(xc, "master_link_status") == "up"
	})
	redistest.WaitFor(t, 5*time.Minute, "four replicas online through the restarted proxy", allOnline)
	stopWrites()
	redistest.WaitFor(t, 2*time.Minute, "the replicas at the primary's offset", func() bool {
		want := offsetOf(pc)
		for _, rc := range rcs {
			if replInfo(rc, "master_link_status") != "up" || offsetOf(rc) != want {
				return false
			}
		}
		return true
	})
	end := countNow()
	t.Logf("after the restart: primary forks +%d sync_full +%d sync_partial_ok +%d; R0 forks +%d", end.forks-after.forks,
		end.syncFull-after.syncFull, end.partialOK-after.partialOK, end.r0Forks-after.r0Forks)
	if end.forks != before.forks || end.syncFull != before.syncFull {
		t.Errorf("after the restart on a wiped dir: primary total_forks %d→%d, sync_full %d→%d", before.forks, end.forks, before.syncFull, end.syncFull)
	}
	if end.r0Forks != after.r0Forks+1 {
		t.Errorf("R0 total_forks %d→%d over the restart, want +1", after.r0Forks, end.r0Forks)
	}
	digestsEqual(t, pc, rcs)
}

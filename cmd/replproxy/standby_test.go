package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestStandbyTakeover is the high-availability story: two proxies (the real
// binary) replicate the same primary, each with its own dir; three real
// replicas follow the first. The first is SIGKILLed, writes go on, and the
// replicas are pointed at the second: each continues by partial resync from
// the standby's history (same replid, same offsets: the primary's), so the
// primary forks nothing and the standby serves no full sync.
func TestStandbyTakeover(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()
	startProxy := func(name string) (port int, cmd *exec.Cmd, exited <-chan error) {
		port = redistest.FreePort(t)
		proxyDir := filepath.Join(dir, name)
		os.MkdirAll(proxyDir, 0o755)
		cmd = exec.Command(os.Args[0], "--port", itoa(port), "--replicaof", "127.0.0.1", itoa(pPort),
			"--dir", proxyDir, "--logfile", filepath.Join(dir, name+".log"))
		cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
		checkJSONLog(t, filepath.Join(dir, name+".log"))
		return port, cmd, redistest.StartProcess(t, cmd)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []string{"active", "standby"} {
				b, _ := os.ReadFile(filepath.Join(dir, n+".log"))
				t.Logf("%s proxy's log:\n%s", n, b)
			}
		}
	})
	aPort, active, exited := startProxy("active")
	sPort, _, _ := startProxy("standby")
	client := func(port int) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(port)), Protocol: 2})
		t.Cleanup(func() { c.Close() })
		return c
	}
	pc, sc := client(pPort), client(sPort)
	var rcs []*redis.Client
	for range 3 {
		port := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(aPort)).Port()
		rcs = append(rcs, client(port))
	}
	ctx := context.Background()
	write := func(prefix string, n int) {
		t.Helper()
		v := strings.Repeat("v", 1000)
		pipe := pc.Pipeline()
		for i := range n {
			pipe.Set(ctx, prefix+itoa(i), v, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("writes to the primary: %v", err)
		}
	}
	inSync := func(cs ...*redis.Client) func() bool {
		return func() bool {
			want := replInfo(pc, "master_repl_offset")
			for _, c := range cs {
				if replInfo(c, "master_link_status") != "up" || replInfo(c, "master_repl_offset") != want {
					return false
				}
			}
			return true
		}
	}
	write("before", 2000)
	redistest.WaitFor(t, 30*time.Second, "three replicas and the standby in sync", inSync(append(rcs, sc)...))
	fullBefore, forksBefore := infoInt(t, pc, "sync_full"), infoInt(t, pc, "total_forks")

	syscall.Kill(-active.Process.Pid, syscall.SIGKILL)
	<-exited
	write("during", 2000) // the outage: the replicas miss these
	for _, rc := range rcs {
		if err := rc.Do(ctx, "REPLICAOF", "127.0.0.1", itoa(sPort)).Err(); err != nil {
			t.Fatalf("REPLICAOF the standby: %v", err)
		}
	}
	write("after", 2000)
	redistest.WaitFor(t, 30*time.Second, "the replicas in sync through the standby", inSync(rcs...))

	digestsEqual(t, pc, rcs)
	if got := infoInt(t, pc, "sync_full"); got != fullBefore {
		t.Errorf("primary sync_full %d→%d across the takeover", fullBefore, got)
	}
	if got := infoInt(t, pc, "total_forks"); got != forksBefore {
		t.Errorf("primary total_forks %d→%d across the takeover", forksBefore, got)
	}
	if got := infoInt(t, sc, "sync_full"); got != 0 {
		t.Errorf("standby sync_full %d, want 0", got)
	}
	if got := infoInt(t, sc, "sync_partial_ok"); got != 3 {
		t.Errorf("standby sync_partial_ok %d, want 3", got)
	}
}

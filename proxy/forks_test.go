package proxy

import (
	"context"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/internal/redistest"
)

// The proxy never makes the primary fork more often than the same replicas
// attached to it directly would: these tests count the primary's
// total_forks.

// startLoad runs redis-benchmark args against addr in the background and
// returns a function that waits for it to end (at most a minute) and fails
// the test if it failed.
func startLoad(t *testing.T, addr string, args ...string) (wait func()) {
	t.Helper()
	bin := redistest.RequireTool(t, "redis-benchmark")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cmd := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port, "-q"}, args...)...)
	cmd.WaitDelay = time.Second
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = cmd.CombinedOutput()
		done <- err
	}()
	var waited bool
	wait = func() {
		t.Helper()
		if waited {
			return
		}
		waited = true
		err := <-done
		cancel()
		if err != nil {
			t.Fatalf("redis-benchmark %q: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() { cancel(); wait() })
	return wait
}

// TestFetchLogCoversSnapshot: three replicas pointed at a fresh proxy while
// the primary takes writes faster than the memory backlog lasts: the
// snapshot they sync from is served with the stream after it from the
// stream log, where memory no longer holds it, so that the primary forks
// once (the proxy's own sync, which the replicas share), as it would for
// the three replicas attached directly, with no failed full sync.
func TestFetchLogCoversSnapshot(t *testing.T) {
	primary, pc := startPrimary(t, "--repl-diskless-sync", "no")
	pc.MustDo(t, "DEBUG", "POPULATE", "200000", "key", "64")
	forks := pc.InfoInt(t, "stats", "total_forks")
	wait := startLoad(t, primary.Addr(), "-t", "set", "-d", "1000", "-P", "16", "-c", "4", "-n", "150000", "-r", "100000")
	// The load is on (a primary with no replica keeps no offset: count its
	// commands): more than the 1 MB memory backlog goes by while the
	// snapshot is taken and sent.
	start := pc.InfoInt(t, "stats", "total_commands_processed")
	redistest.WaitFor(t, 10*time.Second, "the load under way", func() bool {
		return pc.InfoInt(t, "stats", "total_commands_processed") > start+5000
	})
	_, xc := startProxyOf(t, primary)
	_, rcs := redistest.StartReplicas(t, 3, xc.Addr())
	redistest.WaitFor(t, 60*time.Second, "three replicas online under the load", func() bool {
		for _, rc := range rcs {
			if rc.Info(t, "replication")["master_link_status"] != "up" {
				return false
			}
		}
		return true
	})
	wait()
	redistest.WaitSynced(t, pc, rcs...)

	info := xc.Info(t, "everything")
	t.Logf("primary total_forks +%d; proxy sync_full %s, snapshot_fetches %s, replicas_closed_full_sync_failed %s",
		pc.InfoInt(t, "stats", "total_forks")-forks, info["sync_full"], info["snapshot_fetches"], info["replicas_closed_full_sync_failed"])
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks+1 {
		t.Errorf("primary total_forks %d→%d, want one fork (the proxy's own sync)", forks, got)
	}
	if info["replicas_closed_full_sync_failed"] != "0" {
		t.Errorf("replicas_closed_full_sync_failed %s, want 0", info["replicas_closed_full_sync_failed"])
	}
}

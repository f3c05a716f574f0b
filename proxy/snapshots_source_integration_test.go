package proxy

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// The snapshot source (snapshot-from): every snapshot the proxy needs comes
// from a replica of the same primary (or a peer proxy), and the primary
// does not fork. These tests count the primary's total_forks and the
// source's, on real servers.

// sourceOf returns the --snapshot-from arguments naming srv.
func sourceOf(addr string) []string {
	host, port, _ := strings.Cut(addr, ":")
	return []string{"--snapshot-from", host, port}
}

// startSource starts a real replica of primary, meant to be a proxy's
// snapshot source, and waits until it is in sync.
func startSource(t *testing.T, primary *redistest.Server, pc *redistest.Client, args ...string) (*redistest.Server, *redistest.Client) {
	t.Helper()
	host, port, _ := strings.Cut(primary.Addr(), ":")
	r0 := redistest.StartServer(t, append([]string{"--replicaof", host, port, "--repl-diskless-sync-delay", "0"}, args...)...)
	rc := redistest.Dial(t, r0.Addr())
	redistest.WaitSynced(t, pc, rc)
	return r0, rc
}

// steadyWrites writes to c at a steady pace (a pipeline of 20 SETs of 256
// bytes every 5 ms: about 1 MB/s) until the function it returns is called.
func steadyWrites(t *testing.T, c *redistest.Client, prefix string) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	value := strings.Repeat("w", 256)
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for j := range 20 {
				if err := c.Send("SET", prefix+strconv.Itoa((i*20+j)%20000), value); err != nil {
					t.Errorf("steady writes: %v", err)
					return
				}
			}
			if err := c.Flush(); err != nil {
				t.Errorf("steady writes: %v", err)
				return
			}
			for range 20 {
				if _, err := c.Receive(); err != nil {
					t.Errorf("steady writes: %v", err)
					return
				}
			}
		}
	})
	var once sync.Once
	stop = func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// startProxyUnsynced runs a proxy replicating srv, configured further by
// args, and returns it with a client without waiting for its link.
func startProxyUnsynced(t *testing.T, srv *redistest.Server, args ...string) (*testProxy, *redistest.Client) {
	t.Helper()
	p := startProxy(t, append(replicaOf(srv), args...)...)
	return p, redistest.Dial(t, p.AddrString())
}

// forkCounts are the figures of a primary and a source that say who forked.
type forkCounts struct{ primaryForks, syncFull, partialOK, sourceForks int64 }

func countForks(t *testing.T, pc, rc *redistest.Client) forkCounts {
	t.Helper()
	return forkCounts{pc.InfoInt(t, "stats", "total_forks"), pc.InfoInt(t, "stats", "sync_full"),
		pc.InfoInt(t, "stats", "sync_partial_ok"), rc.InfoInt(t, "stats", "total_forks")}
}

// TestSnapshotFromReplica: a fresh proxy with snapshot-from a replica R0 of
// the primary, then four replicas of the proxy, under steady writes: the
// primary neither forks nor serves a full sync (one partial resync, the
// proxy's, at R0's position), R0 forks once, and every replica ends with
// the primary's data.
func TestSnapshotFromReplica(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 20000, "key", 100)
	r0, rc := startSource(t, primary, pc)
	before := countForks(t, pc, rc)
	wc := redistest.Dial(t, primary.Addr())
	stop := steadyWrites(t, wc, "steady:")

	p, xc := startProxyOf(t, primary, sourceOf(r0.Addr())...)
	_, rcs := redistest.StartReplicas(t, 4, xc.Addr())
	waitLinksUp(t, rcs, "four replicas of the proxy online")
	stop()
	redistest.WaitSynced(t, pc, rcs...)

	after := countForks(t, pc, rc)
	info := xc.Info(t, "everything")
	t.Logf("primary forks +%d sync_full +%d sync_partial_ok +%d; R0 forks +%d; proxy snapshot_fetches %s, source fetches %s",
		after.primaryForks-before.primaryForks, after.syncFull-before.syncFull, after.partialOK-before.partialOK,
		after.sourceForks-before.sourceForks, info["snapshot_fetches"], info["snapshot_source_fetches"])
	if after.primaryForks != before.primaryForks || after.syncFull != before.syncFull {
		t.Errorf("primary total_forks %d→%d, sync_full %d→%d: want both unchanged",
			before.primaryForks, after.primaryForks, before.syncFull, after.syncFull)
	}
	if after.partialOK != before.partialOK+1 {
		t.Errorf("primary sync_partial_ok %d→%d, want +1 (the proxy's PSYNC at R0's position)", before.partialOK, after.partialOK)
	}
	if after.sourceForks != before.sourceForks+1 {
		t.Errorf("R0 total_forks %d→%d, want +1", before.sourceForks, after.sourceForks)
	}

	// redis-cli --rdb (a backup, fetched fresh: from R0) and redis-cli
	// --replica (an empty RDB the proxy writes) through the proxy: no fork
	// on the primary either.
	_, cli := redistest.Require(t)
	out := redistest.RedisCLI(t, "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port()), "--rdb", filepath.Join(t.TempDir(), "backup.rdb"))
	if !strings.Contains(out, "Transfer finished with success") {
		t.Fatalf("redis-cli --rdb:\n%s", out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var cliOut dsBuffer
	cmd := exec.CommandContext(ctx, cli, "-h", "127.0.0.1", "-p", strconv.Itoa(p.Port()), "--replica")
	cmd.Stdout, cmd.Stderr = &cliOut, &cliOut
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 15*time.Second, "redis-cli --replica to finish its sync", func() bool {
		return strings.Contains(cliOut.String(), "SYNC done")
	})
	cancel()
	cmd.Wait() // killed by the cancel: its exit status says nothing
	if got := pc.InfoInt(t, "stats", "total_forks"); got != after.primaryForks {
		t.Errorf("primary total_forks %d→%d for redis-cli --rdb and --replica through the proxy", after.primaryForks, got)
	}
	if got := rc.InfoInt(t, "stats", "total_forks"); got != after.sourceForks+1 {
		t.Errorf("R0 total_forks %d→%d for the backup, want +1", after.sourceForks, got)
	}
}

// TestSnapshotSourceBehind: a source further behind than the primary's
// backlog. Answering but paused (CLIENT PAUSE WRITE holds its link to the
// primary), under snapshot-from-fallback yes: counted and logged as behind,
// never asked for a snapshot (it does not fork), and the primary forks
// once instead. Frozen (SIGSTOP), under no: the replicas wait with nothing
// served, and sync from the source once it is back and has caught up, with
// no fork on the primary.
func TestSnapshotSourceBehind(t *testing.T) {
	t.Run("fallback yes", func(t *testing.T) {
		primary, pc := startPrimary(t, "--repl-backlog-size", "64kb")
		pc.MustDo(t, "DEBUG", "POPULATE", 5000, "key", 100)
		r0, rc := startSource(t, primary, pc)
		rc.MustDo(t, "CLIENT", "PAUSE", 60000, "WRITE")
		defer rc.MustDo(t, "CLIENT", "UNPAUSE")
		writeValues(t, pc, "behind", 400, 1000) // 400 KB: past the 64 KB backlog
		before := countForks(t, pc, rc)

		p, xc := startProxyOf(t, primary, sourceOf(r0.Addr())...)
		_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
		redistest.WaitSynced(t, pc, rcs...)
		after := countForks(t, pc, rc)
		info := xc.Info(t, "everything")
		if after.primaryForks != before.primaryForks+1 {
			t.Errorf("primary total_forks %d→%d, want +1: the fallback", before.primaryForks, after.primaryForks)
		}
		if after.sourceForks != before.sourceForks {
			t.Errorf("R0 total_forks %d→%d: a source behind was asked for a snapshot", before.sourceForks, after.sourceForks)
		}
		if info["snapshot_source_failures_behind"] == "0" || info["snapshot_source_fallbacks"] != "1" {
			t.Errorf("snapshot_source_failures_behind %s, snapshot_source_fallbacks %s: want at least 1 and 1",
				info["snapshot_source_failures_behind"], info["snapshot_source_fallbacks"])
		}
		if !p.Log.Contains("snapshot source cannot be used") {
			t.Error("no log line says why the source was not used")
		}
	})

	t.Run("fallback no", func(t *testing.T) {
		primary, pc := startPrimary(t, "--repl-backlog-size", "64kb")
		pc.MustDo(t, "DEBUG", "POPULATE", 5000, "key", 100)
		r0, rc := startSource(t, primary, pc)
		r0.Pause()
		writeValues(t, pc, "behind", 400, 1000)
		forks := pc.InfoInt(t, "stats", "total_forks")

		p, xc := startProxyUnsynced(t, primary, append(sourceOf(r0.Addr()), "--snapshot-from-fallback", "no", "--repl-timeout", "1")...)
		_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
		redistest.WaitFor(t, 20*time.Second, "the frozen source counted down twice", func() bool {
			return xc.InfoInt(t, "proxy", "snapshot_source_failures_down") >= 2
		})
		if n := rcs[0].MustDo(t, "DBSIZE").Integer(); n != 0 {
			t.Errorf("the proxy's replica holds %d keys while the source is down: something was served", n)
		}
		if got := p.Log.Count("[WARN]  replproxy: snapshot source cannot be used"); got != 1 {
			t.Errorf("%d warnings for the source down, want 1 (one per cause)", got)
		}
		r0.Resume()
		redistest.WaitSynced(t, pc, rcs...)
		after := countForks(t, pc, rc)
		if after.primaryForks != forks {
			t.Errorf("primary total_forks %d→%d under snapshot-from-fallback no", forks, after.primaryForks)
		}
		if n := xc.InfoInt(t, "proxy", "snapshot_source_fallbacks"); n != 0 {
			t.Errorf("snapshot_source_fallbacks %d under snapshot-from-fallback no", n)
		}
	})
}

// TestSnapshotSourceOtherPrimary: a source that replicates another primary
// is refused before it is asked for a snapshot (its INFO names another
// replid), counted and logged once; nothing of it reaches a replica. Under
// snapshot-from-fallback no the proxy waits; set to yes, it asks its
// primary, which forks once.
func TestSnapshotSourceOtherPrimary(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 2000, "ours", 100)
	other, oc := startPrimary(t)
	oc.MustDo(t, "DEBUG", "POPULATE", 3000, "theirs", 100)
	r0, rc := startSource(t, other, oc)
	before := countForks(t, pc, rc)

	p, xc := startProxyUnsynced(t, primary, append(sourceOf(r0.Addr()), "--snapshot-from-fallback", "no")...)
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitFor(t, 20*time.Second, "the source refused twice", func() bool {
		return xc.InfoInt(t, "proxy", "snapshot_source_failures_replid") >= 2
	})
	if n := rcs[0].MustDo(t, "DBSIZE").Integer(); n != 0 {
		t.Errorf("the proxy's replica holds %d keys: data from another primary's replica reached it", n)
	}
	if got := p.Log.Count("[WARN]  replproxy: snapshot source cannot be used"); got != 1 {
		t.Errorf("%d warnings for the source of another history, want 1 (one per cause)", got)
	}
	if !p.Log.Contains("is not in the primary's history") {
		t.Error("the log does not say the source's replid is not the primary's")
	}
	xc.MustDo(t, "CONFIG", "SET", "snapshot-from-fallback", "yes")
	redistest.WaitSynced(t, pc, rcs...)
	after := countForks(t, pc, rc)
	if after.sourceForks != before.sourceForks {
		t.Errorf("the other primary's replica forked %d times: it was asked for a snapshot", after.sourceForks-before.sourceForks)
	}
	if after.primaryForks != before.primaryForks+1 {
		t.Errorf("primary total_forks %d→%d, want +1: the fallback once allowed", before.primaryForks, after.primaryForks)
	}
}

// TestSnapshotFromPeerProxy: a standby proxy with an empty dir seeded from
// its peer proxy of the same primary: the peer serves the snapshot it holds
// (no fetch, no fork on the primary), and the standby continues the
// primary's stream from its offset by partial resync.
func TestSnapshotFromPeerProxy(t *testing.T) {
	primary, pc := startPrimary(t, "--repl-backlog-size", "16mb")
	pc.MustDo(t, "DEBUG", "POPULATE", 20000, "key", 100)
	_, ac := startProxyOf(t, primary)
	writeValues(t, pc, "after-peer-sync", 200, 500)
	waitOffsetsEqual(t, pc, ac)
	forks, syncFull, partial := pc.InfoInt(t, "stats", "total_forks"), pc.InfoInt(t, "stats", "sync_full"), pc.InfoInt(t, "stats", "sync_partial_ok")
	peerFetches := ac.InfoInt(t, "proxy", "snapshot_fetches")

	_, bc := startProxyOf(t, primary, sourceOf(ac.Addr())...)
	_, rcs := redistest.StartReplicas(t, 2, bc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
		t.Errorf("primary total_forks %d→%d", forks, got)
	}
	if got := pc.InfoInt(t, "stats", "sync_full"); got != syncFull {
		t.Errorf("primary sync_full %d→%d", syncFull, got)
	}
	if got := pc.InfoInt(t, "stats", "sync_partial_ok"); got != partial+1 {
		t.Errorf("primary sync_partial_ok %d→%d, want +1: the standby's", partial, got)
	}
	if got := ac.InfoInt(t, "proxy", "snapshot_fetches"); got != peerFetches {
		t.Errorf("the peer proxy fetched %d snapshots to serve the standby, want none", got-peerFetches)
	}
	if got := bc.InfoInt(t, "proxy", "snapshot_source_fetches"); got != 1 {
		t.Errorf("the standby's snapshot_source_fetches %d, want 1", got)
	}
}

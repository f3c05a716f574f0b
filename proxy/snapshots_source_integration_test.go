package proxy

import (
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

	_, xc := startProxyOf(t, primary, sourceOf(r0.Addr())...)
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
}

package proxy

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// The proxy never makes the primary fork more often than the same replicas
// attached to it directly would: these tests count the primary's
// total_forks.

// startLoad runs redis-benchmark args against addr in the background (for
// at most a minute) and returns the function that stops it: the load ends
// there, killed if it still runs; any other failure of it fails the test.
func startLoad(t *testing.T, addr string, args ...string) (stop func()) {
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
	var stopped bool
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		killed := context.Cause(ctx) == nil // not timed out: stopped by us
		cancel()
		if err := <-done; err != nil && !(killed && errors.Is(ctx.Err(), context.Canceled)) {
			t.Fatalf("redis-benchmark %q: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(stop)
	return stop
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
	stopLoad := startLoad(t, primary.Addr(), "-t", "set", "-d", "1000", "-P", "4", "-c", "2", "-n", "150000", "-r", "100000")
	// The load is on (a primary with no replica keeps no offset: count its
	// commands): more than the 1 MB memory backlog goes by while the
	// snapshot is taken and sent.
	start := pc.InfoInt(t, "stats", "total_commands_processed")
	redistest.WaitFor(t, 10*time.Second, "the load under way", func() bool {
		return pc.InfoInt(t, "stats", "total_commands_processed") > start+5000
	})
	_, xc := startProxyOf(t, primary)
	_, rcs := redistest.StartReplicas(t, 3, xc.Addr())
	waitLinksUp(t, rcs, "three replicas online under the load")
	stopLoad() // the syncs are done: the rest of the load proves nothing more
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

// waitMonitorRounds waits until p's monitor, which starts any background
// fetch, has completed n more rounds.
func waitMonitorRounds(t *testing.T, p *testProxy, n int64) {
	t.Helper()
	want := p.cron.rounds.Load() + n
	redistest.WaitFor(t, 10*time.Second, "monitor rounds", func() bool { return p.cron.rounds.Load() >= want })
}

// noFetchStarted fails the test if p has a snapshot fetch in flight or has
// completed one.
func noFetchStarted(t *testing.T, p *testProxy, xc *redistest.Client) {
	t.Helper()
	f, _ := p.hist.InFlight()
	inFlight := f != nil
	if n := xc.InfoInt(t, "proxy", "snapshot_fetches"); inFlight || n != 0 {
		t.Fatalf("a snapshot fetch with no replica needing one: in flight %v, completed %d (log: fetching a fresh snapshot %v)",
			inFlight, n, p.Log.Contains("fetching a fresh snapshot"))
	}
}

// TestFetchedSnapshotLogCovers: a snapshot fetched through the side link
// for replicas that need one, while writes outrun the memory backlog (16 KiB
// here) during the fetch: the replicas joining it as it arrives are served
// the stream after it from the stream log, so the three cost the primary
// one fork, that fetch, with no failed full sync. The fetched RDB goes to
// dir as it arrives, and the replicas end with the primary's data.
func TestFetchedSnapshotLogCovers(t *testing.T) {
	primary, pc := startPrimary(t, "--repl-diskless-sync", "no")
	pc.MustDo(t, "DEBUG", "POPULATE", "200000", "key", "64")
	p, xc := startProxyOf(t, primary, "--repl-backlog-size", "16kb", "--repl-log-size", "4mb")
	waitSnapshotOnDisk(t, xc)
	snapshotOff := xc.InfoInt(t, "persistence", "repl_snapshot_offset")
	// Past the log: the proxy's own snapshot can no longer be served.
	writeValues(t, pc, "old", 80, 100<<10)
	waitLogged(t, pc, xc)
	if first := xc.InfoInt(t, "persistence", "repl_log_first_offset"); first <= snapshotOff+1 {
		t.Fatalf("the log still covers the snapshot at %d (it starts at %d)", snapshotOff, first)
	}
	forks := forksOf(t, pc)
	// A light load (about 100 bytes a command), which the 4 MB log holds
	// for the duration of a fetch, and the 16 KiB backlog does not.
	stopLoad := startLoad(t, primary.Addr(), "-t", "set", "-d", "100", "-c", "1", "-n", "10000", "-r", "100000")
	start := pc.InfoInt(t, "stats", "total_commands_processed")
	redistest.WaitFor(t, 10*time.Second, "the load under way", func() bool {
		return pc.InfoInt(t, "stats", "total_commands_processed") > start+1000
	})
	_, rcs := redistest.StartReplicas(t, 3, xc.Addr())
	waitLinksUp(t, rcs, "three replicas online under the load")
	stopLoad() // the syncs are done: the rest of the load proves nothing more
	redistest.WaitSynced(t, pc, rcs...)

	info := xc.Info(t, "everything")
	t.Logf("primary total_forks +%d; proxy sync_full %s, snapshot_fetches %s, replicas_closed_full_sync_failed %s",
		forksOf(t, pc)-forks, info["sync_full"], info["snapshot_fetches"], info["replicas_closed_full_sync_failed"])
	if got := forksOf(t, pc); got != forks+1 {
		t.Errorf("primary total_forks %d→%d, want one fork (the one fetch)", forks, got)
	}
	if info["replicas_closed_full_sync_failed"] != "0" {
		t.Errorf("replicas_closed_full_sync_failed %s, want 0", info["replicas_closed_full_sync_failed"])
	}
	// The fetched RDB (megabytes, past the 1 MiB a payload keeps in memory
	// with the log on) went to dir as it arrived, and the replicas, whose
	// data WaitSynced compared by DEBUG DIGEST, were sent it from there.
	if !p.Log.Contains("going to dir as it arrives: link=fetch") {
		t.Errorf("the fetched payload did not go to dir as it arrived")
	}
	if n := p.Log.Count("replica online"); n != 3 || p.Log.Count("from-disk=true") != 3 {
		t.Errorf("%d replicas online, %d of them sent from dir; want 3 of 3", n, p.Log.Count("from-disk=true"))
	}
}

// forksOf is the sum of the servers' total_forks.
func forksOf(t *testing.T, cs ...*redistest.Client) (n int64) {
	t.Helper()
	for _, c := range cs {
		n += c.InfoInt(t, "stats", "total_forks")
	}
	return n
}

// TestNoForkWithoutReplicaNeed: with the stream log on and default
// settings, eight replicas and writes of several times what the log keeps
// cost the primary no fork after the proxy's own first sync (a small
// repl-log-size stands in for the default 1gb: the rule is the same, ¾ of
// the log passing by); the first fork after that is the one a new replica
// needs, counted as such.
func TestNoForkWithoutReplicaNeed(t *testing.T) {
	primary, pc := startPrimary(t)
	p, xc := startProxyOf(t, primary, "--repl-log-size", "1mb")
	_, rcs := redistest.StartReplicas(t, 8, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	forks := forksOf(t, pc)
	snapshotOff := xc.InfoInt(t, "persistence", "repl_snapshot_offset")
	// 4 MB in four rounds, each past ¾ of the log, each followed by monitor
	// rounds, which would have started any background fetch.
	for i := range 4 {
		writeValues(t, pc, "k"+itoa(int64(i)), 100, 10<<10)
		redistest.WaitSynced(t, pc, rcs...)
		waitLogged(t, pc, xc)
		waitMonitorRounds(t, p, 2)
		noFetchStarted(t, p, xc)
	}
	if first := xc.InfoInt(t, "persistence", "repl_log_first_offset"); first <= snapshotOff+1 {
		t.Fatalf("the log still covers the snapshot at %d (it starts at %d): write more", snapshotOff, first)
	}
	info := xc.Info(t, "proxy")
	if got := forksOf(t, pc); got != forks {
		t.Fatalf("primary total_forks %d→%d with no replica needing a snapshot (snapshot_fetches_refresh %s)",
			forks, got, info["snapshot_fetches_refresh"])
	}

	// A new replica needs a snapshot the proxy can no longer serve: that,
	// and only that, costs a fork.
	_, more := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, append(rcs, more...)...)
	if got := forksOf(t, pc); got != forks+1 {
		t.Fatalf("primary total_forks %d→%d for one new replica, want +1", forks, got)
	}
	info = xc.Info(t, "proxy")
	if info["snapshot_fetches_replica_needed"] != "1" || info["snapshot_fetches_refresh"] != "0" {
		t.Fatalf("snapshot_fetches_replica_needed %s, snapshot_fetches_refresh %s; want 1 and 0",
			info["snapshot_fetches_replica_needed"], info["snapshot_fetches_refresh"])
	}
}

// TestReplIDChangeNoFork: two failovers (primary and replica swap roles, and
// back), the proxy following each by partial resync: the replid the
// snapshot on disk was taken under is then neither the stream's replid nor
// its replid2, yet no fork is made until a replica needs a snapshot.
func TestReplIDChangeNoFork(t *testing.T) {
	a, ac := startPrimary(t)
	b := redistest.StartServer(t, "--replicaof", "127.0.0.1", itoa(int64(a.Port())), "--repl-diskless-sync-delay", "0")
	bc := redistest.Dial(t, b.Addr())
	p, xc := startProxyOf(t, a)
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	writeValues(t, ac, "k", 100, 1000)
	redistest.WaitSynced(t, ac, append(rcs, bc)...)
	forks := forksOf(t, ac, bc)
	partial := xc.InfoInt(t, "proxy", "upstream_partial_syncs")

	// failover promotes to, a replica of from, and moves from and the proxy
	// under it; the proxy continues by partial resync.
	failover := func(to, from *redistest.Server, toc, fromc *redistest.Client) {
		t.Helper()
		toc.MustDo(t, "REPLICAOF", "NO", "ONE")
		fromc.MustDo(t, "REPLICAOF", "127.0.0.1", to.Port())
		xc.MustDo(t, "REPLICAOF", "127.0.0.1", to.Port())
		partial++
		redistest.WaitFor(t, 10*time.Second, "the proxy continuing from the new primary", func() bool {
			info := xc.Info(t, "everything")
			return info["master_link_status"] == "up" && info["master_port"] == itoa(int64(to.Port())) &&
				info["upstream_partial_syncs"] == itoa(partial)
		})
		writeValues(t, toc, "after-"+itoa(int64(to.Port())), 100, 1000)
		redistest.WaitSynced(t, toc, append(rcs, fromc)...)
	}
	failover(b, a, bc, ac)
	failover(a, b, ac, bc)
	// The monitor would have started a background fetch by now.
	waitMonitorRounds(t, p, 2)
	noFetchStarted(t, p, xc)
	if got := forksOf(t, ac, bc); got != forks {
		t.Fatalf("total_forks %d→%d after two replid changes, with no replica needing a snapshot (proxy log: fetching a fresh snapshot %v)",
			forks, got, p.Log.Contains("fetching a fresh snapshot"))
	}
	_, more := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, ac, append(rcs, more...)...)
	if got := forksOf(t, ac, bc); got != forks+1 {
		t.Fatalf("total_forks %d→%d for one new replica, want +1", forks, got)
	}
}

// TestContinueOnlyWhatIsSent is the primary forcing the proxy into a full
// resync that keeps its replid at a later offset (its backlog shrunk and
// overrun while the link was down): the replica the proxy then disconnects
// comes back asking for an offset of the old generation, which the stream
// log still holds until its follower resets it. It must get a full sync, not
// a +CONTINUE followed by a drop ("the log started a new generation"), and
// sync_partial_ok must not count a partial resync that was never served.
func TestContinueOnlyWhatIsSent(t *testing.T) {
	primary, pc := startPrimary(t)
	// 20 MB (values of 10 KB): the race does not need a larger snapshot.
	pc.MustDo(t, "DEBUG", "POPULATE", "2000", "master", "10000")
	p, xc := startProxyOf(t, primary)
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	waitLogged(t, pc, xc)
	full := xc.InfoInt(t, "stats", "sync_full")
	forks := forksOf(t, pc)

	pc.MustDo(t, "MULTI")
	pc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	pc.MustDo(t, "CONFIG", "SET", "repl-backlog-size", "16384")
	for i := range 10 {
		pc.MustDo(t, "SET", "big"+itoa(int64(i)), make([]byte, 16<<10))
	}
	pc.MustDo(t, "EXEC")
	redistest.WaitFor(t, 30*time.Second, "the proxy's full resync", func() bool {
		return xc.InfoInt(t, "proxy", "upstream_full_syncs") >= 2
	})
	redistest.WaitSynced(t, pc, rcs...)

	info := xc.Info(t, "stats")
	if p.Log.Contains("the log started a new generation") || info["sync_partial_ok"] != "0" {
		t.Fatalf("the returning replica was told +CONTINUE for bytes it was not sent: sync_partial_ok %s, sync_full %d→%s, dropped for a new log generation %v",
			info["sync_partial_ok"], full, info["sync_full"], p.Log.Contains("the log started a new generation"))
	}
	if got := xc.InfoInt(t, "stats", "sync_full"); got != full+1 {
		t.Fatalf("proxy sync_full %d→%d, want one full sync for the returning replica", full, got)
	}
	// The primary's fork for the resync it forced serves the replica too.
	if got := forksOf(t, pc); got != forks+1 {
		t.Fatalf("primary total_forks %d→%d, want +1 (the resync it forced on the proxy)", forks, got)
	}
}

// waitLinksUp waits until every replica in rcs has its link up, for up to a
// minute (a full sync under load on two shared cores).
func waitLinksUp(t testing.TB, rcs []*redistest.Client, what string) {
	t.Helper()
	redistest.WaitFor(t, 60*time.Second, what, func() bool {
		for _, rc := range rcs {
			if rc.Info(t, "replication")["master_link_status"] != "up" {
				return false
			}
		}
		return true
	})
}

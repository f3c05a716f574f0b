package proxy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// Hostile snapshot sources (hostileSource): a real replica of the primary
// behind a relay that lies about its position or spoils its payload. Each
// test checks that the proxy's replicas end with the primary's data or
// with none, never other data, and what the lie cost in forks.

// TestHostileSourceAhead: a source whose INFO and +FULLRESYNC claim a
// position past the primary's end is refused before the proxy's PSYNC,
// under snapshot-from-fallback no: the primary never forks for it, the
// refusal is counted as "ahead", and the proxy's replica stays empty.
func TestHostileSourceAhead(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 1000, "key", 100)
	r0, _ := startSource(t, primary, pc)
	hs := startHostileSource(t, r0.Addr(), faultAhead)
	forks, syncFull := pc.InfoInt(t, "stats", "total_forks"), pc.InfoInt(t, "stats", "sync_full")

	_, xc := startProxyUnsynced(t, primary, append(sourceOf(hs.Addr()), "--snapshot-from-fallback", "no", "--repl-timeout", "1")...)
	_, rcs := redistest.StartReplicas(t, 1, xc.Addr())
	redistest.WaitFor(t, 30*time.Second, "the source ahead refused twice, or the primary forked", func() bool {
		return xc.InfoInt(t, "proxy", "snapshot_source_failures_ahead") >= 2 || pc.InfoInt(t, "stats", "total_forks") != forks
	})
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
		t.Errorf("primary total_forks %d→%d: a position past its end was asked of it", forks, got)
	}
	if got := pc.InfoInt(t, "stats", "sync_full"); got != syncFull {
		t.Errorf("primary sync_full %d→%d", syncFull, got)
	}
	if n := rcs[0].MustDo(t, "DBSIZE").Integer(); n != 0 {
		t.Errorf("the proxy's replica holds %d keys: something of the source ahead was served", n)
	}
	if n := xc.InfoInt(t, "proxy", "snapshot_source_fallbacks"); n != 0 {
		t.Errorf("snapshot_source_fallbacks %d under snapshot-from-fallback no", n)
	}

	// The source tells the truth again: it is used, still with no fork on
	// the primary, and the replica gets the primary's data.
	hs.set(faultNone)
	redistest.WaitSynced(t, pc, rcs...)
	if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
		t.Errorf("primary total_forks %d→%d once the source told the truth", forks, got)
	}
	if a, b := pc.Digest(t), rcs[0].Digest(t); a != b {
		t.Errorf("replica digest %s, primary %s", b, a)
	}
}

// TestHostileSourceBackoff: a source that cuts every payload half way,
// while two replicas wait for a snapshot, is asked again only after the
// fetch backoff, whatever the replicas do (each failure drops them, and
// they come back at once): over a minute it forks at most once per
// backoff step, the primary not at all (snapshot-from-fallback no), and
// nothing reaches the replicas. Told to serve well, it serves them the
// primary's data.
func TestHostileSourceBackoff(t *testing.T) {
	t.Parallel()
	const window = time.Minute
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 2000, "key", 100)
	r0, rc := startSource(t, primary, pc)
	hs := startHostileSource(t, r0.Addr(), faultTruncate)
	before := countForks(t, pc, rc)

	start := time.Now()
	_, xc := startProxyUnsynced(t, primary, append(sourceOf(hs.Addr()), "--snapshot-from-fallback", "no", "--repl-timeout", "2")...)
	_, rcs := redistest.StartReplicas(t, 2, xc.Addr())
	redistest.WaitFor(t, 20*time.Second, "the first cut payload", func() bool { return hs.Payloads.Load() >= 1 })
	waitUntil(t, start.Add(window))
	after := countForks(t, pc, rc)
	payloads := int(hs.Payloads.Load())
	bound := backoffSteps(window) + 1 // the first attempt, then one per step
	t.Logf("over %v: the source forked %d times and sent %d payloads, at most %d allowed; proxy sync_full %s, snapshot_fetch_failures %s",
		window, after.sourceForks-before.sourceForks, payloads, bound,
		xc.Info(t, "stats")["sync_full"], xc.Info(t, "proxy")["snapshot_fetch_failures"])
	if n := int(after.sourceForks - before.sourceForks); n > bound || payloads > bound {
		t.Errorf("the source forked %d times (%d payloads) in %v, want at most %d: one per backoff step", n, payloads, window, bound)
	}
	if after.primaryForks != before.primaryForks {
		t.Errorf("primary total_forks %d→%d under snapshot-from-fallback no", before.primaryForks, after.primaryForks)
	}
	for i, c := range rcs {
		if n := c.MustDo(t, "DBSIZE").Integer(); n != 0 {
			t.Errorf("replica %d holds %d keys from cut payloads", i, n)
		}
	}

	hs.set(faultNone)
	redistest.WaitSynced(t, pc, rcs...)
	for i, c := range rcs {
		if a, b := pc.Digest(t), c.Digest(t); a != b {
			t.Errorf("replica %d digest %s, primary %s", i, b, a)
		}
	}
	if got := pc.InfoInt(t, "stats", "total_forks"); got != before.primaryForks {
		t.Errorf("primary total_forks %d→%d", before.primaryForks, got)
	}
}

// backoffSteps is how many waits of the fetch backoff (the link's rule,
// upstream.NextBackoff) fit one after another in d.
func backoffSteps(d time.Duration) int {
	n := 0
	for w, sum := upstream.NextBackoff(0), time.Duration(0); sum+w <= d; w = upstream.NextBackoff(w) {
		sum += w
		n++
	}
	return n
}

// waitUntil returns at when, or fails the test if it ends first.
func waitUntil(t *testing.T, when time.Time) {
	t.Helper()
	select {
	case <-time.After(time.Until(when)):
	case <-t.Context().Done():
		t.Fatal("the test ended while it waited")
	}
}

// TestHostileSourcePayloads: a source whose payloads are junk under a
// zero checksum, cut half way, cut by an EOF mark inside them, or stalled
// half way. Nothing of them reaches a replica whole: the replicas (one
// loading from the socket as bytes arrive, one from a file) never exit
// nor load anything, the proxy's snapshot in dir is never such a payload,
// and the primary never forks (snapshot-from-fallback no). Once the
// source serves well, the replicas get the primary's data, and a replica
// restarted then gets it again. The stream log is off, so that the
// replicas follow each payload as it arrives ("$EOF:").
func TestHostileSourcePayloads(t *testing.T) {
	t.Parallel()
	for _, fault := range []sourceFault{faultJunk, faultTruncate, faultEOFInside, faultStall} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			primary, pc := startPrimary(t)
			pc.MustDo(t, "DEBUG", "POPULATE", 2000, "key", 100)
			r0, rc := startSource(t, primary, pc)
			hs := startHostileSource(t, r0.Addr(), fault)
			before := countForks(t, pc, rc)

			_, xc := startProxyUnsynced(t, primary, append(sourceOf(hs.Addr()),
				"--snapshot-from-fallback", "no", "--repl-timeout", "2", "--repl-log-size", "0")...)
			srvs, rcs := startLoadingReplicas(t, xc.Addr())
			redistest.WaitFor(t, 30*time.Second, "two spoilt payloads refused", func() bool {
				return hs.Payloads.Load() >= 2 && xc.InfoInt(t, "proxy", "snapshot_fetch_failures") >= 2
			})
			for i, c := range rcs {
				replicaSurvived(t, srvs[i], c)
				if n := c.MustDo(t, "DBSIZE").Integer(); n != 0 {
					t.Errorf("replica %d holds %d keys from spoilt payloads", i, n)
				}
			}
			notJunkInDir(t, xc)
			if fault == faultJunk || fault == faultEOFInside {
				if n := xc.InfoInt(t, "proxy", "upstream_rdb_check_failures"); n < 1 {
					t.Errorf("upstream_rdb_check_failures %d: the check did not refuse them", n)
				}
			}

			hs.set(faultNone)
			redistest.WaitSynced(t, pc, rcs...)
			for i, c := range rcs {
				replicaSurvived(t, srvs[i], c)
				if a, b := pc.Digest(t), c.Digest(t); a != b {
					t.Errorf("replica %d digest %s, primary %s", i, b, a)
				}
			}
			srvs[1].Restart()
			r1 := redistest.Dial(t, srvs[1].Addr())
			redistest.WaitSynced(t, pc, r1)
			if a, b := pc.Digest(t), r1.Digest(t); a != b {
				t.Errorf("restarted replica digest %s, primary %s", b, a)
			}
			if got := pc.InfoInt(t, "stats", "total_forks"); got != before.primaryForks {
				t.Errorf("primary total_forks %d→%d under snapshot-from-fallback no", before.primaryForks, got)
			}
		})
	}
}

// startLoadingReplicas starts two real replicas of addr: one loading its
// full syncs from the socket as the bytes arrive (repl-diskless-load
// swapdb), which exits at the first byte of a corrupt RDB, and one loading
// from a file once the payload is whole (the default).
func startLoadingReplicas(t *testing.T, addr string) ([]*redistest.Server, []*redistest.Client) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	var srvs []*redistest.Server
	var cs []*redistest.Client
	for _, load := range []string{"swapdb", "disabled"} {
		s := redistest.StartServer(t, "--replicaof", host, port, "--repl-diskless-load", load)
		srvs, cs = append(srvs, s), append(cs, redistest.Dial(t, s.Addr()))
	}
	return srvs, cs
}

// replicaSurvived fails the test if the replica srv exited on, or
// reported, an RDB it could not load; c must still reach it.
func replicaSurvived(t *testing.T, srv *redistest.Server, c *redistest.Client) {
	t.Helper()
	log, err := os.ReadFile(srv.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	// What Redis 7.0 logs when it meets an RDB it cannot load, before it
	// exits. A link cut mid-payload is not one of them: that is "Failure
	// loading rdb format from socket, assuming connection error, resuming
	// operation" (loading from the socket) or a short read of a file never
	// completed, after which the replica goes on.
	for _, bad := range []string{"Terminating server after rdb file reading failure", "Wrong RDB checksum",
		"RDB ERROR DETECTED", "Unknown RDB encoding type"} {
		if bytes.Contains(log, []byte(bad)) {
			t.Errorf("replica %s logged %q: it was given a payload it could not load", srv.Addr(), bad)
		}
	}
	if _, err := c.Do("PING"); err != nil {
		t.Errorf("replica %s: %v", srv.Addr(), err)
	}
}

// notJunkInDir fails the test if the proxy's snapshot in dir is the junk
// payload: nothing refused is ever kept.
func notJunkInDir(t *testing.T, xc *redistest.Client) {
	t.Helper()
	dir := xc.MustDo(t, "CONFIG", "GET", "dir").Array()[1].String()
	b, err := os.ReadFile(filepath.Join(dir, snapfile.FileName))
	if err != nil {
		return // none kept
	}
	if bytes.Equal(b, redistest.JunkRDB()) || bytes.Contains(b, redistest.JunkRDB()[9:1000]) {
		t.Errorf("the proxy's snapshot in dir holds the junk payload")
	}
}

package proxy

import (
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
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

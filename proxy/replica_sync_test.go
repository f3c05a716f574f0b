package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/internal/redistest"
)

// TestFullSyncReleasesSnapshot: a replica that finished its full sync no
// longer holds the snapshot, so evict-snapshots can evict it while that
// replica stays connected, and the replica goes on receiving the stream.
func TestFullSyncReleasesSnapshot(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 20000, "key", 100)
	p := startProxy(t, append(replicaOf(primary), "--dir", t.TempDir())...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	_, rc := memStartReplica(t, p, pc)
	redistest.WaitFor(t, 10*time.Second, "replica online", func() bool {
		return strings.Contains(xc.Info(t, "replication")["slave0"], "state=online")
	})
	if n := xc.InfoInt(t, "stats", "evicted_snapshots"); n != 0 {
		t.Fatalf("evicted_snapshots %d before maxmemory is set", n)
	}

	xc.MustDo(t, "CONFIG", "SET", "maxmemory-policy", "evict-snapshots")
	xc.MustDo(t, "CONFIG", "SET", "maxmemory", "1mb")
	redistest.WaitFor(t, 10*time.Second, "snapshot evicted with the synced replica connected", func() bool {
		return xc.InfoInt(t, "stats", "evicted_snapshots") >= 1
	})
	if n := xc.InfoInt(t, "replication", "connected_slaves"); n != 1 {
		t.Fatalf("connected_slaves %d after the eviction, want 1", n)
	}
	pc.MustDo(t, "SET", "after-eviction", "x")
	redistest.WaitSynced(t, pc, rc)
}

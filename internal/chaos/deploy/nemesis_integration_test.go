package deploy

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestUntilLoadedWaitsOutAFullSyncLoad: a replica still loading a full
// sync (as a failover may cost it) is moved, and answers REPLICAOF with
// -LOADING. untilLoaded asks again until the load is done, and the replica
// then follows its new upstream.
func TestUntilLoadedWaitsOutAFullSyncLoad(t *testing.T) {
	redistest.Require(t)
	old := redistest.StartServer(t)
	oc := redistest.Dial(t, old.Addr())
	const keys = 20000
	oc.MustDo(t, "DEBUG", "POPULATE", keys, "key", 64)
	next := redistest.StartServer(t)

	// Each key loads 100 µs late, so the full sync's load lasts 2 s or
	// more, and the replica answers meanwhile (with -LOADING to REPLICAOF).
	replica := redistest.StartServer(t, "--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024")
	rc := redistest.Dial(t, replica.Addr())
	host, port, _ := net.SplitHostPort(old.Addr())
	rc.MustDo(t, "REPLICAOF", host, port)
	redistest.WaitFor(t, 30*time.Second, "the replica loading its full sync", func() bool {
		v, err := rc.Do("INFO", "persistence")
		return err == nil && redistest.ParseInfo(v.String())["loading"] == "1"
	})

	nextHost, nextPort, _ := net.SplitHostPort(next.Addr())
	move := func() error {
		_, err := rc.Do("REPLICAOF", nextHost, nextPort)
		return err
	}
	// Asked once, while the load is under way, the replica refuses.
	var re *redistest.ReplyError
	if err := untilLoaded(0, move); !errors.As(err, &re) || re.Prefix() != "LOADING" {
		t.Fatalf("REPLICAOF during the load: got %v, want -LOADING (the load ended too soon to reproduce it)", err)
	}
	start := time.Now()
	if err := untilLoaded(convergeBound, move); err != nil {
		t.Fatalf("REPLICAOF asked until the load is done: %v", err)
	}
	t.Logf("REPLICAOF taken %v after the first -LOADING", time.Since(start).Round(time.Millisecond))

	redistest.WaitFor(t, 30*time.Second, "the replica linked to its new upstream", func() bool {
		v, err := rc.Do("INFO", "replication")
		if err != nil {
			return false
		}
		m := redistest.ParseInfo(v.String())
		return m["master_port"] == nextPort && m["master_link_status"] == "up"
	})
	// The new upstream is empty: the replica holds its data, not the old one's.
	if n := rc.MustDo(t, "DBSIZE").Integer(); n != 0 {
		t.Fatalf("DBSIZE after following the empty upstream: %d", n)
	}
}

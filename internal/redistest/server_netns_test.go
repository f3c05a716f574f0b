package redistest

import (
	"testing"

	"github.com/replproxy/replproxy/internal/netns"
)

// TestStartServerIn replicates across a WAN between two namespaces: a primary in
// A, two replicas in B, each reached from inside its namespace.
func TestStartServerIn(t *testing.T) {
	t.Parallel()
	Require(t)
	pair := netns.NewPair(t, netns.Options{RateBitsPerSec: 100e6})
	primary := StartServerIn(t, pair.A, pair.AddrA, "--repl-diskless-sync-delay", "0")
	if got, want := primary.Addr(), pair.AddrA+":"; len(got) <= len(want) || got[:len(want)] != want {
		t.Fatalf("Addr() = %q, want %s<port>", got, want)
	}
	pc := DialIn(t, pair.A, primary.Addr())
	pc.MustDo(t, "SET", "k", "v")
	servers, replicas := StartReplicasIn(t, pair.B, pair.AddrB, 2, primary.Addr())
	WaitSynced(t, pc, replicas...)
	for _, rc := range replicas {
		if got := rc.MustDo(t, "GET", "k").String(); got != "v" {
			t.Errorf("GET k on %s = %q, want v", rc.Addr(), got)
		}
	}
	if got := replicas[0].Info(t, "replication")["master_host"]; got != pair.AddrA {
		t.Errorf("replica in B: master_host %q, want %s", got, pair.AddrA)
	}
	servers[1].Stop()
	if pid := servers[1].Pid(); pid != 0 {
		t.Errorf("Pid() = %d after Stop", pid)
	}
}

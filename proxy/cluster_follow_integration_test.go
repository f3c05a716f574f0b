package proxy

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestFollowClusterShard follows one shard of a real cluster of three
// primaries with a replica each, which asks for a password, with two
// proxies: one chosen by a slot,
// with every node and a dead address as seeds, and one chosen by its
// primary's node ID, with a dead address and the shard's two nodes as its
// only seeds (one of which is killed later). Each has a redis-server
// replica behind it. Under a write load over every slot (routed by slot,
// MOVED and failures retried), in sequence: the replicas' data matches the
// shard's primary's; CLUSTER FAILOVER on the shard's replica is followed by
// partial resync all the way (no full sync of the proxies, of the new
// primary or of the replicas behind them); and the new primary killed
// (SIGKILL) is followed to the replica the cluster promotes, again by
// partial resync.
func TestFollowClusterShard(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Password: "shard-secret"})
	shard := c.ShardOf(0)
	first, second := shard.Primary, shard.Replicas[0]
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(redistest.FreePort(t)))

	bySlot := followShard(t, c, "0", append([]string{dead}, c.Addrs()...))
	byID := followShard(t, c, c.NodeID(first), []string{dead, first.Addr(), second.Addr()})
	followers := []*shardFollower{bySlot, byID}
	for _, f := range followers {
		f.waitFollowing(t, first)
	}

	admin := c.Dial(first)
	for _, key := range []string{"foo", "key:0", "key:19999", "{user1000}.following"} {
		if want := admin.MustDo(t, "CLUSTER", "KEYSLOT", key).Integer(); redistest.KeySlot(key) != want {
			t.Fatalf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, redistest.KeySlot(key), want)
		}
	}
	w := redistest.StartClusterWrites(t, c)
	t.Run("data", func(t *testing.T) {
		w.WaitWrites(t, 500)
		w.Stop()
		for _, f := range followers {
			redistest.WaitSynced(t, c.Dial(first), f.replica)
		}
	})

	t.Run("manual failover", func(t *testing.T) {
		before := counts(t, followers, c.Dial(second))
		w = redistest.StartClusterWrites(t, c)
		w.WaitWrites(t, 200)
		c.Failover(second)
		for _, f := range followers {
			f.waitFollowing(t, second)
		}
		w.WaitWrites(t, 200) // writes go on after the failover, to second
		w.Stop()
		for _, f := range followers {
			redistest.WaitSynced(t, c.Dial(second), f.replica)
		}
		checkPartialOnly(t, before, counts(t, followers, c.Dial(second)))
	})

	t.Run("killed primary", func(t *testing.T) {
		// No write reaches second from here until first replaced it: a write
		// the proxies received but first did not would leave them ahead of
		// the promoted node, which would then refuse a partial resync, as it
		// would refuse any replica that is ahead of it.
		for _, f := range followers {
			redistest.WaitSynced(t, c.Dial(second), f.replica)
		}
		redistest.WaitSynced(t, c.Dial(second), c.Dial(first))
		before := counts(t, followers, c.Dial(first))
		killed := time.Now()
		second.Kill()
		w = redistest.StartClusterWrites(t, c) // retried until first serves the shard
		for _, f := range followers {
			f.waitFollowing(t, first)
		}
		t.Logf("both proxies follow the promoted node %v after the kill", time.Since(killed).Round(time.Millisecond))
		w.WaitWrites(t, 200)
		w.Stop()
		for _, f := range followers {
			redistest.WaitSynced(t, c.Dial(first), f.replica)
		}
		checkPartialOnly(t, before, counts(t, followers, c.Dial(first)))
	})
	// Three moves each: the first primary found, then one per failover,
	// never back and forth.
	for i, f := range followers {
		info := f.admin.Info(t, "proxy")
		if info["cluster_primary_changes"] != "3" || info["cluster_checks"] == "0" || info["cluster_check_failures"] == "0" {
			t.Errorf("proxy %d: cluster_primary_changes=%s cluster_checks=%s cluster_check_failures=%s; want 3 moves, checks, and failures while the killed primary was not replaced",
				i, info["cluster_primary_changes"], info["cluster_checks"], info["cluster_check_failures"])
		}
	}
	t.Logf("TestFollowClusterShard took %v", time.Since(start).Round(time.Millisecond))
}

// shardFollower is a proxy following a cluster shard, and a redis-server
// replicating from it.
type shardFollower struct {
	proxy   *testProxy
	admin   *redistest.Client // of the proxy
	replica *redistest.Client
}

// followShard starts a proxy following the shard of c that sel names,
// asking seeds, with c's password (masterauth, for the topology queries
// and the link alike), and a replica of it.
func followShard(t *testing.T, c *redistest.Cluster, sel string, seeds []string) *shardFollower {
	t.Helper()
	args := []string{"--masterauth", c.Password(), "--cluster-shard", sel, "--cluster-refresh-interval", "500", "--replicaof-cluster"}
	for _, s := range seeds {
		host, port, _ := strings.Cut(s, ":")
		args = append(args, host, port)
	}
	p := startProxy(t, args...)
	host, port, _ := strings.Cut(p.AddrString(), ":")
	r := redistest.StartServer(t, "--replicaof", host, port)
	return &shardFollower{proxy: p, admin: redistest.Dial(t, p.AddrString()), replica: redistest.Dial(t, r.Addr())}
}

// waitFollowing waits until the proxy's link to primary is up, with INFO
// and CONFIG GET replicaof naming it, and its replica's link is up.
func (f *shardFollower) waitFollowing(t *testing.T, primary *redistest.Server) {
	t.Helper()
	host, port, _ := strings.Cut(primary.Addr(), ":")
	redistest.WaitFor(t, 20*time.Second, "the proxy to follow "+primary.Addr(), func() bool {
		info := f.admin.Info(t, "replication")
		return info["master_host"] == host && info["master_port"] == port && info["master_link_status"] == "up" &&
			f.replica.Info(t, "replication")["master_link_status"] == "up"
	})
	if got := f.admin.MustDo(t, "CONFIG", "GET", "replicaof").Array(); len(got) != 2 || got[1].String() != host+" "+port {
		t.Errorf("CONFIG GET replicaof = %v, want %s %s", got, host, port)
	}
}

// syncCounts are the full and partial syncs of a failover's nodes.
type syncCounts struct {
	primaryFull int64   // the shard's new primary's sync_full
	proxyFull   []int64 // each proxy's sync_full (its replicas' full syncs)
	upFull      []int64 // each proxy's upstream_full_syncs
	upPartial   []int64 // each proxy's upstream_partial_syncs
}

func counts(t *testing.T, fs []*shardFollower, primary *redistest.Client) syncCounts {
	t.Helper()
	c := syncCounts{primaryFull: primary.InfoInt(t, "stats", "sync_full")}
	for _, f := range fs {
		c.proxyFull = append(c.proxyFull, f.admin.InfoInt(t, "stats", "sync_full"))
		c.upFull = append(c.upFull, f.admin.InfoInt(t, "proxy", "upstream_full_syncs"))
		c.upPartial = append(c.upPartial, f.admin.InfoInt(t, "proxy", "upstream_partial_syncs"))
	}
	return c
}

// checkPartialOnly fails the test unless every sync between before and
// after was partial, and each proxy made one at least.
func checkPartialOnly(t *testing.T, before, after syncCounts) {
	t.Helper()
	if after.primaryFull != before.primaryFull {
		t.Errorf("the new primary's sync_full went from %d to %d: a full sync", before.primaryFull, after.primaryFull)
	}
	for i := range before.proxyFull {
		if after.proxyFull[i] != before.proxyFull[i] {
			t.Errorf("proxy %d's sync_full went from %d to %d: its replica resynced in full", i, before.proxyFull[i], after.proxyFull[i])
		}
		if after.upFull[i] != before.upFull[i] {
			t.Errorf("proxy %d's upstream_full_syncs went from %d to %d", i, before.upFull[i], after.upFull[i])
		}
		if after.upPartial[i] <= before.upPartial[i] {
			t.Errorf("proxy %d's upstream_partial_syncs stayed %d: no partial resync", i, before.upPartial[i])
		}
	}
}

package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
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
		if want := admin.MustDo(t, "CLUSTER", "KEYSLOT", key).Integer(); keySlot(key) != want {
			t.Fatalf("keySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, keySlot(key), want)
		}
	}
	w := startClusterWrites(t, c)
	t.Run("data", func(t *testing.T) {
		w.waitWrites(t, 500)
		w.stop(t)
		for _, f := range followers {
			redistest.WaitSynced(t, c.Dial(first), f.replica)
		}
	})

	t.Run("manual failover", func(t *testing.T) {
		before := counts(t, followers, c.Dial(second))
		w = startClusterWrites(t, c)
		w.waitWrites(t, 200)
		c.Failover(second)
		for _, f := range followers {
			f.waitFollowing(t, second)
		}
		w.waitWrites(t, 200) // writes go on after the failover, to second
		w.stop(t)
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
		w = startClusterWrites(t, c) // retried until first serves the shard
		for _, f := range followers {
			f.waitFollowing(t, first)
		}
		t.Logf("both proxies follow the promoted node %v after the kill", time.Since(killed).Round(time.Millisecond))
		w.waitWrites(t, 200)
		w.stop(t)
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

// clusterWrites is a cluster-aware write load: SETs of keys over every
// slot, each sent to the node that serves its slot (CLUSTER SLOTS, updated
// by MOVED), and retried after an error until it succeeds or the load is
// stopped.
type clusterWrites struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	n      int   // writes acknowledged; guarded by mu
	err    error // the error that ended the load early; guarded by mu
}

func startClusterWrites(t *testing.T, c *redistest.Cluster) *clusterWrites {
	ctx, cancel := context.WithCancel(t.Context())
	w := &clusterWrites{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		err := writeLoop(ctx, c.Addrs(), redistest.DialOptions{Password: c.Password(), Timeout: 2 * time.Second}, func() {
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
		})
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// waitWrites waits until n more writes were acknowledged.
func (w *clusterWrites) waitWrites(t *testing.T, n int) {
	t.Helper()
	w.mu.Lock()
	want := w.n + n
	w.mu.Unlock()
	redistest.WaitFor(t, 30*time.Second, strconv.Itoa(n)+" more writes", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.n >= want || w.err != nil
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatalf("the write load ended: %v", w.err)
	}
}

// stop ends the load and waits for it; a second stop does nothing.
func (w *clusterWrites) stop(t *testing.T) {
	w.cancel()
	<-w.done
}

// writeLoop writes until ctx ends, calling acked after each acknowledged
// write; it returns an error only for a reply no failover explains.
func writeLoop(ctx context.Context, nodes []string, dial redistest.DialOptions, acked func()) error {
	var owner [redistest.ClusterSlots]string
	conns := map[string]*redistest.Client{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	refresh := func() {
		for _, addr := range nodes {
			if clusterSlots(addr, dial, &owner) == nil {
				return
			}
		}
	}
	refresh()
	for i := 0; ctx.Err() == nil; i++ {
		key := "key:" + strconv.Itoa(i%20000)
		slot := keySlot(key)
		for ctx.Err() == nil {
			addr := owner[slot]
			c := conns[addr]
			var err error
			if c == nil {
				c, err = redistest.Connect(addr, dial)
				if err == nil {
					conns[addr] = c
				}
			}
			if err == nil {
				_, err = c.Do("SET", key, i)
			}
			if err == nil {
				acked()
				break
			}
			var re *redistest.ReplyError
			switch {
			case errors.As(err, &re) && re.Prefix() == "MOVED":
				if f := strings.Fields(re.Msg); len(f) == 3 {
					owner[slot] = f[2]
				}
				refresh()
			case errors.As(err, &re) && re.Prefix() != "CLUSTERDOWN" && re.Prefix() != "TRYAGAIN" && re.Prefix() != "LOADING":
				return err
			default: // the node is down, or the cluster is failing over
				if c != nil {
					c.Close()
					delete(conns, addr)
				}
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
				refresh()
			}
		}
	}
	return nil
}

// clusterSlots fills owner with each slot's primary as the node at addr
// sees it (CLUSTER SLOTS).
func clusterSlots(addr string, dial redistest.DialOptions, owner *[redistest.ClusterSlots]string) error {
	c, err := redistest.Connect(addr, dial)
	if err != nil {
		return err
	}
	defer c.Close()
	v, err := c.Do("CLUSTER", "SLOTS")
	if err != nil {
		return err
	}
	for _, r := range v.Array() {
		e := r.Array()
		if len(e) < 3 || len(e[2].Array()) < 2 {
			return errors.New("a CLUSTER SLOTS entry without a primary")
		}
		node := net.JoinHostPort(e[2].Array()[0].String(), e[2].Array()[1].String())
		for s := e[0].Integer(); s <= e[1].Integer() && s < redistest.ClusterSlots; s++ {
			owner[s] = node
		}
	}
	return nil
}

// keySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of its hash
// tag, or of the whole key when it has none, modulo 16384.
func keySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % redistest.ClusterSlots
}

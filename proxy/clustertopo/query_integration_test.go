package clustertopo

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// harnessLayout is the cluster as the harness sees it, in layout's form.
func harnessLayout(c *redistest.Cluster) string {
	var b strings.Builder
	for _, sh := range c.Shards() {
		var slots []string
		for _, r := range sh.Slots {
			slots = append(slots, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
		fmt.Fprintf(&b, "shard %s\n", strings.Join(slots, ","))
		fmt.Fprintf(&b, "  primary %s %s\n", c.NodeID(sh.Primary), sh.Primary.Addr())
		for _, r := range sh.Replicas {
			fmt.Fprintf(&b, "  replica %s %s\n", c.NodeID(r), r.Addr())
		}
	}
	return b.String()
}

// TestQueryCluster follows a shard of a real cluster of three primaries with
// a replica each, through a failover, from seeds some of which are down.
func TestQueryCluster(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Password: "topo-secret"})
	opts := Options{Password: c.Password(), Timeout: 2 * time.Second}
	closed := closedAddr(t)
	writeEveryShard(t, c)
	redistest.WaitFor(t, 10*time.Second, "every replica's offset known", func() bool {
		res, err := Query(t.Context(), c.Addrs(), opts)
		return err == nil && !strings.Contains(render(res.Topology), string(HealthLoading))
	})

	res, err := Query(t.Context(), append([]string{closed}, c.Addrs()...), opts)
	if err != nil {
		t.Fatal(err)
	}
	topo := res.Topology
	if res.Seed != c.Addrs()[0] || len(res.Failed) != 1 || !errors.Is(res.Failed[0].Err, syscall.ECONNREFUSED) {
		t.Errorf("answered by %s after %v; want %s after the closed port's refusal", res.Seed, res.Failed, c.Addrs()[0])
	}
	if topo.Source != FromShards || len(topo.Shards) != 3 {
		t.Fatalf("%v with %d shards, want CLUSTER SHARDS with 3", topo.Source, len(topo.Shards))
	}
	served := 0
	for _, sh := range topo.Shards {
		served += sh.SlotCount()
		if len(sh.Nodes) != 2 {
			t.Errorf("shard %s has %d nodes, want a primary and a replica", sh.ID, len(sh.Nodes))
		}
	}
	if served != Slots {
		t.Errorf("the shards serve %d slots, want %d", served, Slots)
	}
	if got, want := layout(topo), harnessLayout(c); got != want {
		t.Errorf("CLUSTER SHARDS describes\n%s\nthe harness sees\n%s", got, want)
	}

	// By slot and by shard ID, the right primary.
	shard0 := c.ShardOf(0)
	sh, err := topo.ShardBySlot(0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sh.Primary()
	if err != nil || p.ID != c.NodeID(shard0.Primary) || p.Addr != shard0.Primary.Addr() || p.Health != HealthOnline {
		t.Errorf("slot 0's primary = %+v, %v; want %s at %s", p, err, c.NodeID(shard0.Primary), shard0.Primary.Addr())
	}
	other := c.ShardOf(Slots - 1)
	for _, id := range []string{c.NodeID(other.Primary), c.NodeID(other.Replicas[0])} {
		sh, err := topo.ShardByID(id)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := sh.Primary(); err != nil || p.Addr != other.Primary.Addr() {
			t.Errorf("ShardByID(%s)'s primary = %+v, %v; want %s", id, p, err, other.Primary.Addr())
		}
	}

	// CLUSTER NODES and CLUSTER SLOTS, for a user who may not run CLUSTER
	// SHARDS, describe the same cluster (every replica has an offset, so
	// CLUSTER SLOTS lists them all).
	seed := c.Nodes()[0]
	admin := c.Dial(seed)
	admin.MustDo(t, "ACL", "SETUSER", "nodes-only", "on", ">pw", "-@all", "+cluster|nodes")
	admin.MustDo(t, "ACL", "SETUSER", "slots-only", "on", ">pw", "-@all", "+cluster|slots")
	for user, want := range map[string]Source{"nodes-only": FromNodes, "slots-only": FromSlots} {
		res, err := Query(t.Context(), []string{seed.Addr()}, Options{Username: user, Password: "pw"})
		if err != nil {
			t.Fatalf("as %s: %v", user, err)
		}
		if res.Topology.Source != want || layout(res.Topology) != layout(topo) {
			t.Errorf("as %s: %v describes\n%s\nwant %v describing\n%s", user, res.Topology.Source, layout(res.Topology), want, layout(topo))
		}
	}
	if _, err := Query(t.Context(), []string{seed.Addr()}, Options{Password: "wrong"}); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("with a wrong password: %v, want WRONGPASS", err)
	}

	// After a failover, every seed names the promoted replica as slot 0's
	// primary, and the shard is still found by its old primary's ID.
	promoted, demoted := shard0.Replicas[0], shard0.Primary
	c.Failover(promoted)
	for _, addr := range c.Addrs() {
		res, err := Query(t.Context(), []string{addr}, opts)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := res.Topology.ShardBySlot(0)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := sh.Primary(); err != nil || p.ID != c.NodeID(promoted) || p.Addr != promoted.Addr() {
			t.Errorf("from %s after the failover slot 0's primary = %+v, %v; want %s", addr, p, err, promoted.Addr())
		}
		if sh.ID != c.NodeID(promoted) {
			t.Errorf("from %s the shard's ID is %s, want its new primary's", addr, sh.ID)
		}
		byOld, err := res.Topology.ShardByID(c.NodeID(demoted))
		if err != nil || byOld.ID != sh.ID {
			t.Errorf("from %s ShardByID(the old primary) = %s, %v; want %s", addr, byOld.ID, err, sh.ID)
		}
	}

	// With seeds down (a closed port, a stopped node, a frozen one), the
	// query succeeds from the next.
	frozen := other.Replicas[0]
	frozen.Pause()
	demoted.Stop()
	seeds := []string{closed, demoted.Addr(), frozen.Addr(), other.Primary.Addr()}
	res, err = Query(t.Context(), seeds, Options{Password: c.Password(), Timeout: 500 * time.Millisecond})
	frozen.Resume()
	if err != nil {
		t.Fatal(err)
	}
	if res.Seed != other.Primary.Addr() || len(res.Failed) != 3 {
		t.Fatalf("answered by %s after %v; want %s after three failures", res.Seed, res.Failed, other.Primary.Addr())
	}
	if !errors.Is(res.Failed[1].Err, syscall.ECONNREFUSED) {
		t.Errorf("the stopped node: %v, want ECONNREFUSED", res.Failed[1].Err)
	}
	if err := res.Failed[2].Err; !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("the frozen node: %v, want its timeout", err)
	}
	if sh, err := res.Topology.ShardBySlot(0); err != nil {
		t.Error(err)
	} else if p, err := sh.Primary(); err != nil || p.Addr != promoted.Addr() {
		t.Errorf("slot 0's primary = %+v, %v; want %s", p, err, promoted.Addr())
	}
	t.Logf("the cluster's topology followed through a failover in %v", time.Since(start).Round(time.Millisecond))
}

// TestQueryTLS asks a real redis-server over TLS, with AUTH: a server
// without cluster support answers, and its error reply comes back; a
// client that does not trust its certificate fails the handshake.
func TestQueryTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	s := redistest.StartTLSServer(t, pki, "--requirepass", "pw")
	conf := pki.ClientConfig()
	conf.ServerName = "" // Query names the seed's host
	_, err := Query(t.Context(), []string{s.Addr()}, Options{TLS: conf, Password: "pw"})
	if err == nil || !strings.Contains(err.Error(), "cluster support disabled") {
		t.Errorf("over TLS: %v, want the server's error reply", err)
	}
	_, err = Query(t.Context(), []string{s.Addr()}, Options{TLS: &tls.Config{}, Password: "pw"})
	if err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Errorf("with an untrusted certificate: %v, want a failed handshake", err)
	}
}

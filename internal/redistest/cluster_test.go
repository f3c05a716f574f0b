package redistest

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestClusterPort checks that a node's port leaves room for its bus port
// and that both are free, which a machine whose free ports are all low
// would not show: the free ports tried are the test's.
func TestClusterPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busTaken := taken.Addr().(*net.TCPAddr).Port - ClusterBusOffset // a port whose bus port is taken
	good := FreePort(t)
	for good+ClusterBusOffset > 65535 {
		good = FreePort(t)
	}
	tries := []int{65535 - ClusterBusOffset + 1, 60000, busTaken, good}
	var tried []int
	got := clusterPortFrom(t, func(testing.TB) int {
		p := tries[len(tried)]
		tried = append(tried, p)
		return p
	})
	if got != good || len(tried) != len(tries) {
		t.Errorf("clusterPort tried %v and chose %d; want %d, the first with room for a free bus port", tried, got, good)
	}
}

func TestParseClusterNodes(t *testing.T) {
	const text = "" +
		"07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected\n" +
		"67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002,host-b master - 0 1426238316232 2 connected 5461-10922 [10923-<-abc]\n" +
		"e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460 16383\n"
	view, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != 3 {
		t.Fatalf("parsed %d nodes, want 3", len(view))
	}
	if n := view[0]; n.master != "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca" || !n.flags["slave"] || n.slots != nil {
		t.Errorf("replica parsed as %+v", n)
	}
	if n := view[1]; n.addr != "127.0.0.1:30002" || !slices.Equal(n.slots, [][2]int{{5461, 10922}}) {
		t.Errorf("primary with a migrating slot parsed as %+v", n)
	}
	if n := view[2]; !n.flags["myself"] || !slices.Equal(n.slots, [][2]int{{0, 5460}, {16383, 16383}}) {
		t.Errorf("own line parsed as %+v", n)
	}
	if _, err := parseClusterNodes("abc 127.0.0.1:1@2 master\n"); err == nil {
		t.Errorf("a short line parsed")
	}
	if _, err := parseClusterNodes("e7d1 127.0.0.1:1@2 master - 0 0 1 connected 0-x\n"); err == nil {
		t.Errorf("a bad slot range parsed")
	}
}

// TestCluster starts a cluster of three shards, fails one over, and
// restarts a node, checking what the harness reports against the nodes.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, ClusterOptions{Password: "secret"})
	if n := len(c.Nodes()); n != 6 {
		t.Fatalf("%d nodes, want 6", n)
	}
	for _, s := range c.Nodes() {
		if s.Port()+ClusterBusOffset > 65535 {
			t.Errorf("node %s: no room for its bus port", s.Addr())
		}
		if got := c.Node(c.NodeID(s)); got != s {
			t.Errorf("Node(NodeID(%s)) = %v", s.Addr(), got)
		}
		if info := c.Dial(s).Info(t, "server"); info["redis_mode"] != "cluster" {
			t.Errorf("node %s: redis_mode:%s", s.Addr(), info["redis_mode"])
		}
	}
	if _, err := DialOpts(t, c.Nodes()[0].Addr(), DialOptions{}); err != nil {
		t.Fatal(err)
	} else if _, err := Dial(t, c.Nodes()[0].Addr()).Do("CLUSTER", "INFO"); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("CLUSTER INFO without the password: %v, want NOAUTH", err)
	}

	shards := c.Shards()
	if len(shards) != 3 {
		t.Fatalf("%d shards, want 3", len(shards))
	}
	next := 0
	for _, sh := range shards {
		if sh.Primary == nil || len(sh.Replicas) != 1 || sh.Replicas[0] == nil {
			t.Fatalf("shard %+v: want a known primary and one known replica", sh)
		}
		for _, r := range sh.Slots {
			if r[0] != next {
				t.Fatalf("shards %+v do not cover the slots in order at %d", shards, next)
			}
			next = r[1] + 1
		}
		role := c.Dial(sh.Replicas[0]).Info(t, "replication")
		if role["role"] != "slave" || role["master_port"] != strconv.Itoa(sh.Primary.Port()) || role["master_link_status"] != "up" {
			t.Errorf("replica %s: role:%s master_port:%s master_link_status:%s, want a linked replica of %s",
				sh.Replicas[0].Addr(), role["role"], role["master_port"], role["master_link_status"], sh.Primary.Addr())
		}
	}
	if next != ClusterSlots {
		t.Fatalf("shards cover slots up to %d, want %d", next, ClusterSlots)
	}

	before := c.ShardOf(0)
	c.Failover(before.Replicas[0])
	// Failover returns once the promotion is done, not when it starts.
	if role := c.Dial(before.Replicas[0]).Info(t, "replication")["role"]; role != "master" {
		t.Errorf("right after Failover the promoted node says role:%s", role)
	}
	after := c.ShardOf(0)
	if after.Primary != before.Replicas[0] || !slices.Equal(after.Replicas, []*Server{before.Primary}) {
		t.Errorf("after the failover slot 0 is served by %s with replicas %v; want %s with replica %s",
			after.Primary.Addr(), after.Replicas, before.Replicas[0].Addr(), before.Primary.Addr())
	}
	if role := c.Dial(after.Primary).Info(t, "replication")["role"]; role != "master" {
		t.Errorf("the promoted node says role:%s", role)
	}

	// A restarted node rejoins with its node ID (nodes.conf is in its dir).
	replica := after.Replicas[0]
	id := c.NodeID(replica)
	replica.Restart()
	c.WaitReady()
	if got := c.Dial(replica).MustDo(t, "CLUSTER", "MYID").String(); got != id {
		t.Errorf("restarted node's ID = %s, want %s", got, id)
	}
	if link := c.Dial(replica).Info(t, "replication")["master_link_status"]; link != "up" {
		t.Errorf("right after WaitReady the restarted replica's link is %s", link)
	}
}

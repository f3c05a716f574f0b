package main

import (
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/resp"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestClusterAllShards runs replproxy (the real binary) with cluster-shard
// all in front of a real cluster of three primaries with a replica each,
// and a standalone redis-server replica of each shard's port. In order, on
// one cluster: CLUSTER SHARDS and SLOTS from the proxy list every shard with
// its slots and port, in redis-server's shapes; under a write load over
// every slot each replica ends with its shard primary's data; CLUSTER
// FAILOVER in each shard in turn is followed by partial resync, the other
// shards' servers untouched; a slot range resharded between two shards
// under writes leaves every copy equal to its shard; the process SIGKILLed
// and started again resumes every shard by partial resync on the same
// ports, without a full sync anywhere; and, last, a shard's primary
// killed is followed to the replica the cluster promotes.
func TestClusterAllShards(t *testing.T) {
	start := time.Now()
	top := t // what must outlive a subtest is the whole test's
	redistest.Require(t)
	c := redistest.StartCluster(t, redistest.ClusterOptions{Args: []string{"--repl-backlog-size", "64mb"}})
	dir := t.TempDir()
	base := consecutivePorts(t, 3)
	x := startClusterProxy(t, c, dir, base, 1)
	copies := make([]*shardCopy, 3)
	for i := range copies {
		copies[i] = newShardCopy(t, c, base+i)
	}
	for _, cp := range copies {
		cp.waitLinked(t)
	}

	t.Run("cluster shards and slots", func(t *testing.T) {
		checkClusterReplies(t, c, copies)
	})

	t.Run("data", func(t *testing.T) {
		w := redistest.StartClusterWrites(t, c)
		w.WaitWrites(t, 3000)
		w.Stop()
		for _, cp := range copies {
			cp.waitEqual(t, c)
		}
	})

	// Each shard's replica in turn: the shard's port follows it by partial
	// resync, the other ports are not touched.
	for turn := range copies {
		t.Run("failover "+strconv.Itoa(turn), func(t *testing.T) {
			failoverShard(t, c, copies, turn)
		})
	}

	t.Run("reshard", func(t *testing.T) {
		shards := c.Shards()
		from, to := shards[0], shards[1]
		w := redistest.StartClusterWrites(t, c)
		w.WaitWrites(t, 300)
		out := redistest.RedisCLI(t, "--cluster", "reshard", from.Primary.Addr(), "--cluster-from", from.PrimaryID,
			"--cluster-to", to.PrimaryID, "--cluster-slots", "200", "--cluster-yes")
		if !strings.Contains(out, "Moving slot") {
			t.Fatalf("redis-cli --cluster reshard moved nothing:\n%s", out)
		}
		c.WaitReady()
		w.WaitWrites(t, 300)
		w.Stop()
		for _, cp := range copies {
			cp.waitEqual(t, c)
		}
		// The proxy's map follows: the slots moved show on the new owner's port.
		redistest.WaitFor(t, 10*time.Second, "CLUSTER SHARDS to show the moved slots", func() bool {
			return clusterRepliesMatch(t, c, copies) == ""
		})
	})

	t.Run("SIGKILL and restart", func(t *testing.T) {
		primaries := fullSyncsOf(t, c)
		w := redistest.StartClusterWrites(t, c)
		w.WaitWrites(t, 500)
		syscall.Kill(-x.cmd.Process.Pid, syscall.SIGKILL)
		<-x.exited
		w.WaitWrites(t, 500)
		startClusterProxy(top, c, dir, base, 2)
		for _, cp := range copies {
			cp.reconnect(t)
			cp.waitLinked(t)
		}
		w.WaitWrites(t, 500)
		w.Stop()
		for _, cp := range copies {
			cp.waitEqual(t, c)
		}
		for _, f := range figuresOf(t, copies) {
			if f.syncFull != 0 || f.upFull != 0 || f.upPartial < 1 || f.partialOK < 1 {
				t.Errorf("port %d after the restart: sync_full %d, sync_partial_ok %d, upstream_full_syncs %d, upstream_partial_syncs %d; want 0, at least 1, 0, at least 1",
					f.port, f.syncFull, f.partialOK, f.upFull, f.upPartial)
			}
		}
		if got := fullSyncsOf(t, c); !maps.Equal(got, primaries) {
			t.Errorf("the cluster's sync_full went from %v to %v", primaries, got)
		}
		checkClusterReplies(t, c, copies)
	})

	t.Run("cost to the primaries", func(t *testing.T) {
		// Two more replicas of each shard, first through the proxy's
		// ports, then attached to the primaries directly, each under the
		// same write load: what each costs the cluster's primaries in
		// forks and CPU seconds.
		viaProxy := primaryCost(t, c, func() []*redistest.Server {
			var rs []*redistest.Server
			for _, cp := range copies {
				for range 2 {
					rs = append(rs, redistest.StartServer(t, "--replicaof", "127.0.0.1", itoa(cp.port)))
				}
			}
			return rs
		})
		direct := primaryCost(t, c, func() []*redistest.Server {
			var rs []*redistest.Server
			for _, sh := range c.Shards() {
				host, port, _ := strings.Cut(sh.Primary.Addr(), ":")
				for range 2 {
					rs = append(rs, redistest.StartServer(t, "--replicaof", host, port))
				}
			}
			return rs
		})
		t.Logf("six more replicas and %d writes, the three primaries together: through the proxy %d forks, %.2f CPU s; attached directly %d forks, %.2f CPU s",
			costWrites, viaProxy.forks, viaProxy.cpu, direct.forks, direct.cpu)
		if viaProxy.forks >= direct.forks {
			t.Errorf("replicas through the proxy cost the primaries %d forks, attached directly %d", viaProxy.forks, direct.forks)
		}
	})
	t.Run("killed primary", func(t *testing.T) {
		// Last: the killed node stays down. No write reaches the shard
		// from the kill until its replica took over, as in
		// TestFollowClusterShard: a write the proxy received and the
		// replica did not would leave the proxy ahead of the promoted
		// node, which would then refuse its partial resync, as it would
		// refuse any replica ahead of it.
		for _, cp := range copies {
			cp.reconnect(t) // the admin clients of the restart's subtest are closed
		}
		hit := copies[1]
		sh := hit.shard(t, c)
		promoted := sh.Replicas[0]
		redistest.WaitSynced(t, c.Dial(sh.Primary), hit.replica)
		redistest.WaitSynced(t, c.Dial(sh.Primary), c.Dial(promoted))
		before := figuresOf(t, copies)
		primaries := fullSyncsOf(t, c)
		delete(primaries, sh.Primary.Addr())
		killed := time.Now()
		sh.Primary.Kill()
		w := redistest.StartClusterWrites(t, c) // retried until the promoted node serves the shard
		host, port, _ := strings.Cut(promoted.Addr(), ":")
		redistest.WaitFor(t, 30*time.Second, "the shard's port to follow the promoted node", func() bool {
			info := hit.admin.Info(t, "replication")
			return info["master_host"] == host && info["master_port"] == port && info["master_link_status"] == "up"
		})
		t.Logf("the shard's port follows the promoted node %v after the kill", time.Since(killed).Round(time.Millisecond))
		w.WaitWrites(t, 300)
		w.Stop()
		for _, cp := range copies {
			cp.waitEqual(t, c)
		}
		checkOneShardMoved(t, copies, 1, before, figuresOf(t, copies))
		if got := fullSyncsOf(t, c); !maps.Equal(got, primaries) {
			t.Errorf("the cluster's sync_full went from %v to %v", primaries, got)
		}
	})
	t.Logf("TestClusterAllShards took %v", time.Since(start).Round(time.Millisecond))
}

// failoverShard runs CLUSTER FAILOVER on the replica of copies[turn]'s
// shard under a write load, and checks that the shard's port follows the
// promoted node by partial resync, that no other port was touched, that
// every copy ends equal to its shard, and that no node of the cluster made
// a full sync.
func failoverShard(t *testing.T, c *redistest.Cluster, copies []*shardCopy, turn int) {
	t.Helper()
	moved := copies[turn]
	sh := moved.shard(t, c)
	before := figuresOf(t, copies)
	primaries := fullSyncsOf(t, c)
	w := redistest.StartClusterWrites(t, c)
	w.WaitWrites(t, 500)
	c.Failover(sh.Replicas[0])
	host, port, _ := strings.Cut(sh.Replicas[0].Addr(), ":")
	redistest.WaitFor(t, 20*time.Second, "the shard's port to follow the promoted node", func() bool {
		info := moved.admin.Info(t, "replication")
		return info["master_host"] == host && info["master_port"] == port && info["master_link_status"] == "up"
	})
	w.WaitWrites(t, 500)
	w.Stop()
	for _, cp := range copies {
		cp.waitEqual(t, c)
	}
	checkOneShardMoved(t, copies, turn, before, figuresOf(t, copies))
	if got := fullSyncsOf(t, c); !maps.Equal(got, primaries) {
		t.Errorf("the cluster's sync_full went from %v to %v", primaries, got)
	}
}

// checkOneShardMoved checks the ports' figures around a failover in the
// shard of copies[moved]: no port restarted or made a full sync, up or
// down; the moved port made a partial resync to the promoted node; no
// other port's link was touched.
func checkOneShardMoved(t *testing.T, copies []*shardCopy, moved int, before, after []portFigures) {
	t.Helper()
	for i := range copies {
		b, a := before[i], after[i]
		if a.runID != b.runID || a.syncFull != b.syncFull || a.upFull != b.upFull {
			t.Errorf("port %d: run_id %s→%s, sync_full %d→%d, upstream_full_syncs %d→%d; want none changed",
				copies[i].port, b.runID, a.runID, b.syncFull, a.syncFull, b.upFull, a.upFull)
		}
		if i == moved && a.upPartial <= b.upPartial {
			t.Errorf("port %d: upstream_partial_syncs stayed %d: no partial resync to the promoted node", copies[i].port, b.upPartial)
		}
		if i != moved && a.upPartial != b.upPartial {
			t.Errorf("port %d (another shard): upstream_partial_syncs %d→%d: its link was touched", copies[i].port, b.upPartial, a.upPartial)
		}
	}
}

// costWrites is the write load each side of the cost comparison runs.
const costWrites = 20000

// cost is what a phase cost the cluster's primaries.
type cost struct {
	forks int64
	cpu   float64 // used_cpu_sys + used_cpu_user, seconds
}

// primaryCost starts replicas with attach, waits until each is in sync
// after costWrites writes, stops them, and returns what it cost the
// shards' primaries together.
func primaryCost(t *testing.T, c *redistest.Cluster, attach func() []*redistest.Server) cost {
	t.Helper()
	shards := c.Shards()
	read := func() cost {
		var k cost
		for _, sh := range shards {
			cl := c.Dial(sh.Primary)
			k.forks += cl.InfoInt(t, "stats", "total_forks")
			cpu := cl.Info(t, "cpu")
			for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
				v, err := strconv.ParseFloat(cpu[f], 64)
				if err != nil {
					t.Fatalf("INFO cpu %s: %v", f, err)
				}
				k.cpu += v
			}
			cl.Close()
		}
		return k
	}
	before := read()
	replicas := attach()
	w := redistest.StartClusterWrites(t, c)
	w.WaitWrites(t, costWrites)
	w.Stop()
	for _, sh := range shards {
		primary := c.Dial(sh.Primary)
		info := primary.Info(t, "replication")
		var mine []*redistest.Client
		for _, r := range replicas {
			rc := redistest.Dial(t, r.Addr())
			if replicaOfReplID(t, rc, info["master_replid"]) {
				mine = append(mine, rc)
			}
		}
		redistest.WaitSynced(t, primary, mine...)
	}
	after := read()
	for _, r := range replicas {
		r.Stop()
	}
	return cost{forks: after.forks - before.forks, cpu: after.cpu - before.cpu}
}

// replicaOfReplID reports, once rc's link is up, whether its master_replid
// is replid: a replica of a shard's primary, directly or through the proxy
// (which relays the primary's replid), has that primary's.
func replicaOfReplID(t *testing.T, rc *redistest.Client, replid string) bool {
	t.Helper()
	var info map[string]string
	if !redistest.Poll(30*time.Second, func() bool {
		info = rc.Info(t, "replication")
		return info["master_link_status"] == "up"
	}) {
		t.Fatalf("a replica's link to %s:%s not up: %v", info["master_host"], info["master_port"], info)
	}
	return info["master_replid"] == replid
}

// clusterProxy is the replproxy process of TestClusterAllShards.
type clusterProxy struct {
	cmd    *exec.Cmd
	exited <-chan error
}

// startClusterProxy starts replproxy following every shard of c from
// ports base on, with dir, logging to dir's replproxy-<n>.log (checked
// against docs/logs.md).
func startClusterProxy(t *testing.T, c *redistest.Cluster, dir string, base, n int) *clusterProxy {
	t.Helper()
	proxyDir := filepath.Join(dir, "proxy")
	logPath := filepath.Join(dir, "replproxy-"+itoa(n)+".log")
	args := []string{"--port", "0", "--dir", proxyDir, "--logfile", logPath, "--repl-log-size", "64mb",
		"--cluster-shard", "all", "--cluster-port-base", itoa(base), "--cluster-refresh-interval", "500", "--replicaof-cluster"}
	for _, a := range c.Addrs() {
		host, port, _ := strings.Cut(a, ":")
		args = append(args, host, port)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	checkJSONLog(t, logPath)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("proxy %d's log:\n%s", n, b)
		}
	})
	return &clusterProxy{cmd: cmd, exited: redistest.StartProcess(t, cmd)}
}

// consecutivePorts returns the first of n consecutive free ports.
func consecutivePorts(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := redistest.FreePort(t)
		ok := base+n <= 65535
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", itoa(base+i)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// shardCopy is one shard's port of the proxy and the redis-server that
// replicates it.
type shardCopy struct {
	port    int
	admin   *redistest.Client // of the proxy's port
	replica *redistest.Client
}

// newShardCopy waits for the proxy's port to answer and starts a replica of
// it.
func newShardCopy(t *testing.T, c *redistest.Cluster, port int) *shardCopy {
	t.Helper()
	cp := &shardCopy{port: port}
	cp.reconnect(t)
	r := redistest.StartServer(t, "--replicaof", "127.0.0.1", itoa(port))
	cp.replica = redistest.Dial(t, r.Addr())
	return cp
}

// reconnect dials the proxy's port again, waiting until it answers.
func (cp *shardCopy) reconnect(t *testing.T) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", itoa(cp.port))
	redistest.WaitFor(t, 20*time.Second, "the proxy's port "+addr, func() bool {
		cl, err := redistest.Connect(addr, redistest.DialOptions{Timeout: time.Second})
		if err != nil {
			return false
		}
		cl.Close()
		return true
	})
	if cp.admin != nil {
		cp.admin.Close()
	}
	cp.admin = redistest.Dial(t, addr)
}

// waitLinked waits until the port's link to its shard's primary and its
// replica's link to it are up.
func (cp *shardCopy) waitLinked(t *testing.T) {
	t.Helper()
	redistest.WaitFor(t, 30*time.Second, "port "+itoa(cp.port)+" and its replica linked", func() bool {
		return cp.admin.Info(t, "replication")["master_link_status"] == "up" &&
			cp.replica.Info(t, "replication")["master_link_status"] == "up"
	})
}

// shard returns the cluster's shard this port serves: the one whose
// primary the port follows.
func (cp *shardCopy) shard(t *testing.T, c *redistest.Cluster) redistest.ClusterShard {
	t.Helper()
	info := cp.admin.Info(t, "replication")
	addr := net.JoinHostPort(info["master_host"], info["master_port"])
	for _, sh := range c.Shards() {
		if sh.Primary.Addr() == addr {
			return sh
		}
	}
	t.Fatalf("port %d follows %s, no shard's primary", cp.port, addr)
	return redistest.ClusterShard{}
}

// waitEqual waits until the port's replica has its shard primary's
// offset and DEBUG DIGEST.
func (cp *shardCopy) waitEqual(t *testing.T, c *redistest.Cluster) {
	t.Helper()
	redistest.WaitFor(t, 20*time.Second, "port "+itoa(cp.port)+" to follow its shard's primary", func() bool {
		info := cp.admin.Info(t, "replication")
		addr := net.JoinHostPort(info["master_host"], info["master_port"])
		return info["master_link_status"] == "up" && slices.ContainsFunc(c.Shards(), func(sh redistest.ClusterShard) bool {
			return sh.Primary.Addr() == addr
		})
	})
	redistest.WaitSynced(t, c.Dial(cp.shard(t, c).Primary), cp.replica)
}

// portFigures are one port's sync figures.
type portFigures struct {
	port                                   int
	runID                                  string
	syncFull, partialOK, upFull, upPartial int64
}

func figuresOf(t *testing.T, copies []*shardCopy) []portFigures {
	t.Helper()
	out := make([]portFigures, len(copies))
	for i, cp := range copies {
		out[i] = portFigures{port: cp.port, runID: cp.admin.Info(t, "server")["run_id"],
			syncFull: cp.admin.InfoInt(t, "stats", "sync_full"), partialOK: cp.admin.InfoInt(t, "stats", "sync_partial_ok"),
			upFull: cp.admin.InfoInt(t, "proxy", "upstream_full_syncs"), upPartial: cp.admin.InfoInt(t, "proxy", "upstream_partial_syncs")}
	}
	return out
}

// fullSyncsOf returns every running node's sync_full, by address.
func fullSyncsOf(t *testing.T, c *redistest.Cluster) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, s := range c.Nodes() {
		if s.Pid() != 0 {
			out[s.Addr()] = c.Dial(s).InfoInt(t, "stats", "sync_full")
		}
	}
	return out
}

// checkClusterReplies fails the test unless CLUSTER SHARDS and SLOTS from
// every port list every shard with its slots and its port
// (clusterRepliesMatch), and a shard's entry has the shape a cluster
// node's has.
func checkClusterReplies(t *testing.T, c *redistest.Cluster, copies []*shardCopy) {
	t.Helper()
	var why string
	if !redistest.Poll(10*time.Second, func() bool {
		why = clusterRepliesMatch(t, c, copies)
		return why == ""
	}) {
		t.Fatal(why)
	}
	// The shape: the keys of a shard and of its node, in redis-server's
	// order (ours has no replica and no hostname), each value of the same
	// kind.
	real := c.Dial(c.Shards()[0].Primary).MustDo(t, "CLUSTER", "SHARDS").Array()[0].Array()
	ours := copies[0].admin.MustDo(t, "CLUSTER", "SHARDS").Array()[0].Array()
	if shape(real) != shape(ours) {
		t.Errorf("a shard of CLUSTER SHARDS: the cluster's is %s, the proxy's %s", shape(real), shape(ours))
	}
	realNode, ourNode := real[3].Array()[0].Array(), ours[3].Array()[0].Array()
	if shape(realNode) != shape(ourNode) {
		t.Errorf("a node of CLUSTER SHARDS: the cluster's is %s, the proxy's %s", shape(realNode), shape(ourNode))
	}
	realSlot := c.Dial(c.Shards()[0].Primary).MustDo(t, "CLUSTER", "SLOTS").Array()[0].Array()
	ourSlot := copies[0].admin.MustDo(t, "CLUSTER", "SLOTS").Array()[0].Array()
	if kinds(realSlot[:3]) != kinds(ourSlot[:3]) || kinds(realSlot[2].Array()) != kinds(ourSlot[2].Array()) {
		t.Errorf("an entry of CLUSTER SLOTS: the cluster's is %s %s, the proxy's %s %s", kinds(realSlot[:3]),
			kinds(realSlot[2].Array()), kinds(ourSlot[:3]), kinds(ourSlot[2].Array()))
	}
	if _, err := copies[0].admin.Do("CLUSTER", "NODES"); err == nil {
		t.Error("CLUSTER NODES served")
	}
}

// shape renders a reply's keys (its strings at even places) and the kind
// of each value.
func shape(v []resp.Value) string {
	var b strings.Builder
	for i, e := range v {
		if i%2 == 0 && e.Type() == resp.BulkString {
			b.WriteString(e.String())
		}
		b.WriteString(":" + e.Type().String() + " ")
	}
	return b.String()
}

// kinds renders the kind of each of a reply's values.
func kinds(v []resp.Value) string {
	var b strings.Builder
	for _, e := range v {
		b.WriteString(e.Type().String() + " ")
	}
	return b.String()
}

// clusterRepliesMatch returns "" when every port's CLUSTER SHARDS and SLOTS
// list each shard of the cluster with its slots, served by the port whose
// replica follows it; else what differs.
func clusterRepliesMatch(t *testing.T, c *redistest.Cluster, copies []*shardCopy) string {
	t.Helper()
	want := map[string]string{} // slots as "first-last ..." → port
	for _, cp := range copies {
		sh := cp.shard(t, c)
		want[slotsText(sh.Slots)] = itoa(cp.port)
	}
	for _, cp := range copies {
		v, err := cp.admin.Do("CLUSTER", "SHARDS")
		if err != nil {
			return err.Error()
		}
		got := map[string]string{}
		for _, sh := range v.Array() {
			kv := sh.Array()
			var ranges [][2]int
			slots := kv[1].Array()
			for i := 0; i+1 < len(slots); i += 2 {
				ranges = append(ranges, [2]int{slots[i].Integer(), slots[i+1].Integer()})
			}
			node := kv[3].Array()[0].Array()
			for i := 0; i+1 < len(node); i += 2 {
				if node[i].String() == "port" {
					got[slotsText(ranges)] = node[i+1].String()
				}
			}
		}
		if !maps.Equal(got, want) {
			return "CLUSTER SHARDS on port " + itoa(cp.port) + ": " + mapText(got) + ", want " + mapText(want)
		}
		v, err = cp.admin.Do("CLUSTER", "SLOTS")
		if err != nil {
			return err.Error()
		}
		covered := 0
		for _, e := range v.Array() {
			r := e.Array()
			covered += r[1].Integer() - r[0].Integer() + 1
		}
		if covered != redistest.ClusterSlots {
			return "CLUSTER SLOTS on port " + itoa(cp.port) + " covers " + itoa(covered) + " slots"
		}
	}
	return ""
}

func slotsText(ranges [][2]int) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = strconv.Itoa(r[0]) + "-" + strconv.Itoa(r[1])
	}
	return strings.Join(parts, " ")
}

func mapText(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, "["+k+"]→"+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

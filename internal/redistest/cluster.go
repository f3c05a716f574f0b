package redistest

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/resp"
)

const (
	// ClusterBusOffset is how far above its port a cluster node listens for
	// its cluster bus (Redis's CLUSTER_PORT_INCR, with cluster-port 0): a
	// node's port must leave room for it below 65536, and both must be free.
	ClusterBusOffset = 10000
	// ClusterSlots is the number of hash slots a cluster spreads its keys on.
	ClusterSlots = 16384
	// DefaultClusterNodeTimeout is the cluster-node-timeout of a cluster whose
	// [ClusterOptions] leave it zero: small, so that a node a test stops is
	// marked failing within seconds.
	DefaultClusterNodeTimeout = 2 * time.Second
	// ClusterSettleTimeout bounds each wait for a cluster to settle: after
	// its creation, a failover, or a test's [Cluster.WaitReady].
	ClusterSettleTimeout = 30 * time.Second
	// clusterPortAttempts is how many free ports [clusterPort] tries for one
	// whose bus port is free too.
	clusterPortAttempts = 100
)

// ClusterOptions configure [StartCluster]. The zero value is three primaries
// with one replica each, no password, and [DefaultClusterNodeTimeout].
type ClusterOptions struct {
	// Primaries is the number of shards; zero means 3, the fewest
	// redis-cli --cluster create accepts.
	Primaries int
	// Replicas is the number of replicas of each primary; zero means 1.
	Replicas int
	// NodeTimeout is every node's cluster-node-timeout; zero means
	// [DefaultClusterNodeTimeout].
	NodeTimeout time.Duration
	// Password, when set, is every node's requirepass and masterauth; the
	// harness's own clients and redis-cli authenticate with it.
	Password string
	// Args are added to every node's command line.
	Args []string
}

// Cluster is a Redis Cluster of real redis-server processes owned by a
// test: each node in its own directory (its nodes.conf there, so that a
// [Server.Restart] rejoins with the same node ID), on 127.0.0.1. Like
// [Server], it is not safe for concurrent use, and its methods fail the
// test that started it. Every node is stopped when the test ends.
type Cluster struct {
	t        testing.TB
	nodes    []*Server
	ids      []string // ids[i] is nodes[i]'s node ID, read once it started
	password string
}

// ClusterShard is one shard of a [Cluster] as a running node sees it.
type ClusterShard struct {
	Primary   *Server
	PrimaryID string
	Replicas  []*Server
	Slots     [][2]int // inclusive ranges of slots, in order
}

// StartCluster starts opts.Primaries*(1+opts.Replicas) redis-servers with
// cluster-enabled yes, makes them one cluster with redis-cli --cluster
// create, and waits until every node says cluster_state:ok, sees the same
// primaries serving the same slots, and every replica's link is up
// ([Cluster.WaitReady]). Nodes run with repl-diskless-sync-delay 0, so that a
// replica's first sync does not wait five seconds.
//
// Each node's port is below 65536-[ClusterBusOffset], with its bus port free
// when it was picked; a port taken before the node bound it is retried as
// [StartServer] does.
func StartCluster(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	bin, _ := Require(t)
	primaries := orDefault(opts.Primaries, 3)
	replicas := orDefault(opts.Replicas, 1)
	timeout := opts.NodeTimeout
	if timeout <= 0 {
		timeout = DefaultClusterNodeTimeout
	}
	c := &Cluster{t: t, password: opts.Password}
	for range primaries * (1 + replicas) {
		args := []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(timeout.Milliseconds(), 10),
			"--repl-diskless-sync-delay", "0",
		}
		if opts.Password != "" {
			args = append(args, "--requirepass", opts.Password, "--masterauth", opts.Password)
		}
		c.nodes = append(c.nodes, startClusterNode(t, bin, append(args, opts.Args...)))
	}
	c.ids = make([]string, len(c.nodes))
	for i, s := range c.nodes {
		v, err := c.do(s, "CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.ids[i] = v.String()
	}
	args := []string{"--cluster", "create"}
	for _, s := range c.nodes {
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if opts.Password != "" {
		args = append(args, "--no-auth-warning", "-a", opts.Password)
	}
	start := time.Now()
	out := RedisCLI(t, args...)
	if !strings.Contains(out, "[OK] All 16384 slots covered") {
		t.Fatalf("redistest: redis-cli --cluster create did not cover every slot:\n%s", out)
	}
	c.WaitReady()
	t.Logf("redistest: cluster of %d nodes, %d of them primaries, ready in %v", len(c.nodes), primaries,
		time.Since(start).Round(time.Millisecond))
	return c
}

// orDefault returns n, or def when n is not positive.
func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// startClusterNode starts one node as [StartServer] starts a server, on a
// port picked by clusterPort.
func startClusterNode(t testing.TB, bin string, args []string) *Server {
	t.Helper()
	dir := t.TempDir() // before t.Cleanup below, so it is removed after the log is shown
	s := &Server{t: t, bin: bin, dir: dir, logPath: filepath.Join(dir, "redis.log"), args: args}
	for i, a := range args {
		if a == "--requirepass" && i+1 < len(args) {
			s.password = args[i+1]
		}
	}
	t.Cleanup(s.cleanup)
	startOnPickedPort(t, "a cluster node", clusterPort, &s.port, s.start)
	return s
}

// clusterPort returns a free port of 127.0.0.1 whose bus port, ClusterBusOffset
// above it, is below 65536 and was free a moment ago too.
func clusterPort(t testing.TB) int {
	t.Helper()
	return clusterPortFrom(t, FreePort)
}

// clusterPortFrom is clusterPort with the free ports tried given by free.
func clusterPortFrom(t testing.TB, free func(testing.TB) int) int {
	t.Helper()
	for range clusterPortAttempts {
		port := free(t)
		if port+ClusterBusOffset > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+ClusterBusOffset)))
		if err != nil {
			continue
		}
		l.Close()
		return port
	}
	t.Fatalf("redistest: no free port with a free cluster bus port in %d attempts", clusterPortAttempts)
	return 0
}

// Nodes returns every node, the stopped ones included, in the order they
// were started.
func (c *Cluster) Nodes() []*Server { return slices.Clone(c.nodes) }

// Addrs returns every node's address, in the order of [Cluster.Nodes].
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Password returns the nodes' requirepass ("" for none).
func (c *Cluster) Password() string { return c.password }

// NodeID returns s's cluster node ID (40 hex digits).
func (c *Cluster) NodeID(s *Server) string {
	c.t.Helper()
	i := slices.Index(c.nodes, s)
	if i < 0 {
		c.t.Fatalf("redistest: %s is not a node of the cluster", s.Addr())
	}
	return c.ids[i]
}

// Node returns the node whose ID is id, or nil.
func (c *Cluster) Node(id string) *Server {
	if i := slices.Index(c.ids, id); i >= 0 {
		return c.nodes[i]
	}
	return nil
}

// Dial connects to node s as [Dial] does, with the cluster's password.
func (c *Cluster) Dial(s *Server) *Client {
	c.t.Helper()
	cl, err := DialOpts(c.t, s.Addr(), DialOptions{Password: c.password})
	if err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
	return cl
}

// Shards returns the cluster's shards as the first running node sees them,
// in the order of their first slot.
func (c *Cluster) Shards() []ClusterShard {
	c.t.Helper()
	for _, s := range c.nodes {
		if s.Pid() == 0 {
			continue
		}
		view, err := c.view(s)
		if err != nil {
			c.t.Fatalf("redistest: %v", err)
		}
		return c.shards(view)
	}
	c.t.Fatalf("redistest: no node of the cluster is running")
	return nil
}

// ShardOf returns the shard that serves slot, as [Cluster.Shards] sees it.
func (c *Cluster) ShardOf(slot int) ClusterShard {
	c.t.Helper()
	for _, sh := range c.Shards() {
		for _, r := range sh.Slots {
			if r[0] <= slot && slot <= r[1] {
				return sh
			}
		}
	}
	c.t.Fatalf("redistest: no shard serves slot %d", slot)
	return ClusterShard{}
}

// Failover runs CLUSTER FAILOVER on replica, a replica of a running
// primary, and waits until it is that shard's primary in every running
// node's view and the cluster is ready again ([Cluster.WaitReady]): the old
// primary its replica, its link up.
func (c *Cluster) Failover(replica *Server) {
	c.t.Helper()
	id := c.NodeID(replica)
	if _, err := c.do(replica, "CLUSTER", "FAILOVER"); err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
	start := time.Now()
	c.waitReady(func(views map[*Server][]clusterViewNode) string {
		for s, view := range views {
			if i := slices.IndexFunc(view, func(n clusterViewNode) bool { return n.id == id }); i < 0 || !view[i].flags["master"] {
				return fmt.Sprintf("%s does not see %s as a primary yet", s.Addr(), replica.Addr())
			}
		}
		return ""
	})
	c.t.Logf("redistest: %s (%s) promoted by CLUSTER FAILOVER in %v", replica.Addr(), id, time.Since(start).Round(time.Millisecond))
}

// WaitReady waits up to [ClusterSettleTimeout] until every running node
// says cluster_state:ok with every slot assigned and knows every node, all
// of them see the same primaries serving the same slots and the same
// replicas of each, and every running replica's link to its primary is up.
// On timeout it fails the test with what it last saw.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	c.waitReady(nil)
}

// waitReady is WaitReady with one more condition: extra, given every
// running node's view, returns "" when it holds and what is missing when
// not.
func (c *Cluster) waitReady(extra func(views map[*Server][]clusterViewNode) string) {
	c.t.Helper()
	var why string
	if !Poll(ClusterSettleTimeout, func() bool {
		why = c.notReady(extra)
		return why == ""
	}) {
		c.t.Fatalf("redistest: cluster not ready after %v: %s", ClusterSettleTimeout, why)
	}
}

// notReady returns why the cluster is not ready, or "".
func (c *Cluster) notReady(extra func(map[*Server][]clusterViewNode) string) string {
	views := map[*Server][]clusterViewNode{}
	var first string // the first running node's roles and slots, which every other must see
	for _, s := range c.nodes {
		if s.Pid() == 0 {
			continue
		}
		v, err := c.do(s, "CLUSTER", "INFO")
		if err != nil {
			return err.Error()
		}
		info := ParseInfo(v.String())
		if info["cluster_state"] != "ok" || info["cluster_slots_assigned"] != strconv.Itoa(ClusterSlots) ||
			info["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) {
			return fmt.Sprintf("%s: cluster_state:%s cluster_slots_assigned:%s cluster_known_nodes:%s", s.Addr(),
				info["cluster_state"], info["cluster_slots_assigned"], info["cluster_known_nodes"])
		}
		view, err := c.view(s)
		if err != nil {
			return err.Error()
		}
		views[s] = view
		shape := viewShape(view)
		if first == "" {
			first = shape
		} else if shape != first {
			return fmt.Sprintf("the nodes disagree: one sees\n%s\nand %s sees\n%s", first, s.Addr(), shape)
		}
		v, err = c.do(s, "INFO", "replication")
		if err != nil {
			return err.Error()
		}
		if info := ParseInfo(v.String()); info["role"] == "slave" && info["master_link_status"] != "up" {
			return fmt.Sprintf("%s: master_link_status:%s", s.Addr(), info["master_link_status"])
		}
	}
	if len(views) == 0 {
		return "no node is running"
	}
	if extra != nil {
		return extra(views)
	}
	return ""
}

// do dials s with the cluster's password, sends one command and closes
// the connection.
func (c *Cluster) do(s *Server, args ...any) (resp.Value, error) {
	cl, err := dial(s.Addr(), DialOptions{Password: c.password, Timeout: 5 * time.Second})
	if err != nil {
		return resp.Value{}, err
	}
	defer cl.Close()
	v, err := cl.Do(args...)
	if err != nil {
		return v, fmt.Errorf("%s: %s: %w", s.Addr(), formatArgs(args), err)
	}
	return v, nil
}

// view returns s's CLUSTER NODES.
func (c *Cluster) view(s *Server) ([]clusterViewNode, error) {
	v, err := c.do(s, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	view, err := parseClusterNodes(v.String())
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	return view, nil
}

// shards groups a view into shards, in the order of their first slot.
func (c *Cluster) shards(view []clusterViewNode) []ClusterShard {
	c.t.Helper()
	var out []ClusterShard
	for _, n := range view {
		if n.flags["master"] {
			out = append(out, ClusterShard{Primary: c.Node(n.id), PrimaryID: n.id, Slots: n.slots})
		}
	}
	for _, n := range view {
		if i := slices.IndexFunc(out, func(sh ClusterShard) bool { return sh.PrimaryID == n.master }); i >= 0 {
			out[i].Replicas = append(out[i].Replicas, c.Node(n.id))
		}
	}
	slices.SortFunc(out, func(a, b ClusterShard) int {
		return firstSlot(a.Slots) - firstSlot(b.Slots)
	})
	return out
}

// firstSlot returns the first slot of ranges, or past the last slot when
// there is none.
func firstSlot(ranges [][2]int) int {
	if len(ranges) == 0 {
		return ClusterSlots
	}
	return ranges[0][0]
}

// clusterViewNode is one line of CLUSTER NODES.
type clusterViewNode struct {
	id     string
	addr   string // ip:port, without the bus port and hostname
	flags  map[string]bool
	master string // the primary's ID for a replica, "-" for a primary
	slots  [][2]int
}

// parseClusterNodes parses CLUSTER NODES from the harness's own servers
// (trusted: it checks only what it needs). Importing and migrating slots
// ("[5-<-id]") are skipped.
func parseClusterNodes(text string) ([]clusterViewNode, error) {
	var out []clusterViewNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("short line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterViewNode{id: f[0], addr: addr, flags: map[string]bool{}, master: f[3]}
		for flag := range strings.SplitSeq(f[2], ",") {
			n.flags[flag] = true
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, ok := strings.Cut(s, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("slot range %q in line %q", s, line)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		out = append(out, n)
	}
	return out, nil
}

// viewShape renders what every node of a settled cluster must agree on:
// each node's role, primary and slots, by node ID.
func viewShape(view []clusterViewNode) string {
	lines := make([]string, 0, len(view))
	for _, n := range view {
		role := "replica"
		if n.flags["master"] {
			role = "primary"
		}
		lines = append(lines, fmt.Sprintf("  %s %s of %s slots %v", n.id, role, n.master, n.slots))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

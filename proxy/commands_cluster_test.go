package proxy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/proxy/clustertopo"
)

// TestClusterCommand: without replicaof-cluster CLUSTER answers as a
// redis-server without cluster support; following one shard, CLUSTER
// SHARDS shows that shard served on the proxy's port (no slots before the
// follower has read them), and CLUSTER SLOTS nothing; with a set's map,
// both show every shard, SLOTS in slot order without the slotless one;
// other subcommands are unknown, and RESP3 gets maps.
func TestClusterCommand(t *testing.T) {
	plain := adminDial(t, startProxy(t))
	if got := plain.do("CLUSTER", "SHARDS"); got != "-"+errClusterDisabled+"\r\n" {
		t.Errorf("CLUSTER SHARDS without replicaof-cluster: %q", got)
	}

	one := startProxy(t, "--replicaof-cluster", "127.0.0.1", "1", "--cluster-shard", "0")
	a := adminDial(t, one)
	port := strconv.Itoa(one.Port())
	got := a.do("CLUSTER", "SHARDS")
	if !strings.HasPrefix(got, "*1\r\n*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n*14\r\n$2\r\nid\r\n$40\r\n") ||
		!strings.Contains(got, "$4\r\nport\r\n:"+port+"\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n") ||
		!strings.Contains(got, "$4\r\nrole\r\n$6\r\nmaster\r\n") || !strings.HasSuffix(got, "$6\r\nhealth\r\n$6\r\nonline\r\n") {
		t.Errorf("CLUSTER SHARDS following one shard: %q", got)
	}
	if got := a.do("CLUSTER", "SLOTS"); got != "*0\r\n" {
		t.Errorf("CLUSTER SLOTS before the slots are known: %q", got)
	}
	if got := a.do("CLUSTER", "NODES"); !strings.HasPrefix(got, "-ERR unknown subcommand 'NODES'") {
		t.Errorf("CLUSTER NODES: %q", got)
	}
	if got := a.do("CLUSTER", "HELP"); !strings.Contains(got, "SHARDS") {
		t.Errorf("CLUSTER HELP: %q", got)
	}

	id := strings.Repeat("a", 40)
	set := newTestProxy(t, proxySetup{
		args: []string{"--replicaof-cluster", "127.0.0.1", "1", "--cluster-shard", "0"},
		opts: Options{ClusterMap: func() []ClusterShard {
			return []ClusterShard{
				{Slots: []clustertopo.SlotRange{{First: 100, Last: 200}, {First: 0, Last: 9}}, NodeID: id, Port: 7000, Offset: 5},
				{Slots: []clustertopo.SlotRange{{First: 10, Last: 99}}, NodeID: id, Port: 7001},
				{NodeID: id, Port: 7002},
			}
		}},
	})
	b := adminDial(t, set)
	want := "*3\r\n" +
		"*3\r\n:0\r\n:9\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n" + id + "\r\n*0\r\n" +
		"*3\r\n:10\r\n:99\r\n*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n" + id + "\r\n*0\r\n" +
		"*3\r\n:100\r\n:200\r\n*4\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n" + id + "\r\n*0\r\n"
	if got := b.do("CLUSTER", "SLOTS"); got != want {
		t.Errorf("CLUSTER SLOTS from a set's map:\n%q\nwant\n%q", got, want)
	}
	got = b.do("CLUSTER", "SHARDS")
	if !strings.HasPrefix(got, "*3\r\n*4\r\n$5\r\nslots\r\n*4\r\n:100\r\n:200\r\n:0\r\n:9\r\n") ||
		!strings.Contains(got, ":7002\r\n") || !strings.Contains(got, "$18\r\nreplication-offset\r\n:5\r\n") {
		t.Errorf("CLUSTER SHARDS from a set's map: %q", got)
	}
	b.do("HELLO", "3")
	if got := b.do("CLUSTER", "SHARDS"); !strings.HasPrefix(got, "*3\r\n%2\r\n$5\r\nslots\r\n") || !strings.Contains(got, "*1\r\n%7\r\n$2\r\nid\r\n") {
		t.Errorf("CLUSTER SHARDS in RESP3: %q", got)
	}
}

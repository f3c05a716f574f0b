package clustertopo

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// update rewrites the recorded replies in testdata/ from a real cluster:
// go test ./proxy/clustertopo/ -run TestRecordReplies -update
var update = flag.Bool("update", false, "rewrite testdata/'s recorded replies from a real cluster")

// recordedStates are the cluster's states the replies are recorded in, by
// their folder in testdata/.
var recordedStates = []string{"redis-7.0-healthy", "redis-7.0-replica-failed"}

// recordedFiles are the replies recorded in each state, by file name.
var recordedFiles = map[Source]string{FromShards: "shards.resp", FromNodes: "nodes.resp", FromSlots: "slots.resp"}

// TestRecordReplies records CLUSTER SHARDS, NODES and SLOTS, byte for byte
// as a node sent them, from a cluster of three primaries with a replica
// each: once healthy, with writes in every shard so that each replica has
// an offset, and once with a replica stopped and marked failing. Beside
// them, cluster.txt is the cluster as internal/redistest saw it, which the
// tests of the parsers compare against. It runs only with -update.
func TestRecordReplies(t *testing.T) {
	if !*update {
		t.Skip("records testdata/ only with -update")
	}
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	seed := c.Nodes()[0]
	writeEveryShard(t, c)
	c.WaitReady()
	record(t, c, seed, recordedStates[0], "")

	failed := c.Shards()[1].Replicas[0]
	failedID := c.NodeID(failed)
	failed.Stop()
	redistest.WaitFor(t, 30*time.Second, "the stopped replica flagged fail", func() bool {
		for line := range strings.Lines(c.Dial(seed).MustDo(t, "CLUSTER", "NODES").String()) {
			if f := strings.Fields(line); len(f) > 2 && f[0] == failedID {
				return strings.Contains(","+f[2]+",", ",fail,")
			}
		}
		return false
	})
	record(t, c, seed, recordedStates[1], failedID)
}

// writeEveryShard writes a key to every shard's primary, so that each
// replica gets a replication offset: until then CLUSTER SHARDS calls it
// loading and CLUSTER SLOTS leaves it out.
func writeEveryShard(t *testing.T, c *redistest.Cluster) {
	written := map[*redistest.Server]bool{}
	client := c.Dial(c.Nodes()[0])
	for i := 0; len(written) < len(c.Shards()); i++ {
		key := fmt.Sprint("key:", i)
		primary := c.ShardOf(int(client.MustDo(t, "CLUSTER", "KEYSLOT", key).Integer())).Primary
		if !written[primary] {
			c.Dial(primary).MustDo(t, "SET", key, i)
			written[primary] = true
		}
	}
}

// record writes the three replies of seed into testdata/<state>/, and
// cluster.txt from the harness's view, with failedID's node failing.
// CLUSTER SHARDS is asked until no replica is "loading" (its offset not yet
// gossiped to the seed), so that the recording is of a settled cluster.
func record(t *testing.T, c *redistest.Cluster, seed *redistest.Server, state, failedID string) {
	dir := filepath.Join("testdata", state)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 30*time.Second, "no replica loading in CLUSTER SHARDS", func() bool {
		return !bytes.Contains(rawReply(t, seed.Addr(), "CLUSTER", "SHARDS"), []byte("loading"))
	})
	for source, name := range recordedFiles {
		cmd := strings.Fields(source.String())
		if err := os.WriteFile(filepath.Join(dir, name), rawReply(t, seed.Addr(), cmd...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# The cluster %s's replies describe, as internal/redistest saw it: each shard's\n", seed.Addr())
	b.WriteString("# slots, then its primary and replicas: node ID, address, health.\n")
	for _, sh := range c.Shards() {
		var slots []string
		for _, r := range sh.Slots {
			slots = append(slots, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
		fmt.Fprintf(&b, "shard %s\n", strings.Join(slots, ","))
		for i, s := range append([]*redistest.Server{sh.Primary}, sh.Replicas...) {
			role, health := "primary", HealthOnline
			if i > 0 {
				role = "replica"
			}
			if c.NodeID(s) == failedID {
				health = HealthFail
			}
			fmt.Fprintf(&b, "  %s %s %s %s\n", role, c.NodeID(s), s.Addr(), health)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s from %s", dir, seed.Addr())
}

// rawReply sends one command to addr and returns its reply's bytes as they
// arrived, read as far as the reply reader reads one reply.
func rawReply(t *testing.T, addr string, args ...string) []byte {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(wire.AppendCommand(nil, args...)); err != nil {
		t.Fatal(err)
	}
	var raw bytes.Buffer
	rd := newReplyReader(io.TeeReader(conn, &raw), Limits{})
	if _, err := rd.read(); err != nil {
		t.Fatalf("%s %q: %v", addr, args, err)
	}
	if n := rd.br.Buffered(); n != 0 {
		t.Fatalf("%s %q: %d bytes after the reply", addr, args, n)
	}
	return raw.Bytes()
}

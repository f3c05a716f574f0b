package clustertopo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// enc encodes v as RESP2, for hand-built replies: a string is a bulk
// string, an int an integer, nil a null bulk string, []any an array, and
// a simple or errReply the reply of that type.
func enc(v any) string {
	switch v := v.(type) {
	case string:
		return "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n"
	case int:
		return ":" + strconv.Itoa(v) + "\r\n"
	case nil:
		return "$-1\r\n"
	case simple:
		return "+" + string(v) + "\r\n"
	case errReply:
		return "-" + string(v) + "\r\n"
	case []any:
		var b strings.Builder
		b.WriteString("*" + strconv.Itoa(len(v)) + "\r\n")
		for _, e := range v {
			b.WriteString(enc(e))
		}
		return b.String()
	}
	panic(fmt.Sprintf("enc: %T", v))
}

type (
	simple   string
	errReply string
)

// Node IDs for hand-built replies.
var (
	idA = strings.Repeat("a", 40)
	idB = strings.Repeat("b", 40)
	idC = strings.Repeat("c", 40)
	idD = strings.Repeat("d", 40)
)

// shardNode is a node's map as CLUSTER SHARDS writes it, with fields added
// or replaced by more (pairs of key and value; a nil value drops the key).
func shardNode(id, role, health string, port int, more ...any) []any {
	fields := []any{"id", id, "port", port, "ip", "127.0.0.1", "endpoint", "127.0.0.1",
		"role", role, "replication-offset", 100, "health", health}
	for i := 0; i+1 < len(more); i += 2 {
		replaced := false
		for j := 0; j < len(fields); j += 2 {
			if fields[j] == more[i] {
				fields[j+1], replaced = more[i+1], true
			}
		}
		if !replaced {
			fields = append(fields, more[i], more[i+1])
		}
	}
	out := []any{}
	for j := 0; j < len(fields); j += 2 {
		if fields[j+1] != nil {
			out = append(out, fields[j], fields[j+1])
		}
	}
	return out
}

// oneShard is a valid CLUSTER SHARDS reply: one shard of one node.
var oneShard = enc([]any{[]any{"slots", []any{0, 16383}, "nodes", []any{shardNode(idA, "master", "online", 7000)}}})

// decode reads one reply from raw with limits lim, and fails the test on
// an error or bytes left after it.
func decode(t testing.TB, raw []byte, lim Limits) value {
	t.Helper()
	rd := newReplyReader(bytes.NewReader(raw), lim)
	v, err := rd.read()
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if n, _ := rd.br.Peek(1); len(n) != 0 {
		t.Fatalf("decode: bytes after the reply")
	}
	return v
}

// parsers are the parsers by source.
var parsers = map[Source]func(value) (Topology, error){
	FromShards: parseShards, FromNodes: parseNodes, FromSlots: parseSlots,
}

// parseRaw decodes raw with the default limits and parses it as source's
// reply.
func parseRaw(source Source, raw string) (Topology, error) {
	v, err := newReplyReader(strings.NewReader(raw), Limits{}).read()
	if err != nil {
		return Topology{}, err
	}
	return parsers[source](v)
}

// recordedReply returns a recorded reply of testdata/<state>/.
func recordedReply(t testing.TB, state string, source Source) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", state, recordedFiles[source]))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// recordedCluster returns testdata/<state>/cluster.txt without its
// comments: the cluster as the harness saw it, in [render]'s form.
func recordedCluster(t testing.TB, state string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", state, "cluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// render writes t as cluster.txt does: each shard's slots, then its nodes'
// roles, IDs, addresses and health ("?" for unknown).
func render(t Topology) string {
	var b strings.Builder
	for _, sh := range t.Shards {
		var slots []string
		for _, r := range sh.Slots {
			slots = append(slots, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
		fmt.Fprintf(&b, "shard %s\n", strings.Join(slots, ","))
		for _, n := range sh.Nodes {
			role := "primary"
			if n.Role == RoleReplica {
				role = "replica"
			}
			health := string(n.Health)
			if n.Health == HealthUnknown {
				health = "?"
			}
			fmt.Fprintf(&b, "  %s %s %s %s\n", role, n.ID, n.Addr, health)
		}
	}
	return b.String()
}

// layout is render without the health of each node: what every source
// reports alike, when replicas' health may differ by the moment (a
// replica is "loading" in CLUSTER SHARDS until its offset is gossiped).
func layout(t Topology) string {
	var b strings.Builder
	for line := range strings.Lines(render(t)) {
		if strings.HasPrefix(line, "  ") {
			line = line[:strings.LastIndexByte(strings.TrimSuffix(line, "\n"), ' ')] + "\n"
		}
		b.WriteString(line)
	}
	return b.String()
}

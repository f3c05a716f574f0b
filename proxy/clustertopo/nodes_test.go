package clustertopo

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseNodesRecorded parses CLUSTER NODES as a real Redis 7.0 sent it,
// healthy and with a replica failing, into what the harness saw.
func TestParseNodesRecorded(t *testing.T) {
	for _, state := range recordedStates {
		t.Run(state, func(t *testing.T) {
			topo, err := parseNodes(decode(t, recordedReply(t, state, FromNodes), Limits{}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := render(topo), recordedCluster(t, state); got != want {
				t.Errorf("CLUSTER NODES parsed as\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// nodesLine is one line of CLUSTER NODES.
func nodesLine(id, addr, flags, primary string, slots ...string) string {
	return strings.Join(append([]string{id, addr, flags, primary, "0", "1700000000000", "1", "connected"}, slots...), " ") + "\n"
}

func TestParseNodes(t *testing.T) {
	ok := []struct {
		name, text, want string
		check            func(t *testing.T, topo Topology)
	}{
		{"hostname, IPv6, moving slots, CRLF",
			nodesLine(idA, "::1:7000@17000,node-a", "myself,master", "-", "0-100", "[101->-"+idB+"]", "102") +
				strings.TrimSuffix(nodesLine(idB, "::1:7001@17001,", "slave,fail?", idA), "\n") + "\r\n",
			"shard 0-100,102-102\n  primary " + idA + " [::1]:7000 online\n  replica " + idB + " [::1]:7001 online\n",
			func(t *testing.T, topo Topology) {
				if h := topo.Shards[0].Nodes[0].Hostname; h != "node-a" {
					t.Errorf("Hostname %q", h)
				}
			}},
		{"handshake skipped, noaddr and fail",
			nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "0-16383") +
				nodesLine(idB, ":0@0", "slave,fail,noaddr", idA) +
				nodesLine(idC, "127.0.0.1:7002@17002", "handshake", "-"),
			"shard 0-16383\n  primary " + idA + " 127.0.0.1:7000 online\n  replica " + idB + "  fail\n", nil},
		{"a replica's replica in its primary's shard",
			nodesLine(idC, "127.0.0.1:7002@17002", "slave", idB) +
				nodesLine(idB, "127.0.0.1:7001@17001", "slave", idA) +
				nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "0-16383"),
			"shard 0-16383\n  primary " + idA + " 127.0.0.1:7000 online\n  replica " + idB + " 127.0.0.1:7001 online\n  replica " + idC + " 127.0.0.1:7002 online\n", nil},
		{"a replica of an unknown primary",
			nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "0-16383") +
				nodesLine(idC, "127.0.0.1:7002@17002", "slave", idD),
			"shard 0-16383\n  primary " + idA + " 127.0.0.1:7000 online\nshard \n  replica " + idC + " 127.0.0.1:7002 online\n",
			func(t *testing.T, topo Topology) {
				sh := topo.Shards[1]
				if sh.ID != idD {
					t.Errorf("the primaryless shard's ID is %s, want the primary its replica names", sh.ID)
				}
				if _, err := sh.Primary(); !errors.Is(err, ErrNoPrimary) {
					t.Errorf("Primary() = %v, want ErrNoPrimary", err)
				}
			}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := parseRaw(FromNodes, enc(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			if got := render(topo); got != tt.want {
				t.Errorf("parsed as\n%s\nwant\n%s", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, topo)
			}
		})
	}

	primary := nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "0-16383")
	bad := []struct {
		name, want string
		reply      any
	}{
		{"not a string", "not a string", []any{}},
		{"empty", "no shards", ""},
		{"few fields", "fields", idA + " 127.0.0.1:7000@17000 master -\n"},
		{"bad ID", "node ID", nodesLine("x", "127.0.0.1:7000@17000", "master", "-")},
		{"a node twice", "listed twice", primary + primary},
		{"neither role", "neither master nor slave", nodesLine(idA, "127.0.0.1:7000@17000", "myself", "-")},
		{"both roles", "neither master nor slave", nodesLine(idA, "127.0.0.1:7000@17000", "master,slave", "-")},
		{"a primary with a primary", "a primary whose primary", nodesLine(idA, "127.0.0.1:7000@17000", "master", idB)},
		{"a replica of no ID", "no node ID", nodesLine(idA, "127.0.0.1:7000@17000", "slave", "-")},
		{"a replica with slots", "a replica that serves slots", primary + nodesLine(idB, "127.0.0.1:7001@17001", "slave", idA, "5")},
		{"no port", "no port", nodesLine(idA, "127.0.0.1@17000", "master", "-")},
		{"port a word", "no port", nodesLine(idA, "127.0.0.1:x@17000", "master", "-")},
		{"port too big", "not a port", nodesLine(idA, "127.0.0.1:65536@17000", "master", "-")},
		{"host not printable", "not printable", nodesLine(idA, "127.0.0.\x01:7000@17000", "master", "-")},
		{"hostname too long", "longer than 255", nodesLine(idA, "127.0.0.1:7000@17000,"+strings.Repeat("h", 256), "master", "-")},
		{"slot past the last", "no range", nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "0-16384")},
		{"slot a word", "no range", nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "a-b")},
		{"slot with a sign", "no range", nodesLine(idA, "127.0.0.1:7000@17000", "master", "-", "+5")},
		{"slot served twice", "served twice", primary + nodesLine(idB, "127.0.0.1:7001@17001", "master", "-", "5")},
		{"a cycle of replicas", "cycle", nodesLine(idA, "127.0.0.1:7000@17000", "slave", idB) + nodesLine(idB, "127.0.0.1:7001@17001", "slave", idA)},
		{"a replica of itself", "cycle", nodesLine(idA, "127.0.0.1:7000@17000", "slave", idA)},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := parseRaw(FromNodes, enc(tt.reply))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parsed as %+v, %v; want an error containing %q", topo, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "CLUSTER NODES: ") {
				t.Errorf("error %q does not say which command's reply", err)
			}
		})
	}
}

// TestParseNodesLongChain parses a chain of replicas as long as a reply
// may hold in linear time: each chain is walked once.
func TestParseNodesLongChain(t *testing.T) {
	const n = 20000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%040d", i)
	}
	var b strings.Builder
	b.WriteString(nodesLine(ids[0], "127.0.0.1:7000@17000", "master", "-", "0-16383"))
	for i := 1; i < n; i++ {
		b.WriteString(nodesLine(ids[i], "127.0.0.1:7001@17001", "slave", ids[i-1]))
	}
	topo, err := parseRaw(FromNodes, enc(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Shards) != 1 || len(topo.Shards[0].Nodes) != n {
		t.Fatalf("%d shards, the first of %d nodes; want one of %d", len(topo.Shards), len(topo.Shards[0].Nodes), n)
	}
}

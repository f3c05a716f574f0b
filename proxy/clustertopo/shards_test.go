package clustertopo

import (
	"strings"
	"testing"
)

// TestParseShardsRecorded parses CLUSTER SHARDS as a real Redis 7.0 sent
// it, healthy and with a replica failing, into what the harness saw.
func TestParseShardsRecorded(t *testing.T) {
	for _, state := range recordedStates {
		t.Run(state, func(t *testing.T) {
			topo, err := parseShards(decode(t, recordedReply(t, state, FromShards), Limits{}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := render(topo), recordedCluster(t, state); got != want {
				t.Errorf("CLUSTER SHARDS parsed as\n%s\nwant\n%s", got, want)
			}
			if topo.Source != FromShards {
				t.Errorf("Source = %v", topo.Source)
			}
			for _, sh := range topo.Shards {
				for _, n := range sh.Nodes {
					if n.Offset <= 0 || n.TLSAddr != "" || n.Hostname != "" {
						t.Errorf("node %s: Offset %d, TLSAddr %q, Hostname %q; want an offset, no TLS, no hostname",
							n.ID, n.Offset, n.TLSAddr, n.Hostname)
					}
				}
			}
		})
	}
}

func TestParseShards(t *testing.T) {
	primary := shardNode(idA, "master", "online", 7000)
	replica := shardNode(idB, "replica", "online", 7001)
	shard := func(slots []any, nodes ...any) []any { return []any{"slots", slots, "nodes", nodes} }
	ok := []struct {
		name  string
		reply any
		check func(t *testing.T, topo Topology)
	}{
		{"TLS port only", []any{shard([]any{0, 16383}, shardNode(idA, "master", "online", 0, "port", nil, "tls-port", 7443))},
			func(t *testing.T, topo Topology) {
				n := topo.Shards[0].Nodes[0]
				if n.Addr != "" || n.TLSAddr != "127.0.0.1:7443" {
					t.Errorf("Addr %q, TLSAddr %q", n.Addr, n.TLSAddr)
				}
				if p, err := topo.Shards[0].Primary(); err != nil || p.ID != idA {
					t.Errorf("Primary() = %v, %v", p.ID, err)
				}
			}},
		{"hostname endpoint", []any{shard([]any{0, 16383}, shardNode(idA, "master", "online", 7000, "endpoint", "node-a.example", "hostname", "node-a.example"))},
			func(t *testing.T, topo Topology) {
				if n := topo.Shards[0].Nodes[0]; n.Addr != "node-a.example:7000" || n.Hostname != "node-a.example" {
					t.Errorf("Addr %q, Hostname %q", n.Addr, n.Hostname)
				}
			}},
		{"unknown endpoint", []any{shard([]any{0, 16383}, shardNode(idA, "master", "online", 7000, "endpoint", "?", "ip", "10.0.0.1"))},
			func(t *testing.T, topo Topology) {
				if n := topo.Shards[0].Nodes[0]; n.Addr != "10.0.0.1:7000" {
					t.Errorf("Addr %q", n.Addr)
				}
			}},
		{"IPv6", []any{shard([]any{0, 16383}, shardNode(idA, "master", "online", 7000, "endpoint", "::1", "ip", "::1"))},
			func(t *testing.T, topo Topology) {
				if n := topo.Shards[0].Nodes[0]; n.Addr != "[::1]:7000" {
					t.Errorf("Addr %q", n.Addr)
				}
			}},
		{"unknown keys skipped, integers as strings", []any{[]any{"slots", []any{"0", "16383"}, "shard-x", []any{[]any{1}},
			"nodes", []any{append(shardNode(idA, "master", "online", 7000, "availability-zone", "z1"), "more", []any{nil, 1})}}},
			func(t *testing.T, topo Topology) {
				if got := topo.Shards[0].SlotCount(); got != Slots {
					t.Errorf("SlotCount = %d", got)
				}
			}},
		{"health words", []any{shard([]any{0, 16383}, primary, shardNode(idB, "replica", "failed", 7001), shardNode(idC, "replica", "syncing", 7002), shardNode(idD, "replica", "loading", 7003))},
			func(t *testing.T, topo Topology) {
				want := []Health{HealthOnline, HealthFail, "syncing", HealthLoading}
				for i, n := range topo.Shards[0].Nodes {
					if n.Health != want[i] {
						t.Errorf("node %s: health %q, want %q", n.ID, n.Health, want[i])
					}
				}
			}},
		{"order", []any{
			shard([]any{}, shardNode(idD, "master", "fail", 7003)),
			shard([]any{10, 20, 0, 9, 100, 200}, replica, shardNode(idC, "replica", "online", 7002), primary),
			shard([]any{21, 99, 201, 16383}, shardNode(strings.Repeat("e", 40), "master", "online", 7001)),
		}, func(t *testing.T, topo Topology) {
			got := render(topo)
			want := "shard 0-20,100-200\n" +
				"  primary " + idA + " 127.0.0.1:7000 online\n" +
				"  replica " + idB + " 127.0.0.1:7001 online\n" +
				"  replica " + idC + " 127.0.0.1:7002 online\n" +
				"shard 21-99,201-16383\n" +
				"  primary " + strings.Repeat("e", 40) + " 127.0.0.1:7001 online\n" +
				"shard \n" +
				"  primary " + idD + " 127.0.0.1:7003 fail\n"
			if got != want {
				t.Errorf("parsed as\n%s\nwant\n%s", got, want)
			}
			if topo.Shards[0].ID != idA || topo.Shards[2].ID != idD {
				t.Errorf("shard IDs %s, %s", topo.Shards[0].ID, topo.Shards[2].ID)
			}
		}},
		{"a shard of replicas", []any{shard([]any{0, 16383}, shardNode(idC, "replica", "online", 7002), replica)},
			func(t *testing.T, topo Topology) {
				if sh := topo.Shards[0]; sh.ID != idB {
					t.Errorf("ID %s, want its smallest node ID", sh.ID)
				}
			}},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := parseRaw(FromShards, enc(tt.reply))
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, topo)
		})
	}

	bad := []struct {
		name, want string
		reply      any
	}{
		{"not an array", "not an array", simple("OK")},
		{"no shards", "no shards", []any{}},
		{"a shard not a map", "not a map", []any{[]any{"slots"}}},
		{"a key twice", "given twice", []any{[]any{"slots", []any{}, "slots", []any{}, "nodes", []any{primary}}}},
		{"no nodes", "no slots or no nodes", []any{[]any{"slots", []any{0, 1}}}},
		{"a shard with no node", "a shard with no nodes", []any{shard([]any{0, 1})}},
		{"odd slots", "not a list of first and last", []any{shard([]any{0}, primary)}},
		{"slot past the last", "no range", []any{shard([]any{0, 16384}, primary)}},
		{"negative slot", "no range", []any{shard([]any{-1, 5}, primary)}},
		{"range backwards", "no range", []any{shard([]any{5, 4}, primary)}},
		{"slot not an integer", "no range", []any{shard([]any{"x", 4}, primary)}},
		{"slot served twice", "served twice", []any{shard([]any{0, 100}, primary), shard([]any{100, 200}, replica)}},
		{"node not a map", "not a map", []any{shard([]any{0, 1}, "node")}},
		{"no id", "no id or no role", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "id", nil))}},
		{"no role", "no id or no role", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "role", nil))}},
		{"short id", "not 40 characters", []any{shard([]any{0, 1}, shardNode(idA[1:], "master", "online", 7000))}},
		{"upper-case id", "not 40 characters", []any{shard([]any{0, 1}, shardNode(strings.ToUpper(idA), "master", "online", 7000))}},
		{"id not a string", "id: not a string", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "id", 5))}},
		{"a node in two shards", "listed twice", []any{shard([]any{0, 1}, primary), shard([]any{2, 3}, primary)}},
		{"unknown role", "neither master nor replica", []any{shard([]any{0, 1}, shardNode(idA, "boss", "online", 7000))}},
		{"port too big", "not a port", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 70000))}},
		{"tls-port negative", "not a port", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "tls-port", -1))}},
		{"port a word", "port: not an integer", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "port", "seven"))}},
		{"host with a space", "not printable", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "ip", "1.2.3.4 x"))}},
		{"host with a newline", "not printable", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "hostname", "a\nb"))}},
		{"host too long", "longer than 255", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "endpoint", strings.Repeat("h", 256)))}},
		{"negative offset", "negative", []any{shard([]any{0, 1}, shardNode(idA, "master", "online", 7000, "replication-offset", -5))}},
		{"health empty", "health", []any{shard([]any{0, 1}, shardNode(idA, "master", "", 7000))}},
		{"health too long", "health", []any{shard([]any{0, 1}, shardNode(idA, "master", strings.Repeat("w", 33), 7000))}},
		{"null id", "id: not a string", []any{shard([]any{0, 1}, []any{"id", nil, "role", "master"})}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := parseRaw(FromShards, enc(tt.reply))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parsed as %+v, %v; want an error containing %q", topo, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "CLUSTER SHARDS: ") {
				t.Errorf("error %q does not say which command's reply", err)
			}
		})
	}
}

package clustertopo

import (
	"errors"
	"strings"
	"testing"
)

// threeShards is a topology of three shards, the middle one with a
// replica, and a slotless shard; slots 16000-16383 are served by none.
func threeShards(t *testing.T) Topology {
	t.Helper()
	topo, err := parseRaw(FromShards, enc([]any{
		[]any{"slots", []any{0, 99}, "nodes", []any{shardNode(idA, "master", "online", 7000)}},
		[]any{"slots", []any{100, 15999}, "nodes", []any{shardNode(idB, "master", "online", 7001), shardNode(idC, "replica", "online", 7002)}},
		[]any{"slots", []any{}, "nodes", []any{shardNode(idD, "master", "online", 7003)}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestShardBySlot(t *testing.T) {
	topo := threeShards(t)
	for slot, want := range map[int]string{0: idA, 99: idA, 100: idB, 15999: idB} {
		if sh, err := topo.ShardBySlot(slot); err != nil || sh.ID != want {
			t.Errorf("ShardBySlot(%d) = %s, %v; want %s", slot, sh.ID, err, want)
		}
	}
	for _, slot := range []int{16000, 16383, -1, Slots} {
		if sh, err := topo.ShardBySlot(slot); !errors.Is(err, ErrNoShard) {
			t.Errorf("ShardBySlot(%d) = %s, %v; want ErrNoShard", slot, sh.ID, err)
		}
	}
}

func TestShardByID(t *testing.T) {
	topo := threeShards(t)
	for id, want := range map[string]string{idA: idA, idB: idB, idC: idB, idD: idD} {
		if sh, err := topo.ShardByID(id); err != nil || sh.ID != want {
			t.Errorf("ShardByID(%s) = %s, %v; want %s", id, sh.ID, err, want)
		}
	}
	if sh, err := topo.ShardByID(strings.Repeat("f", 40)); !errors.Is(err, ErrNoShard) {
		t.Errorf("ShardByID of no node = %s, %v; want ErrNoShard", sh.ID, err)
	}
	// A Selector chooses by its ID, or else by its slot.
	if sh, err := topo.Shard(Selector{ID: idC}); err != nil || sh.ID != idB {
		t.Errorf("Shard(ID %s) = %s, %v", idC, sh.ID, err)
	}
	if sh, err := topo.Shard(Selector{Slot: 5}); err != nil || sh.ID != idA {
		t.Errorf("Shard(slot 5) = %s, %v", sh.ID, err)
	}
}

func TestPrimary(t *testing.T) {
	node := func(id string, role Role, health Health, addr, tlsAddr string) Node {
		return Node{ID: id, Role: role, Health: health, Addr: addr, TLSAddr: tlsAddr}
	}
	tests := []struct {
		name  string
		nodes []Node
		want  string // the primary's ID, or "" for ErrNoPrimary
	}{
		{"online", []Node{node(idA, RolePrimary, HealthOnline, "h:1", ""), node(idB, RoleReplica, HealthOnline, "h:2", "")}, idA},
		{"health unknown", []Node{node(idA, RolePrimary, HealthUnknown, "h:1", "")}, idA},
		{"TLS only", []Node{node(idA, RolePrimary, HealthOnline, "", "h:1")}, idA},
		{"none", []Node{node(idB, RoleReplica, HealthOnline, "h:2", "")}, ""},
		{"two", []Node{node(idA, RolePrimary, HealthOnline, "h:1", ""), node(idB, RolePrimary, HealthOnline, "h:2", "")}, ""},
		{"failing", []Node{node(idA, RolePrimary, HealthFail, "h:1", ""), node(idB, RoleReplica, HealthOnline, "h:2", "")}, ""},
		{"loading", []Node{node(idA, RolePrimary, HealthLoading, "h:1", "")}, ""},
		{"another health", []Node{node(idA, RolePrimary, "syncing", "h:1", "")}, ""},
		{"no address", []Node{node(idA, RolePrimary, HealthOnline, "", "")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh := Shard{ID: idA, Nodes: tt.nodes}
			p, err := sh.Primary()
			if tt.want == "" {
				if !errors.Is(err, ErrNoPrimary) || !strings.Contains(err.Error(), idA) {
					t.Errorf("Primary() = %s, %v; want ErrNoPrimary naming the shard", p.ID, err)
				}
				return
			}
			if err != nil || p.ID != tt.want {
				t.Errorf("Primary() = %s, %v; want %s", p.ID, err, tt.want)
			}
		})
	}
	sh := Shard{Nodes: []Node{node(idA, RolePrimary, HealthOnline, "h:1", ""), node(idB, RoleReplica, HealthOnline, "h:2", ""), node(idC, RoleReplica, HealthFail, "h:3", "")}}
	if r := sh.Replicas(); len(r) != 2 || r[0].ID != idB || r[1].ID != idC {
		t.Errorf("Replicas() = %+v", r)
	}
}

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]Selector{
		"0": {Slot: 0}, "16383": {Slot: 16383}, "5461": {Slot: 5461},
		idA: {ID: idA}, "07c37dfeb235213a872192d90877d0cd55635b91": {ID: "07c37dfeb235213a872192d90877d0cd55635b91"},
		"0000000000000000000000000000000000000001": {ID: "0000000000000000000000000000000000000001"},
	} {
		got, err := ParseSelector(in)
		if err != nil || got != want {
			t.Errorf("ParseSelector(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if err == nil && got.String() != in {
			t.Errorf("ParseSelector(%q).String() = %q", in, got.String())
		}
	}
	for _, in := range []string{"", "16384", "-1", "007", "+5", " 5", "5 ", idA[1:], strings.ToUpper(idA), idA + "a", "slot"} {
		if got, err := ParseSelector(in); err == nil {
			t.Errorf("ParseSelector(%q) = %+v, want an error", in, got)
		}
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{FromShards: "CLUSTER SHARDS", FromNodes: "CLUSTER NODES", FromSlots: "CLUSTER SLOTS", 0: "Source(0)"} {
		if got := s.String(); got != want {
			t.Errorf("Source(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

package clusterset

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/proxy/clustertopo"
)

// id returns a node ID made of c.
func id(c byte) string { return strings.Repeat(string(c), 40) }

// topoShard returns a shard of slots first-last whose primary is primary and
// whose replicas are replicas (node IDs).
func topoShard(first, last int, primary string, replicas ...string) clustertopo.Shard {
	sh := clustertopo.Shard{ID: primary, Nodes: []clustertopo.Node{{ID: primary, Role: clustertopo.RolePrimary,
		Health: clustertopo.HealthOnline, Addr: "127.0.0.1:1"}}}
	if first >= 0 {
		sh.Slots = []clustertopo.SlotRange{{First: first, Last: last}}
	}
	for _, r := range replicas {
		sh.Nodes = append(sh.Nodes, clustertopo.Node{ID: r, Role: clustertopo.RoleReplica, Health: clustertopo.HealthOnline})
	}
	return sh
}

// indexesOf returns, for each shard's primary ID, its index.
func indexesOf(got map[int]clustertopo.Shard) map[string]int {
	out := map[string]int{}
	for idx, sh := range got {
		out[sh.ID] = idx
	}
	return out
}

// TestAssign: shards get indexes by first slot at first; a failover (the
// replica now primary), a new shard, a removed shard and a replica moved
// to another primary keep every known shard's index, and a new shard gets
// one never given.
func TestAssign(t *testing.T) {
	m := &indexMap{}
	a, b, c := topoShard(0, 5460, id('a'), id('d')), topoShard(5461, 10922, id('b'), id('e')), topoShard(10923, 16383, id('c'), id('f'))
	got, changed := m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{a, b, c}})
	if want := map[string]int{id('a'): 0, id('b'): 1, id('c'): 2}; !changed || !maps.Equal(indexesOf(got), want) {
		t.Fatalf("first assignment %v (changed %v), want %v", indexesOf(got), changed, want)
	}
	if _, changed := m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{a, b, c}}); changed {
		t.Error("the same topology changed the map")
	}
	// b fails over to e; c is gone; a new shard g serves no slot yet.
	b2 := topoShard(5461, 10922, id('e'), id('b'))
	g := topoShard(-1, 0, id('g'))
	got, changed = m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{a, b2, g}})
	if want := map[string]int{id('a'): 0, id('e'): 1, id('g'): 3}; !changed || !maps.Equal(indexesOf(got), want) {
		t.Fatalf("after a failover, a removal and a new shard: %v (changed %v), want %v", indexesOf(got), changed, want)
	}
	// c comes back (a topology that missed it): its index again. d, a's
	// replica, moved to g: g keeps its index, recognised by its primary.
	a2 := topoShard(0, 5460, id('a'))
	g2 := topoShard(-1, 0, id('g'), id('d'))
	got, _ = m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{a2, b2, c, g2}})
	if want := map[string]int{id('a'): 0, id('e'): 1, id('c'): 2, id('g'): 3}; !maps.Equal(indexesOf(got), want) {
		t.Fatalf("after c's return and d's move: %v, want %v", indexesOf(got), want)
	}
	// A shard whose primary is down is found by a replica.
	down := topoShard(0, 5460, id('a'))
	down.Nodes[0].Health = clustertopo.HealthFail
	got, _ = m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{down}})
	if want := map[string]int{id('a'): 0}; !maps.Equal(indexesOf(got), want) {
		t.Fatalf("a shard without a primary: %v, want %v", indexesOf(got), want)
	}
	// While a failover settles, one shard is seen twice: e, promoted, with
	// the slots, and b, demoted and not yet told, alone with none. The
	// shard keeps its index and no new one is given.
	e := topoShard(5461, 10922, id('e'))
	alone := topoShard(-1, 0, id('b'))
	got, changed = m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{a2, alone, e}})
	if want := map[string]int{id('a'): 0, id('e'): 1}; changed || !maps.Equal(indexesOf(got), want) {
		t.Fatalf("one shard seen twice: %v (changed %v), want %v", indexesOf(got), changed, want)
	}
}

// TestMapFile: the map saved is the map loaded, with each entry's port
// written; a missing file is an empty map; a file that breaks the rules is
// refused.
func TestMapFile(t *testing.T) {
	dir := t.TempDir()
	m, err := loadMap(dir)
	if err != nil || len(m.entries) != 0 {
		t.Fatalf("loadMap of an empty dir = %v, %v", m, err)
	}
	m.assign(clustertopo.Topology{Shards: []clustertopo.Shard{topoShard(0, 8000, id('a'), id('b')), topoShard(8001, 16383, id('c'))}})
	if err := m.save(dir, 7000); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, MapFile))
	if err != nil || !strings.Contains(string(b), `"port": 7001`) {
		t.Fatalf("the file %s (%v) does not name port 7001", b, err)
	}
	back, err := loadMap(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, changed := back.assign(clustertopo.Topology{Shards: []clustertopo.Shard{topoShard(8001, 16383, id('c')), topoShard(0, 8000, id('b'), id('a'))}})
	if want := map[string]int{id('c'): 1, id('b'): 0}; changed != true || !maps.Equal(indexesOf(got), want) {
		t.Errorf("after a reload: %v, want %v", indexesOf(got), want)
	}
	for name, text := range map[string]string{
		"not JSON":       "shards",
		"index twice":    `{"shards":[{"index":0,"nodes":[]},{"index":0,"nodes":[]}]}`,
		"negative index": `{"shards":[{"index":-1,"nodes":[]}]}`,
		"bad node ID":    `{"shards":[{"index":0,"nodes":["x"]}]}`,
		"node twice":     `{"shards":[{"index":0,"nodes":["` + id('a') + `"]},{"index":1,"nodes":["` + id('a') + `"]}]}`,
	} {
		if _, err := parseMap([]byte(text)); err == nil {
			t.Errorf("%s: parseMap accepted %s", name, text)
		}
	}
}

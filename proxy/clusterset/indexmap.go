package clusterset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/replproxy/replproxy/internal/safefile"
	"github.com/replproxy/replproxy/proxy/clustertopo"
)

// MapFile is the file in dir that keeps each shard's index: JSON, an
// object whose "shards" are objects of "index", "port" (cluster-port-base +
// index when written, for whoever reads the file; not read back) and
// "nodes", the IDs of the nodes the shard has had, newest first.
const MapFile = "cluster-shards.json"

// maxNodeIDs bounds the IDs kept per shard: enough to recognise a shard
// through many failovers and node replacements, few enough that the file
// stays small whatever the cluster does.
const maxNodeIDs = 32

// maxIndexes bounds the indexes the map gives: more shards than ports.
const maxIndexes = 65536

// errMapFile is the cause of every problem with the map file's content.
var errMapFile = errors.New("clusterset: bad shard map file")

// indexMap is the shard→index map. Owned by Set.Run's goroutine.
type indexMap struct {
	entries []mapEntry // by index, each index once
}

// mapEntry is one shard of the map, as the file has it.
type mapEntry struct {
	Index int      `json:"index"`
	Port  int      `json:"port,omitempty"`
	Nodes []string `json:"nodes"`
}

// mapFile is the file's content.
type mapFile struct {
	Shards []mapEntry `json:"shards"`
}

// loadMap reads the map from dir; a missing file is an empty map. A file
// that does not parse, or breaks the map's rules (an index twice or out of
// range, a node ID that is not one), is an error: the shards' ports would
// otherwise change under the operator's replicas.
func loadMap(dir string) (*indexMap, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer root.Close()
	b, err := root.ReadFile(MapFile)
	if errors.Is(err, fs.ErrNotExist) {
		return &indexMap{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MapFile, err)
	}
	return parseMap(b)
}

// parseMap reads the map file's content.
func parseMap(b []byte) (*indexMap, error) {
	var f mapFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w %s: %w", errMapFile, MapFile, err)
	}
	m := &indexMap{}
	seen := map[int]bool{}
	owner := map[string]int{}
	for _, e := range f.Shards {
		if e.Index < 0 || e.Index >= maxIndexes || seen[e.Index] {
			return nil, fmt.Errorf("%w %s: index %d out of range or given twice", errMapFile, MapFile, e.Index)
		}
		seen[e.Index] = true
		if len(e.Nodes) > maxNodeIDs {
			e.Nodes = e.Nodes[:maxNodeIDs]
		}
		for _, id := range e.Nodes {
			if sel, err := clustertopo.ParseSelector(id); err != nil || sel.ID == "" {
				return nil, fmt.Errorf("%w %s: index %d: %q is not a node ID", errMapFile, MapFile, e.Index, id)
			}
			if i, ok := owner[id]; ok && i != e.Index {
				return nil, fmt.Errorf("%w %s: node %s in indexes %d and %d", errMapFile, MapFile, id, i, e.Index)
			}
			owner[id] = e.Index
		}
		m.entries = append(m.entries, mapEntry{Index: e.Index, Nodes: slices.Clone(e.Nodes)})
	}
	slices.SortFunc(m.entries, func(a, b mapEntry) int { return a.Index - b.Index })
	return m, nil
}

// save writes the map to dir whole, under a temporary name renamed over
// MapFile, with each entry's port as portBase + index.
func (m *indexMap) save(dir string, portBase int) error {
	f := mapFile{Shards: make([]mapEntry, len(m.entries))}
	for i, e := range m.entries {
		f.Shards[i] = mapEntry{Index: e.Index, Port: portBase + e.Index, Nodes: e.Nodes}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", MapFile, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer root.Close()
	if err := safefile.WriteFile(safefile.RootFS{Root: root}, MapFile, "."+MapFile+".", ".tmp", append(b, '\n'), nil); err != nil {
		return fmt.Errorf("write %s: %w", MapFile, err)
	}
	return nil
}

// assign gives every shard of t its index: the known entry whose nodes
// include the shard's primary, else the one (lowest index) whose nodes
// include any of its nodes, else a new index, one above the highest ever
// given, in t's order (by first slot). An entry goes to one shard at
// most, the shards that serve slots first; a shard whose nodes an entry
// already taken knows gets none: it is one shard seen twice while a
// failover settles (a demoted or dead primary listed alone, with no
// slots), not a new one, and a new index would start a server to follow
// it. Each assigned entry learns the shard's node IDs, newest first. It
// returns the shards by index, and whether the map changed (and must be
// saved before a new index is used).
func (m *indexMap) assign(t clustertopo.Topology) (map[int]clustertopo.Shard, bool) {
	out := make(map[int]clustertopo.Shard, len(t.Shards))
	taken := map[int]bool{}
	pending := make([]int, 0, len(t.Shards)) // t.Shards' positions not assigned yet
	order := make([]int, 0, len(t.Shards))   // t.Shards' positions, those with slots first
	for i, sh := range t.Shards {
		if len(sh.Slots) > 0 {
			order = append(order, i)
		}
	}
	for i, sh := range t.Shards {
		if len(sh.Slots) == 0 {
			order = append(order, i)
		}
	}
	for _, i := range order {
		sh := t.Shards[i]
		p, err := sh.Primary()
		if err != nil {
			pending = append(pending, i)
			continue
		}
		if e := m.find(taken, func(e *mapEntry) bool { return slices.Contains(e.Nodes, p.ID) }); e != nil {
			taken[e.Index] = true
			out[e.Index] = sh
			continue
		}
		pending = append(pending, i)
	}
	var fresh []int
	for _, i := range pending {
		sh := t.Shards[i]
		knows := func(e *mapEntry) bool {
			return slices.ContainsFunc(sh.Nodes, func(n clustertopo.Node) bool { return slices.Contains(e.Nodes, n.ID) })
		}
		if e := m.find(taken, knows); e != nil {
			taken[e.Index] = true
			out[e.Index] = sh
			continue
		}
		if m.find(nil, knows) == nil {
			fresh = append(fresh, i) // known to no entry, taken or not
		}
	}
	changed := false
	for _, i := range fresh {
		next := 0
		if n := len(m.entries); n > 0 {
			next = m.entries[n-1].Index + 1
		}
		if next >= maxIndexes {
			break // more shards than ports: left out (Set.start refuses a port past 65535 first)
		}
		m.entries = append(m.entries, mapEntry{Index: next})
		out[next] = t.Shards[i]
		changed = true
	}
	for idx, sh := range out {
		if m.learn(idx, sh) {
			changed = true
		}
	}
	return out, changed
}

// find returns the entry of lowest index, not taken, that match accepts;
// nil for none.
func (m *indexMap) find(taken map[int]bool, match func(*mapEntry) bool) *mapEntry {
	for i := range m.entries {
		if e := &m.entries[i]; !taken[e.Index] && match(e) {
			return e
		}
	}
	return nil
}

// learn puts sh's node IDs first in index's entry (its primary first),
// keeping at most maxNodeIDs, and takes them out of every other entry: a
// node belongs to one shard at a time (a replica the cluster moved to
// another primary is recognised by the new one's). It reports whether the
// map changed.
func (m *indexMap) learn(index int, sh clustertopo.Shard) bool {
	ids := make([]string, 0, len(sh.Nodes))
	for _, n := range sh.Nodes { // primary first, as Topology orders them
		ids = append(ids, n.ID)
	}
	changed := false
	for i := range m.entries {
		e := &m.entries[i]
		if e.Index == index {
			nodes := slices.Clone(ids)
			for _, id := range e.Nodes {
				if !slices.Contains(nodes, id) && len(nodes) < maxNodeIDs {
					nodes = append(nodes, id)
				}
			}
			if !slices.Equal(nodes, e.Nodes) {
				e.Nodes, changed = nodes, true
			}
			continue
		}
		kept := slices.DeleteFunc(slices.Clone(e.Nodes), func(id string) bool { return slices.Contains(ids, id) })
		if len(kept) != len(e.Nodes) {
			e.Nodes, changed = kept, true
		}
	}
	return changed
}

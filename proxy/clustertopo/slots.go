package clustertopo

import (
	"errors"
	"fmt"
)

// parseSlots reads CLUSTER SLOTS's reply: an array of entries, each the
// first and last slot of a range and the nodes serving it, its primary
// first; each node an array of its endpoint, port and node ID, then (Redis
// 7.0 and later) a map of more fields ("ip", "hostname"). Nodes without an
// ID (Redis before 4.0) are refused: a shard is named by its primary's.
//
// The entries of one primary make one shard. CLUSTER SLOTS leaves out the
// shards that serve no slot and the replicas that are failing or have no
// replication offset yet (those CLUSTER SHARDS calls loading), and says
// nothing of health: every node's is [HealthUnknown].
func parseSlots(v value) (Topology, error) {
	entries, ok := v.array()
	if !ok {
		return Topology{}, errors.New("CLUSTER SLOTS: the reply is not an array")
	}
	t := Topology{Source: FromSlots}
	shardOf := map[string]int{} // the index in t.Shards of each node's shard, by node ID
	for i, e := range entries {
		if err := addSlotsEntry(&t, shardOf, e); err != nil {
			return Topology{}, fmt.Errorf("CLUSTER SLOTS: entry %d: %w", i, err)
		}
	}
	if err := t.finish(); err != nil {
		return Topology{}, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	return t, nil
}

// addSlotsEntry adds one entry's range and nodes to its primary's shard.
// shardOf holds the shard of every node added so far, by node ID: a
// replica already in the shard is not added again, and a node found in two
// shards is left for finish to refuse.
func addSlotsEntry(t *Topology, shardOf map[string]int, e value) error {
	elems, ok := e.array()
	if !ok || len(elems) < 3 {
		return errors.New("not an array of a range and its nodes")
	}
	first, ok1 := elems[0].integer()
	last, ok2 := elems[1].integer()
	if !ok1 || !ok2 || first < 0 || last < first || last >= Slots {
		return fmt.Errorf("no range within 0-%d", Slots-1)
	}
	shard := 0 // the index in t.Shards of the entry's primary's shard
	for j, nv := range elems[2:] {
		n, err := parseSlotsNode(nv)
		if err != nil {
			return fmt.Errorf("node %d: %w", j, err)
		}
		if j == 0 {
			n.Role = RolePrimary
			k, ok := shardOf[n.ID]
			if !ok || t.Shards[k].Nodes[0].ID != n.ID {
				k = len(t.Shards)
				shardOf[n.ID] = k
				t.Shards = append(t.Shards, Shard{Nodes: []Node{n}})
			}
			shard = k
			t.Shards[k].Slots = append(t.Shards[k].Slots, SlotRange{First: int(first), Last: int(last)})
			continue
		}
		n.Role = RoleReplica
		if k, ok := shardOf[n.ID]; ok && k == shard {
			continue
		}
		shardOf[n.ID] = shard
		t.Shards[shard].Nodes = append(t.Shards[shard].Nodes, n)
	}
	return nil
}

// parseSlotsNode reads one node of an entry.
func parseSlotsNode(v value) (Node, error) {
	elems, ok := v.array()
	if !ok || len(elems) < 3 {
		return Node{}, errors.New("not an array of an endpoint, a port and a node ID")
	}
	endpoint, ok := elems[0].text()
	if !ok {
		return Node{}, errors.New("endpoint: not a string")
	}
	if err := checkHost("endpoint", endpoint); err != nil {
		return Node{}, err
	}
	p, ok := elems[1].integer()
	if !ok {
		return Node{}, errors.New("port: not an integer")
	}
	port, err := checkPort("port", p)
	if err != nil {
		return Node{}, err
	}
	var n Node
	if n.ID, ok = elems[2].text(); !ok {
		return Node{}, errors.New("node ID: not a string")
	}
	host := endpoint
	if len(elems) > 3 {
		fields, err := elems[3].fields()
		if err != nil {
			return Node{}, fmt.Errorf("metadata: %w", err)
		}
		for _, f := range fields {
			if f.key != "ip" && f.key != "hostname" {
				continue
			}
			s, err := textField(f)
			if err == nil {
				err = checkHost(f.key, s)
			}
			if err != nil {
				return Node{}, err
			}
			if f.key == "hostname" {
				n.Hostname = s
			} else if host == "" || host == unknownEndpoint {
				host = s
			}
		}
	}
	n.Addr = joinAddr(host, port)
	return n, nil
}

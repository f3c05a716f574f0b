package clustertopo

import (
	"errors"
	"fmt"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// parseNodes reads CLUSTER NODES's reply: one bulk string, a line per node
// of space-separated fields,
//
//	<id> <ip:port@cport[,hostname]> <flags> <primary id or -> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
//
// with flags among myself, master, slave, fail?, fail, handshake, noaddr,
// nofailover, noflags, and each slot a number, a range "first-last", or a
// slot being moved in brackets ("[93->-<id>]"), which is skipped: until the
// move ends the slot is still its owner's.
//
// A node in handshake is skipped (its ID is a placeholder); a node flagged
// fail is [HealthFail] (fail?, a single node's suspicion, is not, as in
// CLUSTER SHARDS); a node flagged noaddr has no address. A replica is in
// the shard of the primary its line names, followed up through replicas of
// replicas; a shard whose primary has no line gets that primary's ID, and
// no primary.
func parseNodes(v value) (Topology, error) {
	text, ok := v.text()
	if !ok {
		return Topology{}, errors.New("CLUSTER NODES: the reply is not a string")
	}
	type line struct {
		node    Node
		primary string // the ID the line names as its primary's; "" for a primary
		slots   []SlotRange
	}
	var lines []line
	byID := map[string]int{} // the index in lines of each node
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if l == "" {
			continue
		}
		n, primary, slots, skip, err := parseNodesLine(l)
		if err != nil {
			return Topology{}, fmt.Errorf("CLUSTER NODES: line %d: %w", i+1, err)
		}
		if skip {
			continue
		}
		if _, dup := byID[n.ID]; dup {
			return Topology{}, fmt.Errorf("CLUSTER NODES: node %s listed twice", n.ID)
		}
		byID[n.ID] = len(lines)
		lines = append(lines, line{node: n, primary: primary, slots: slots})
	}
	t := Topology{Source: FromNodes}
	shardOf := map[string]int{} // the index in t.Shards of each shard ID
	shard := func(id string) *Shard {
		k, ok := shardOf[id]
		if !ok {
			k = len(t.Shards)
			shardOf[id] = k
			t.Shards = append(t.Shards, Shard{ID: id})
		}
		return &t.Shards[k]
	}
	// top returns the ID at the top of id's chain of primaries: a line's
	// own for a primary, its primary's for a replica, and so on. Each chain
	// is walked once (tops remembers where every node on it leads), and a
	// chain longer than the lines is a cycle.
	tops := map[string]string{}
	top := func(id string) (string, error) {
		var path []string
		for {
			if t, ok := tops[id]; ok {
				id = t
				break
			}
			k, known := byID[id]
			if !known || lines[k].primary == "" {
				break
			}
			if len(path) > len(lines) {
				return "", fmt.Errorf("CLUSTER NODES: node %s's primaries form a cycle", path[0])
			}
			path = append(path, id)
			id = lines[k].primary
		}
		for _, p := range path {
			tops[p] = id
		}
		return id, nil
	}
	for _, l := range lines {
		id, err := top(l.node.ID)
		if err != nil {
			return Topology{}, err
		}
		sh := shard(id)
		sh.Nodes = append(sh.Nodes, l.node)
		sh.Slots = append(sh.Slots, l.slots...)
	}
	if err := t.finish(); err != nil {
		return Topology{}, fmt.Errorf("CLUSTER NODES: %w", err)
	}
	return t, nil
}

// parseNodesLine reads one line of CLUSTER NODES: its node, the ID of its
// primary ("" for a primary), its slots, and whether it is skipped (a node
// in handshake).
func parseNodesLine(l string) (n Node, primary string, slots []SlotRange, skip bool, err error) {
	f := strings.Split(l, " ")
	if len(f) < 8 {
		return Node{}, "", nil, false, fmt.Errorf("%d fields, not 8 or more", len(f))
	}
	n.ID = f[0]
	if !validID(n.ID) {
		return Node{}, "", nil, false, fmt.Errorf("node ID %q is not 40 characters of 0-9 and a-z", quote(n.ID))
	}
	flags := map[string]bool{}
	for flag := range strings.SplitSeq(f[2], ",") {
		flags[flag] = true
	}
	if flags["handshake"] {
		return Node{}, "", nil, true, nil
	}
	switch {
	case flags["master"] && !flags["slave"]:
		n.Role = RolePrimary
		if f[3] != "-" {
			return Node{}, "", nil, false, fmt.Errorf("a primary whose primary is %q", quote(f[3]))
		}
	case flags["slave"] && !flags["master"]:
		n.Role = RoleReplica
		primary = f[3]
		if !validID(primary) {
			return Node{}, "", nil, false, fmt.Errorf("a replica whose primary %q is no node ID", quote(primary))
		}
	default:
		return Node{}, "", nil, false, fmt.Errorf("flags %q: neither master nor slave", quote(f[2]))
	}
	n.Health = HealthOnline
	if flags["fail"] {
		n.Health = HealthFail
	}
	addr, hostname, _ := strings.Cut(f[1], ",")
	hostname, _, _ = strings.Cut(hostname, ",") // aux fields after it, if any, are not ours
	if err := checkHost("hostname", hostname); err != nil {
		return Node{}, "", nil, false, err
	}
	n.Hostname = hostname
	addr, _, _ = strings.Cut(addr, "@")
	colon := strings.LastIndexByte(addr, ':')
	if colon < 0 {
		return Node{}, "", nil, false, fmt.Errorf("address %q: no port", quote(f[1]))
	}
	ip := addr[:colon]
	p, ok := wire.ParseInt([]byte(addr[colon+1:]))
	if !ok {
		return Node{}, "", nil, false, fmt.Errorf("address %q: no port", quote(f[1]))
	}
	port, err := checkPort("port", p)
	if err != nil {
		return Node{}, "", nil, false, err
	}
	if err := checkHost("ip", ip); err != nil {
		return Node{}, "", nil, false, err
	}
	if !flags["noaddr"] {
		n.Addr = joinAddr(ip, port)
	}
	for _, s := range f[8:] {
		if strings.HasPrefix(s, "[") {
			continue
		}
		r, err := parseSlotRange(s)
		if err != nil {
			return Node{}, "", nil, false, err
		}
		slots = append(slots, r)
	}
	if n.Role == RoleReplica && len(slots) > 0 {
		return Node{}, "", nil, false, errors.New("a replica that serves slots")
	}
	return n, primary, slots, false, nil
}

// parseSlotRange reads "first-last" or a single slot.
func parseSlotRange(s string) (SlotRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	first, ok1 := wire.ParseInt([]byte(lo))
	last, ok2 := wire.ParseInt([]byte(hi))
	if !ok1 || !ok2 || first < 0 || last < first || last >= Slots {
		return SlotRange{}, fmt.Errorf("slots %q: no range within 0-%d", quote(s), Slots-1)
	}
	return SlotRange{First: int(first), Last: int(last)}, nil
}

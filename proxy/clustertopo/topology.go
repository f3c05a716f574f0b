package clustertopo

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Slots is the number of hash slots of a cluster: slots are 0 to Slots-1.
const Slots = 16384

// Source is the command a [Topology] was read from.
type Source int

// The sources, in the order [Query] asks for them.
const (
	// FromShards is CLUSTER SHARDS (Redis 7.0 and later, Valkey): every
	// shard, slotless ones included, with each node's health and offset.
	FromShards Source = iota + 1
	// FromNodes is CLUSTER NODES: every node, with a failing one flagged
	// fail, but no offsets.
	FromNodes
	// FromSlots is CLUSTER SLOTS: only the shards that serve slots,
	// without their failing or loading replicas, and no health or offsets.
	FromSlots
)

// String returns the command.
func (s Source) String() string {
	switch s {
	case FromShards:
		return "CLUSTER SHARDS"
	case FromNodes:
		return "CLUSTER NODES"
	case FromSlots:
		return "CLUSTER SLOTS"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// Topology is a cluster's shards as one node described them.
type Topology struct {
	// Source is the command the node answered.
	Source Source
	// Shards are in the order of their first slot; shards that serve no
	// slot come last, by ID. No node is in two shards, and no slot is
	// served by two.
	Shards []Shard
}

// Shard is a primary and its replicas.
type Shard struct {
	// ID names the shard: the node ID of its primary when the reply was
	// read (none of CLUSTER SHARDS, NODES and SLOTS reports a shard ID of
	// its own). A shard without a primary has the ID its replicas name as
	// their primary's in CLUSTER NODES, or its smallest node ID. Because a
	// failover changes it, [Topology.ShardByID] also finds a shard by the
	// ID of any node in it.
	ID string
	// Slots are the ranges it serves, in order, adjacent ones merged.
	Slots []SlotRange
	// Nodes are its primary first, then its replicas by ID.
	Nodes []Node
}

// SlotRange is the slots First to Last, both included.
type SlotRange struct {
	First, Last int
}

// Role is a node's role in its shard.
type Role string

// The roles, as CLUSTER SHARDS names them (CLUSTER NODES's "slave" is
// RoleReplica).
const (
	RolePrimary Role = "master"
	RoleReplica Role = "replica"
)

// Health is a node's health as CLUSTER SHARDS reports it. Another value
// than those below is kept as the node reported it (up to maxWord bytes of
// printable ASCII), and is not online.
type Health string

// The health values.
const (
	// HealthOnline: the node is up as far as the reporting node knows.
	HealthOnline Health = "online"
	// HealthFail: the cluster agreed that the node failed (flag fail in
	// CLUSTER NODES; CLUSTER SHARDS's documentation calls it "failed",
	// which is read as this too).
	HealthFail Health = "fail"
	// HealthLoading: a replica that has no replication offset yet.
	HealthLoading Health = "loading"
	// HealthUnknown: the source does not say (CLUSTER SLOTS).
	HealthUnknown Health = ""
)

// Node is one node of a shard.
type Node struct {
	// ID is its node ID: 40 characters of [0-9a-z].
	ID string
	// Addr is host:port for plain connections: the node's preferred
	// endpoint (its IP, or its hostname under cluster-preferred-endpoint-type
	// hostname), else its IP. "" when the node has no known address or no
	// plain port. CLUSTER NODES and SLOTS report one port, which Redis
	// chooses by the connection asking: its TLS port for a TLS connection
	// when the cluster runs tls-cluster yes; so does Addr then.
	Addr string
	// TLSAddr is host:tls-port, from CLUSTER SHARDS's tls-port; "" when
	// it reports none.
	TLSAddr string
	// Hostname is the node's cluster-announce-hostname; "" for none.
	Hostname string
	Role     Role
	Health   Health
	// Offset is its replication offset (CLUSTER SHARDS only; 0 otherwise).
	Offset int64
}

// ErrNoShard is returned (wrapped) when no shard matches a selection.
var ErrNoShard = errors.New("no such shard")

// ErrNoPrimary is returned (wrapped) when a shard has no primary to
// follow: none, more than one, or one that is not online or has no
// address.
var ErrNoPrimary = errors.New("no primary to follow")

// Selector names the shard to follow: by an ID ([Topology.ShardByID]) or by
// a slot it serves ([Topology.ShardBySlot]).
type Selector struct {
	// ID is a shard's or a node's ID; "" selects by Slot.
	ID string
	// Slot is a slot the shard serves, when ID is "".
	Slot int
}

// ParseSelector reads a selector as an operator writes it: a node ID (40
// characters of [0-9a-z], as Redis writes them) or a slot (0 to 16383).
func ParseSelector(s string) (Selector, error) {
	if validID(s) {
		return Selector{ID: s}, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < Slots && strconv.Itoa(n) == s {
		return Selector{Slot: n}, nil
	}
	return Selector{}, fmt.Errorf("shard %q: neither a node ID (40 characters of 0-9 and a-z) nor a slot (0 to %d)", s, Slots-1)
}

// String returns the selector as [ParseSelector] reads it.
func (sel Selector) String() string {
	if sel.ID != "" {
		return sel.ID
	}
	return strconv.Itoa(sel.Slot)
}

// Shard returns the shard sel names.
func (t Topology) Shard(sel Selector) (Shard, error) {
	if sel.ID != "" {
		return t.ShardByID(sel.ID)
	}
	return t.ShardBySlot(sel.Slot)
}

// ShardByID returns the shard whose ID is id, or else the shard with a node
// whose ID is id: a shard chosen by its primary's ID is still found after a
// failover, by that node, for as long as the cluster lists it.
func (t Topology) ShardByID(id string) (Shard, error) {
	for _, sh := range t.Shards {
		if sh.ID == id {
			return sh, nil
		}
	}
	for _, sh := range t.Shards {
		for _, n := range sh.Nodes {
			if n.ID == id {
				return sh, nil
			}
		}
	}
	return Shard{}, fmt.Errorf("%w: no shard has the ID %q or a node with it (%s)", ErrNoShard, id, t.Source)
}

// ShardBySlot returns the shard that serves slot.
func (t Topology) ShardBySlot(slot int) (Shard, error) {
	if slot < 0 || slot >= Slots {
		return Shard{}, fmt.Errorf("%w: slot %d is not in 0-%d", ErrNoShard, slot, Slots-1)
	}
	for _, sh := range t.Shards {
		for _, r := range sh.Slots {
			if r.First <= slot && slot <= r.Last {
				return sh, nil
			}
		}
	}
	return Shard{}, fmt.Errorf("%w: no shard serves slot %d (%s)", ErrNoShard, slot, t.Source)
}

// Primary returns the shard's primary: its one node of role master, which
// must be online (or of unknown health, from CLUSTER SLOTS, which names a
// slot's owner as its primary) and have an address.
func (sh Shard) Primary() (Node, error) {
	var primaries []Node
	for _, n := range sh.Nodes {
		if n.Role == RolePrimary {
			primaries = append(primaries, n)
		}
	}
	switch {
	case len(primaries) == 0:
		return Node{}, fmt.Errorf("%w: shard %s has no node of role master", ErrNoPrimary, sh.ID)
	case len(primaries) > 1:
		return Node{}, fmt.Errorf("%w: shard %s lists %d nodes of role master", ErrNoPrimary, sh.ID, len(primaries))
	}
	p := primaries[0]
	if p.Health != HealthOnline && p.Health != HealthUnknown {
		return Node{}, fmt.Errorf("%w: shard %s: its primary %s is %q", ErrNoPrimary, sh.ID, p.ID, p.Health)
	}
	if p.Addr == "" && p.TLSAddr == "" {
		return Node{}, fmt.Errorf("%w: shard %s: its primary %s has no address", ErrNoPrimary, sh.ID, p.ID)
	}
	return p, nil
}

// Replicas returns the shard's nodes of role replica, by ID.
func (sh Shard) Replicas() []Node {
	var out []Node
	for _, n := range sh.Nodes {
		if n.Role == RoleReplica {
			out = append(out, n)
		}
	}
	return out
}

// SlotCount returns how many slots the shard serves.
func (sh Shard) SlotCount() int {
	n := 0
	for _, r := range sh.Slots {
		n += r.Last - r.First + 1
	}
	return n
}

// finish checks what every source must hold and puts t in its order:
// node IDs valid and each in one shard, slot ranges within 0-16383 and no
// slot in two, each shard with a node; then ranges sorted and merged, nodes
// primary first, shards by first slot, and a shard without an ID given its
// primary's, else its first node's.
func (t *Topology) finish() error {
	if len(t.Shards) == 0 {
		return errors.New("no shards")
	}
	seen := map[string]bool{}
	var all []SlotRange
	for i := range t.Shards {
		sh := &t.Shards[i]
		if len(sh.Nodes) == 0 {
			return fmt.Errorf("a shard with no nodes")
		}
		for _, n := range sh.Nodes {
			if !validID(n.ID) {
				return fmt.Errorf("node ID %q is not 40 characters of 0-9 and a-z", n.ID)
			}
			if seen[n.ID] {
				return fmt.Errorf("node %s listed twice", n.ID)
			}
			seen[n.ID] = true
		}
		for _, r := range sh.Slots {
			if r.First < 0 || r.First > r.Last || r.Last >= Slots {
				return fmt.Errorf("slot range %d-%d is not within 0-%d", r.First, r.Last, Slots-1)
			}
		}
		all = append(all, sh.Slots...)
		sh.Slots = mergeRanges(sh.Slots)
		slices.SortStableFunc(sh.Nodes, func(a, b Node) int {
			if (a.Role == RolePrimary) != (b.Role == RolePrimary) {
				if a.Role == RolePrimary {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.ID, b.ID)
		})
		if sh.ID == "" {
			sh.ID = sh.Nodes[0].ID
		}
	}
	slices.SortFunc(all, func(a, b SlotRange) int { return cmp.Compare(a.First, b.First) })
	for i := 1; i < len(all); i++ {
		if all[i].First <= all[i-1].Last {
			return fmt.Errorf("slot %d is served twice", all[i].First)
		}
	}
	slices.SortFunc(t.Shards, func(a, b Shard) int {
		return cmp.Or(cmp.Compare(firstSlot(a), firstSlot(b)), cmp.Compare(a.ID, b.ID))
	})
	ids := map[string]bool{}
	for _, sh := range t.Shards {
		if ids[sh.ID] {
			return fmt.Errorf("shard ID %s given twice", sh.ID)
		}
		ids[sh.ID] = true
	}
	return nil
}

// firstSlot returns a shard's first slot, or Slots for a shard with none.
func firstSlot(sh Shard) int {
	if len(sh.Slots) == 0 {
		return Slots
	}
	return sh.Slots[0].First
}

// mergeRanges sorts ranges (already checked to be disjoint) and merges the
// adjacent ones.
func mergeRanges(ranges []SlotRange) []SlotRange {
	if len(ranges) == 0 {
		return nil
	}
	out := slices.Clone(ranges)
	slices.SortFunc(out, func(a, b SlotRange) int { return cmp.Compare(a.First, b.First) })
	merged := out[:1]
	for _, r := range out[1:] {
		if last := &merged[len(merged)-1]; r.First == last.Last+1 {
			last.Last = r.Last
		} else {
			merged = append(merged, r)
		}
	}
	return merged
}

// nodeIDLen is the length of a node ID (Redis's CLUSTER_NAMELEN).
const nodeIDLen = 40

// validID reports whether s is a node ID as Redis accepts one
// (verifyClusterNodeId): 40 characters of [0-9a-z].
func validID(s string) bool {
	if len(s) != nodeIDLen {
		return false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

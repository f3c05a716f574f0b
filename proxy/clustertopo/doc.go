// Package clustertopo finds the shards of a Redis Cluster or Valkey Cluster
// from outside it, so that the proxy can follow one shard's primary as an
// ordinary replica: which nodes serve which slots, which of them is each
// shard's primary, and whether it is up.
//
// [Query] dials seed addresses one at a time and asks the first that
// answers for the cluster's topology: CLUSTER SHARDS (Redis 7.0 and later,
// Valkey), or, from a node that does not know that command or a user who
// may not run it, CLUSTER NODES, then CLUSTER SLOTS. A [Topology] is
// shards of nodes with their roles, health and addresses; a [Selector]
// (a node ID or a slot, as an operator writes it) picks one shard, and
// [Shard.Primary] its primary, or says why there is none to follow.
//
// None of the three commands reports a shard ID of its own (Redis 7.2 and
// Valkey keep one, but show it only through CLUSTER MYSHARDID, for the node
// asked). A shard's ID here is its primary's node ID when the reply was
// read, so a failover changes it; [Topology.ShardByID] therefore also finds
// a shard by the ID of any node in it, which a shard chosen by its old
// primary's ID keeps for as long as the cluster lists that node.
//
// # Trust
//
// Nothing a node sends is trusted. Every reply is read within [Limits]
// (8 MiB on the wire and 262144 values by default, arrays at most eight
// deep, lines at most 4 KiB); a length a reply announces is checked before
// anything is allocated for it, and buffers grow with the bytes that
// arrive, so a reply that announces a huge string or array and stops costs
// what it sent. What a reply holds is checked before it is used: node IDs
// (40 characters of [0-9a-z]), ports, hosts (printable ASCII, at most 255
// bytes), slot ranges, no node in two shards and no slot served twice. A
// reply that breaks any of this is refused whole, and the next seed asked.
// Error messages quote at most 64 bytes of what a node sent, with %q.
//
// A topology is one node's view, and may be stale: a node cut off from the
// rest of the cluster still names the primary it last knew. Before
// following a primary the caller asks it what it is: [AskRole].
//
// # Goroutines
//
// None of its own. Query and AskRole run on their caller's goroutine, one node at a
// time, each within [Options.Timeout]; a context ends it sooner, through
// context.AfterFunc, whose function (moving the connection's deadline to
// the past) runs once on a goroutine of the runtime's when the context
// ends, and not at all once Query has returned. Topologies are values:
// nothing is shared, and no type of the package holds a lock.
package clustertopo

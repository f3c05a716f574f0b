// Package clusterwatch decides which node the proxy follows as the primary
// of one shard of a Redis or Valkey Cluster (replicaof-cluster with
// cluster-shard): it reads the cluster's topology from the nodes it knows,
// picks the shard, confirms the shard's primary by asking it (ROLE), and
// returns what it found as a [Decision]. It never re-points anything
// itself: the proxy acts on a decision the way it acts on REPLICAOF, so a
// failover is followed by the same partial resync (PSYNC2's replid2) as
// one Sentinel announces.
//
// # Rules
//
//   - A primary is followed only once it says so: a topology is one
//     node's view and may be stale, so the node it names is asked ROLE, and
//     only "master" makes it the decision. A node whose named primary is
//     not one (a demoted primary, a replica) is passed over, and the next
//     known node asked, so that one stale node cannot hold the proxy on a
//     replica or send it to one. At most three nodes' views are read per
//     check, so that a primary that is down and not yet replaced costs a
//     few connections per check, not one per node of the cluster.
//   - A check that finds no confirmed primary says "unknown"
//     (Decision.Primary ""), which the proxy takes as: keep the current
//     one. It never drops its link for lack of a view.
//   - A confirmed primary other than the current one is followed at once
//     when the current one is down or says it is a replica; while the
//     current one still says master, only once the other has been the
//     decision for Config.Settle (5 s by default). Two nodes that both say
//     master (the old primary of a manual failover in the moment before it
//     hears of the promotion, one cut off from the cluster) are thus not
//     followed back and forth, and the proxy never goes back to a node
//     that cannot continue its history by a partial resync because it
//     saw a stale view for a moment.
//   - Nodes are asked one at a time, in order: the node that answered
//     last, then the seeds as configured, then the nodes the last topology
//     named (at most [MaxLearnt]; only addresses a topology gave). Losing
//     some seeds costs one refused dial each, or one timeout for an
//     address that does not answer.
//   - A shard chosen by a node ID is found by any node in it
//     ([clustertopo.Topology.ShardByID]); the IDs of the nodes the shard had
//     at the last reading are remembered, so that the shard is still found
//     after the named node was removed from the cluster.
//   - Under TLS a node's TLS address (CLUSTER SHARDS's tls-port) is used
//     where the topology gives one, else its address.
//
// Every reply is read within clustertopo's limits and each node within
// the options' timeout; nothing from the network is trusted (clustertopo's
// package doc).
//
// # Concurrency
//
// A [Watcher] belongs to one goroutine: [Watcher.Check] is not safe for
// concurrent use, and holds no lock. It has no goroutine of its own; a
// check runs on its caller's and ends with the caller's context.
package clusterwatch

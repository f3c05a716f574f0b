// Package clusterset serves a whole Redis or Valkey Cluster from one
// process (replicaof-cluster with cluster-shard all): one [proxy.Server] per
// shard of the cluster, each following its shard as a server under
// cluster-shard <node ID> does (failovers by partial resync), on a port of
// its own, with its own history, stream log and snapshots, so that a
// standalone redis-server replica of each port is a read-only copy of that
// shard, and the replicas of every port together a copy of the cluster.
//
// # Rules
//
//   - A shard keeps its index, and so its port (cluster-port-base + index)
//     and its directory (dir/shard-<index>), across failovers and restarts:
//     the indexes are kept in dir (the file [MapFile], written whole under
//     a temporary name and renamed into place) with the node IDs each shard
//     has had. None of CLUSTER SHARDS, NODES and SLOTS names a shard, so a
//     shard of a new topology is the known one whose nodes include its
//     primary, else one whose nodes include any of its nodes; a shard
//     matching none gets the next index never given. An index is never
//     given to another shard, so a port never changes hands.
//   - Each shard's server is configured from the process's configuration:
//     port cluster-port-base + index, dir dir/shard-<index>, metrics-port
//     (when set) metrics-port + index, cluster-shard the ID of its primary
//     when it was started, and everything else as configured. CONFIG SET on
//     one shard's port changes that shard's server alone; CONFIG REWRITE is
//     refused (no configuration file of its own).
//   - The topology is read every cluster-refresh-interval from the seeds
//     and the nodes the last topology named. A shard that appears (a new
//     primary, whether or not it serves slots yet) is started at once; a
//     shard that is missing from every topology read for [DefaultGrace] is
//     stopped, as SHUTDOWN stops a server (its replicas given
//     shutdown-timeout). A reading that fails changes nothing, so a
//     topology glitch never stops a shard.
//   - The set is one process: a shard's server that fails (a port taken,
//     dir's lock held) fails the set, which stops every other shard and
//     returns the error, at start and later alike, except a shard that
//     appears while the set runs and cannot start: it is logged and tried
//     again at the next reading, the others untouched. A shard's server
//     that stops of itself (SHUTDOWN on its port) stops the set
//     gracefully, as SHUTDOWN stops a redis-server.
//   - CLUSTER SHARDS and CLUSTER SLOTS on any shard's port answer the
//     set's map: every shard served, its slots as the last reading gave
//     them, and the port that serves it (proxy.Options.ClusterMap).
//
// # Concurrency
//
// A [Set] is one actor: [Set.Run] reads the topology, owns the index map
// and the running shards, and starts each shard's server on a goroutine of
// its own, which it waits for before it returns. Each server runs under
// Run's context: ending it stops every shard at once; [Set.Shutdown] stops
// every shard gracefully. The map CLUSTER SHARDS reads is an immutable
// value Run stores atomically; the memory hook's figures are guarded by a
// mutex, which nothing is taken under.
package clusterset

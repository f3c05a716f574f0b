// Package proxy assembles replproxy: one ordinary replica of a Redis or
// Valkey primary upstream, a primary to any number of replicas downstream,
// and the admin commands in between. Each part that owns state has a
// package of its own, whose doc says what it owns, which goroutines touch it
// and where its lock sits; internal/layering's test holds the imports
// between them to its table. This package builds the parts into a Server,
// serves the clients, answers the admin commands and reports.
//
// # Parts, and the files here that hold them together
//
//   - history: the replication identity, the stream, the snapshots, the one
//     fetch in flight, sync plans, eviction candidates, the stream log's
//     follower. It returns the work it decides on; snapshots carries it out.
//   - snapshots: the snapshot work (a Keeper): the shared fetch, where an
//     arriving payload goes, spills, persists, refreshes, adoption and
//     leftovers. The link is its Source, and it is the link's Snapshots
//     and each replica's: the main link hands it its payloads and seeds
//     itself, a replica its plans and the end of its full sync. primary.go
//     gives it snapshotHost and its settings (snapshotSettings, again after
//     every change), and hands it to the link (newSnapshots); the monitor
//     waits on its PayloadStarts.
//   - downstream: a replica from PSYNC on, its plan included.
//     commands_sync.go serves REPLCONF, PSYNC and SYNC up to the hand-over
//     (downstream.Accept); replica_host.go is the Host each replica is
//     given, and what they share: the fan-out, the compressed links' slots
//     and the settings in force (replicaSettings, stored after every
//     change).
//   - upstream: the main link to the primary and its side links.
//     primary.go is its Host and makes its Settings (upstreamSettings,
//     given again after every change), and gathers the replicas' ACKs the
//     ack-policy counts (upstream.QuorumAck). A change of the history's
//     identity, from the link (an install, a new replid) or from a seed's
//     Begin (snapshotHost), ends in one call, closeReplicasBefore: the
//     fan-out woken for a new generation, and the replicas planned before
//     it disconnected.
//   - streamlog and snapfile: the stream and the snapshot in dir.
//     durable.go opens and recovers the log at New and runs its follower;
//     dirlock.go takes, moves (CONFIG SET dir) and releases dir's lock.
//   - report and metrics: a report.Report is the figures read once from
//     every part (report_read.go) and rendered twice, INFO's text and
//     the monitoring server's figures (metrics_port.go, which also holds /readyz's
//     rule), so that the two never compute a figure twice; report.Stats are
//     the counters behind them.
//   - pubsub: the channels, subscribers and their outboxes;
//     commands_sentinel.go serves SUBSCRIBE, UNSUBSCRIBE and PUBLISH on it.
//   - acl: the ACL users and their rules (Redis 7.0's), ACL LOG. auth.go
//     holds them (access): it gives each client its user, checks every
//     command before it runs (dispatch.go) and authenticates;
//     commands_acl.go serves ACL, with the aclfile's I/O, and closes the
//     clients a change of users removes.
//   - commanddocs (COMMAND), clientlist (CLIENT LIST and KILL), listen and
//     tlsconf (sockets, TLS files), webconfig (the monitoring port's web
//     configuration), sysmem (the OS's memory), wire, config.
//
// This package's own state is held by owners, each a type in a file of its
// own that New (assemble.go) makes and hands what it needs of the others,
// and that never reaches back into the Server (server.go, which lists
// them):
//
//   - the configuration in force and its writers (settings.go: liveConfig,
//     copy-on-write; configChanges, CONFIG SET, REPLICAOF and CONFIG
//     REWRITE);
//   - the client listeners, replaced by CONFIG SET with new ones ready
//     before the old ones close (listener_set.go; opened by package
//     listen), and the TLS material their handshakes take
//     (tls_handshake.go; built by package tlsconf);
//   - dir's lock (dirlock.go) and the stream log (durable.go);
//   - each client (client.go: its replies, its outbox, its protocol, RESP2
//     or RESP3 after HELLO 3), their registry (registry.go), the ACL users
//     (auth.go), what protects the proxy from strangers (protect.go:
//     limits, protected mode, the descriptor budget, the rate-limited
//     logs) and the command table (command_table.go);
//   - the monitor (cron.go, the proxy's replicationCron: replica timeouts
//     and output limits, retired snapshots, the snapshot persisted and
//     refreshed; ten rounds a second, one while nothing moves) and memory
//     (memory.go: maxmemory and eviction, memory given back to the OS);
//   - what a supervisor is told (supervise.go) and the server's life
//     (drain.go: Run's start, Close, Shutdown's drain, New's undo);
//   - with replicaof-cluster, the follower of a cluster's shard
//     (cluster_follow.go), made by Run: it acts on package clusterwatch's
//     decisions by a configuration change that sets replicaof.
//
// The Server's own methods are the parts built on all of them: serving a
// client (client_conn.go), the admin commands (dispatch.go, commands*.go,
// replies.go), the report (report_read.go, INFO's), the hosts of the link
// and the replicas (primary.go, replica_host.go), the monitoring port
// (metrics_port.go) and Run's run group (run.go).
//
// # Goroutines
//
// Every goroutine of the server that lives as long as Run is an actor of
// Run's run group (Server.actors, run.go), or is started and waited for
// by one.
// An actor returns nil once stopped, or its error when it fails; the first
// to return stops them all, one after the other in this order:
//
//  1. stop: waits for Run's context to end (or Close) or for Shutdown
//     (SIGTERM, SHUTDOWN), which first drains on it: listeners closed, the
//     link ended, then up to shutdown-timeout for the replicas to catch up.
//     Its stop then cancels the context every actor below runs under but
//     the follower and the monitoring server.
//  2. the upstream link's goroutine: ended first, so that the stream's
//     end stays put.
//  3. with replicaof-cluster, the cluster follower, under the link's
//     context: a drain ends it with the link.
//  4. the clients: one accept loop per listener (a replaced listener's
//     loop ends when it is closed) and each client's goroutine; the
//     listeners and every client are closed.
//  5. the monitor, and 6. the memory returns (debug.FreeOSMemory, which
//     the monitor asks for): stopped before the Keeper, whose work the
//     monitor asks for too.
//  7. the Keeper, which owns its fetches', spills' and persists'
//     goroutines.
//  8. with the stream log, the history's follower (and its syncer): the
//     last of the stream's readers, it appends what was published; the
//     log is closed after it.
//  9. the monitoring server (net/http's goroutines), so that /metrics and
//     /readyz answer through a graceful stop.
//
// Each is waited for before the next is stopped. Run then closes the
// history, wakes the replicas parked on the fan-out and releases dir's
// lock, and returns the errors of the actors that failed (each is logged
// too): an actor's failure stops the whole server.
//
// Each accepted connection gets one goroutine (serveClient), which reads
// commands and writes replies; on tls-port it first runs the handshake,
// under a deadline (10s, or repl-timeout when shorter). The connection
// counts against maxclients from accept on, as Redis creates its client
// before the handshake. A client that turns into a replica (PSYNC, SYNC)
// lends its goroutine to the replica's read loop; the replica starts its
// write loop. A client's first SUBSCRIBE starts its outbox's writer, which
// serveClient stops and waits for when the client ends.
//
// # Locks
//
// No lock of this package is held while taking another of them but where
// named below, and none across network I/O:
//
//   - registry.mu is a leaf: nothing under it blocks, logs or touches a
//     socket; callers take a list and act on it after.
//   - The configuration has no reader lock (an atomic.Pointer). A writer
//     (CONFIG SET, REPLICAOF) prepares its change with no lock held: it
//     reads the TLS files, takes a new dir's lock and opens new listeners
//     first. It then publishes under configChanges.writeMu, which guards
//     pointer swaps alone (the configuration, the listener set under its
//     lock, a leaf and the only lock taken under writeMu, and dir's lock),
//     so that the material is published with the configuration naming it;
//     a change prepared from a configuration no longer in force is undone
//     and made again, so that none is lost. Its effects (memory limit, log
//     level, Retarget) and the closing of what it displaced follow with no
//     lock of this package held, in publication order; the backlog size is
//     set then, under the history's lock. A change whose listen or dir lock
//     fails runs again alone: the other writers wait for it, holding no
//     lock (settings.go). configChanges.releaseDir takes writeMu for the
//     swap and releases the flock after.
//   - configChanges.rewriteMu is held across CONFIG REWRITE's file I/O;
//     nothing is taken under it.
//   - lifecycle.mu (Run and Close) is never held while waiting or while
//     taking another lock.
//   - The parts' locks are their packages': History.mu (a leaf but for
//     replbuf and streamlog), downstream.LogSignal's, the upstream session's
//     writeMu, the log's, pubsub's channels' lock (→ an outbox's: a publish
//     queues its message into each subscriber's outbox under both; nothing
//     under them blocks, logs or touches a socket; Refused, which finds the
//     subscribers a change of ACL rules closes, reads only a client's
//     atomic user and the immutable profile under it), the ACL users' and
//     the ACL LOG's locks (leaves: a command's check takes none, one
//     atomic load of its user's profile). This package calls
//     each part with none of its own
//     locks held. A report (INFO, a scrape) reads atomics and takes each
//     part's lock alone; upstream's Host.AckOffset reads the configuration,
//     then the history's epoch, then registry.mu, one at a time.
//
// A change of identity (an upstream full resync or a new replid) is made
// under History.mu and returns an epoch; the caller then closes, from the
// registry and with no lock held, the replicas planned before that epoch,
// which come back for a sync of the new generation.
//
// # The data path
//
// The primary's bytes go from the socket straight into the tail of the
// stream's last block (package upstream), are scanned in place and
// published up to the last whole command; each replica's cursor hands its
// write loop slices of the same blocks, written with writev (package
// downstream): no payload is copied in user space on the way through. The
// link's goroutine writes new bytes itself to the caught-up replicas
// (Host.Published, downstream.Fanout) before its read would wait.
package proxy

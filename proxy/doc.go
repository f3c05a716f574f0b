// Package proxy assembles replproxy: one ordinary replica of a Redis or
// Valkey primary upstream, a primary to any number of replicas downstream,
// and the admin commands in between. Each part that owns state has a package
// of its own, whose doc says what it owns, which goroutines touch it and
// where its lock sits; this package builds them into a Server, serves the
// clients, answers the admin commands and reports. The imports between the
// parts are the ones internal/layering's table allows, and its test fails on
// any other.
//
// # Parts
//
//   - package history: the replication identity, the stream, the
//     snapshots, the one fetch in flight, the sync plans and full-sync
//     reasons, eviction candidates, and the stream log's follower and
//     syncer. It decides and returns the work it decided on (a fetch to run,
//     a snapshot to write to dir), which package snapshots carries out.
//   - package snapshots: the snapshot work, one owner for it: the shared
//     fetch (its attempts, backoff, counting and logs), where an arriving
//     payload goes (memory or dir), spills, persists and refreshes, and
//     adoption and leftovers at start, on goroutines of its own (a Keeper,
//     run by Run). It reaches the upstream link and the server through
//     interfaces it declares, which upstream.go implements
//     (snapshotSource, snapshotHost).
//   - package downstream: a replica from PSYNC on (handshake state, sync
//     path, ACK reader, limits, memory window, first-cause close, the close
//     reasons clients share). downstream.go holds REPLCONF, PSYNC and SYNC
//     (the history's plan, the sync counters, the hand-over to
//     downstream.New); replica_host.go the downstream.Host each replica is
//     given.
//   - package upstream: the main link to the primary and the side links that
//     fetch a snapshot, retried by one backoff rule. upstream.go implements
//     its Host on the configuration and the history; ackpolicy.go decides
//     what is acknowledged upstream under ack-policy.
//   - package snapfile: the snapshot files in dir (a sink renamed into place
//     once, metadata, verify at restart, open only while unchanged);
//     package snapshots writes them.
//   - package streamlog: the stream kept in dir/replproxy-log, and dir's
//     lock. durable.go opens the log at New, recovers the history from it
//     (the link then asks for PSYNC <replid> <end+1>) and gives it to the
//     history's follower; dirlock.go takes, moves (CONFIG SET dir) and
//     releases the lock.
//   - package metrics: metrics-port's HTTP server, rendering the
//     metrics.Figures that report.go makes of a report at each scrape;
//     metrics.go serves it and holds /readyz's rule (readiness).
//
// What is this package's own:
//
//   - the Server (server.go): New, Run, Close, Shutdown and its drain
//     (drain.go), the accept loops, the background group (goBackground), the
//     descriptor budget (fdbudget.go: maxclients + ReservedFDs), and what a
//     supervisor is told of its life (supervise.go: ready, status, stopping);
//   - the listeners (listeners.go), plain (port) and TLS (tls-port),
//     replaced by CONFIG SET port, tls-port or bind, new ones opened before
//     the old ones close; TLS (tls.go): the tls-* material, loaded at New and
//     when CONFIG SET names a tls-* directive, published with the
//     configuration naming it (a failed load changes nothing);
//   - the configuration in force (settings.go), published copy-on-write:
//     CONFIG SET and REPLICAOF replace it whole, CONFIG REWRITE (commands.go)
//     writes it over the file the server started from;
//   - the clients (client.go, protect.go), their registry (registry.go) and
//     the admin commands (commands.go, commands_connect.go,
//     commands_sentinel.go, commands_docs.go, info.go); each client's
//     protocol (RESP2, or RESP3 after HELLO 3), through which every reply
//     RESP3 changes is written (client.proto and wire.Proto: maps, nulls,
//     verbatim strings, pushes);
//   - Pub/Sub (pubsub.go): the channels and their subscribers, and each
//     subscriber's outbox, through which every reply and message to it
//     goes, written by its writeLoop; a message is encoded once per
//     protocol among its receivers (a push for RESP3);
//   - the monitor (monitor.go, memory.go, memreturn.go): replica timeouts
//     and output limits enforced, maxmemory and eviction (snapshots spilled
//     to dir through package snapshots), memory given back to the OS, the
//     newest snapshot persisted and refreshed; ten rounds a second,
//     one while nothing moves (the stream's producer wakes it);
//   - one report (report.go), the figures read once from every part, from
//     which INFO (written in info.go alone) and /metrics are both made, so
//     that the two never compute a figure twice; the counters behind them
//     (stats.go).
//
// # Goroutines
//
// Run starts one accept loop per listener (and one for each listener CONFIG
// SET opens later; a replaced listener's loop ends when it is closed), the
// upstream link's run goroutine, the monitor, the snapshot work's Keeper
// (whose fetches, spills and persists run on goroutines it owns and waits
// for) and, with the stream log, the history's follower (which runs and joins its syncer), and waits for all of
// them when it ends: the follower is the last of the stream's readers to
// stop, after the clients, and the log is closed after it. Run's context
// ending (or Close) stops it at once; Shutdown (SIGTERM, SHUTDOWN) first
// drains on Run's own goroutine: listeners closed, the upstream link ended,
// then up to shutdown-timeout for the replicas to catch up.
//
// Each accepted connection gets one goroutine (serveClient), which reads
// commands and writes replies; on tls-port it first runs the handshake,
// under a deadline (10s, or repl-timeout when shorter). The connection
// counts against maxclients, and in connected_clients, from accept on, as
// Redis creates its client before the handshake. When a client turns into a
// replica (PSYNC, SYNC), its goroutine becomes the replica's read loop and
// the replica starts its write loop (package downstream). A client's first
// SUBSCRIBE starts its outbox's writeLoop, which serveClient stops and waits
// for when the client ends. The monitor and memory returns run on the
// background group, which has Run's lifetime; the Keeper is closed after
// it, so that no snapshot work starts once the monitor has stopped. The monitoring server is served by net/http's goroutines from
// Run's start to its very end (after the clients and the background group),
// so that it answers through a graceful stop.
//
// # Locks
//
// No lock of this package is held while taking another of them but where
// named below, and none across network I/O:
//
//   - registry.mu is a leaf: nothing under it blocks, logs or touches a
//     socket; callers take a list and act on it after.
//   - pubsub.mu → outbox.mu: a publish queues its message into each
//     subscriber's outbox under both; nothing under them blocks, logs or
//     touches a socket, and neither is held with another lock of this
//     package or a part's.
//   - The configuration has no reader lock (an atomic.Pointer). A writer
//     (CONFIG SET, REPLICAOF) prepares its change with no lock held: it
//     reads the TLS files, takes a new dir's lock and opens new listeners
//     first. It then publishes under liveConfig.writeMu, which guards
//     pointer swaps alone (the configuration, the listener set under ln's
//     lock, a leaf and the only lock taken under writeMu, and dir's lock),
//     so that the material is published with the configuration naming it;
//     a change prepared from a configuration no longer in force is undone
//     and made again, so that none is lost. Its effects (memory limit, log
//     level, Retarget) and the closing of what it displaced follow with no
//     lock of this package held, in publication order; the backlog size is
//     set then, under the history's lock. A change whose listen or dir lock
//     fails runs again alone: the other writers wait for it, holding no
//     lock (settings.go). releaseDir takes writeMu for the swap and
//     releases the flock after.
//   - rewriteMu is held across CONFIG REWRITE's file I/O; nothing is taken
//     under it but a load of the configuration.
//   - life (Run and Close) and bgMu are never held while waiting or while
//     taking another lock.
//   - The parts' locks are their packages': History.mu (a leaf but for
//     replbuf and streamlog), downstream.LogSignal's, the upstream session's
//     writeMu, the log's. This package calls each part with none of its own
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
// stream's last block (package upstream), are scanned in place for REPLCONF
// GETACK and MULTI/EXEC, and are published up to the last whole command the
// scanner accepted. Each replica's cursor hands its write loop slices of the
// same blocks, written with writev (package downstream; a TLS replica's
// slices go to the tls.Conn, whose encryption is the only copy): no payload
// is copied in user space on the way through. Before its read of the
// primary would wait (or once 256 KiB are held), the link's goroutine writes
// the new bytes itself to the replicas that are caught up (Host.Published,
// downstream.Fanout), one non-blocking writev each, and a replica's write
// loop is woken only when its socket would block or it is behind.
package proxy

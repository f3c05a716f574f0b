// Package proxy is replproxy's protocol: one ordinary replica of a Redis or
// Valkey primary upstream, a primary to any number of replicas downstream,
// and the admin commands in between. The bytes themselves live in replbuf;
// this package decides who reads which of them, and when.
//
// # Roles
//
// A Server (server.go) is one proxy: New opens its listeners, Run serves
// until its context ends or Close is called (Close is idempotent). It is
// made of parts with one owner each:
//
//   - history (package history): the replication identity, the stream, the
//     snapshots, the one fetch in flight, the sync plans and eviction
//     candidates. It returns the work it decides on (a fetch to run, a
//     snapshot to write to dir), which the server starts (downstream.go's
//     planFull, memory.go, snapshot_disk.go); its package doc gives its
//     callers and its lock.
//   - upstream (package upstream; upstream.go here): the main link to the
//     primary (handshake, payload, stream loop, ACKs) and the side links
//     that fetch a snapshot for replicas needing a full sync. It sees the
//     server only through upstream.Host, which upstream.go implements on the
//     configuration and the history, and ackpolicy.go (what is acknowledged
//     upstream under ack-policy) on the registry's replicas; fetch.go runs
//     the shared fetches, whose retries are the link's (FetchLoop, one
//     backoff rule with its reconnects); payload_disk.go decides where a full sync's
//     payload, or a fetch's, goes while it arrives (memory, or dir past a
//     small window).
//   - replid (package replid): the replid and offset rules both sides check
//     what they read from the network with.
//   - registry (registry.go): the connected clients and, among them, the
//     replicas; ids for CLIENT LIST.
//   - configuration (settings.go): the config.Config in force, published
//     copy-on-write; CONFIG SET and REPLICAOF replace it whole. CONFIG
//     REWRITE (commands.go) writes it over the file the server started
//     from, one rewrite at a time (rewriteMu).
//   - TLS (tls.go): the material the tls-* files hold (server config for
//     tls-port, client config for tls-replication), loaded at New and again
//     when CONFIG SET names a tls-* directive, and published with the
//     configuration that named it; a failed load changes nothing. The
//     listener's tls.Config reads the material in force at each handshake
//     (GetConfigForClient), the upstream link at each dial, so open
//     connections keep what they were made with.
//   - listeners (listeners.go): the client listeners, plain (port) and TLS
//     (tls-port), opened by New and replaced by CONFIG SET port (the plain
//     ones), tls-port (the TLS ones) or bind (both kinds): new ones
//     opened before the old ones close, connections already accepted stay.
//     Closed for good by Run's end, a drain or Close.
//   - clients (client.go, commands.go, commands_connect.go,
//     commands_sentinel.go, protect.go): one connection each; a client
//     turns into a replica on PSYNC or SYNC.
//   - replicas (package downstream; downstream.go, replica_host.go here):
//     a replica owns its connection from PSYNC on, its sync paths, ACK
//     reader, limits and close reasons (see its package doc). downstream.go
//     holds REPLCONF, PSYNC and SYNC: the history's plan, the sync counters,
//     and the hand-over (downstream.New, registered, then Run on the
//     client's goroutine); replica_host.go the downstream.Host each replica
//     is given and the counters it adds to.
//   - the stream log (durable.go; package streamlog, its follower in package
//     history): with repl-log-size,
//     the stream kept in dir/replproxy-log, recovered at New (the history
//     then starts at its end, and the link asks for PSYNC <replid> <end+1>),
//     read by partial resyncs older than the memory backlog and by replicas
//     out of the memory window.
//   - dir's lock (dirlock.go, on streamlog.LockDir): replproxy.lock, taken
//     by New before any file in dir is touched, whatever repl-log-size,
//     held until Run's end or Close, moved by CONFIG SET dir.
//   - the monitor (monitor.go, memory.go, memreturn.go, spill.go): replica
//     timeouts and output-buffer limits, maxmemory and eviction, memory given
//     back to the OS, snapshots spilled to dir.
//   - the snapshot files in dir (package snapfile): written through a sink
//     (one rename into place), their metadata, verified at restart, opened
//     only if unchanged; spill.go, snapshot_disk.go and payload_disk.go
//     decide when one is written, snapfile how.
//   - INFO, ROLE, CLIENT LIST (info.go, commands.go) and the counters behind
//     them (stats.go; the close reasons are downstream.CloseReason, for
//     replicas and clients alike). INFO is written in info.go alone,
//     from one report (report.go): the figures read once from their
//     sources, with every derived one (lag, the backlog zeroed without a
//     history, the log's fsync lag) derived there; /metrics renders the same
//     report, so the two never compute a figure twice.
//   - the monitoring server (package metrics; metrics.go here):
//     metrics-port's HTTP server, /metrics rendering the metrics.Figures
//     that report.figures makes of a report at each scrape (no counters of
//     its own), /healthz, and /readyz's rule (readiness, History.Servable).
//     It holds a bounded number of connections, each for a bounded time,
//     inside the descriptor budget (fdbudget.go: maxclients + ReservedFDs
//     is what the process asks of the open file limit).
//
// # Goroutines
//
// Run starts one accept loop per listener, plain and tls-port (and one for
// each listener that CONFIG SET port or bind opens later; a replaced
// listener's loop ends when it is closed), the upstream link's run
// goroutine and the monitor, and waits for them when it ends. Its context
// ending (or Close) stops it at once; Shutdown (SIGTERM, SHUTDOWN) first
// drains, on Run's own goroutine (drain.go): listeners closed, the upstream
// link ended on a context of its own, then up to shutdown-timeout for the
// replicas to catch up with the stream's end. Each accepted
// connection gets one goroutine (serveClient), which reads commands and
// writes replies; it alone touches the client's reader and reply buffer.
// On tls-port that goroutine first runs the TLS handshake, under a deadline
// (10s, or repl-timeout when shorter) and Run's context; a failure is
// counted, logged at most once a second and closes that connection only.
// The connection counts against maxclients (and in connected_clients) from
// accept on, as Redis creates its client before the handshake: past the
// limit it is closed at once.
// When a client becomes a replica that goroutine runs it
// (downstream.Replica.Run): it is the replica's read loop, and Run starts
// its write loop and returns once both have ended, with one first-cause
// close (package downstream).
//
// The upstream link's run goroutine owns the main link's connection and is
// the stream's one producer: it fills, scans and publishes (replbuf's
// Fill/Publish/Discard), and a session goroutine sends REPLCONF ACK every
// second; the session returns the first error of the two, and waits for
// both (and for the goroutine that watches for a retarget) before the next
// connection. Snapshot fetches, spills and memory returns run on the background
// group (goBackground), which has Run's lifetime: a fetch goroutine owns its
// side-link connection. With the stream log, Run also starts its follower
// (history.Follower: a cursor on the stream that appends every published
// byte to the log; it is the last of the stream's readers to stop, after
// the clients), which runs the syncer (repl-log-fsync everysec) beside it
// and joins it, on a context of their own; Run waits for both, then closes
// the log. A replica's writer sends from the log while the replica is out
// of the memory window or resumes from an offset only the log holds (package
// downstream), and at the log's end waits for the follower's next append,
// which durable.appended (a downstream.LogSignal) announces. The
// monitoring server, when metrics-port is set, is served from New's
// listener by net/http's goroutines from the start of Run to its very end
// (after the clients and the background group, before the history
// closes), so that it answers through a graceful stop.
//
// # Locks
//
// Each part has its own lock, and none is held while taking another proxy
// lock:
//
//   - history.History.mu guards the history (package history). It is a
//     leaf but for replbuf and the stream log, and takes no proxy lock: the
//     fetch or write it records is started by the caller, on the
//     background group (bgMu), after the history's lock is released.
//   - registry.mu is a leaf: taken alone, and nothing under it blocks, logs
//     or touches a socket; callers take a list and act on it after.
//   - The configuration has no reader lock (an atomic.Pointer); its writers
//     serialise on liveConfig.writeMu and apply the change under it, so that
//     changes take effect in the order they were published. Under it the
//     only proxy lock taken is ln (the listener set), by a change of port
//     or bind, which also opens its sockets under writeMu, as Redis's
//     single thread does (the backlog size is set after, under
//     History.mu). The TLS files are read under it too (files, no socket),
//     so that the material is published with the configuration naming it;
//     only writers wait for that. So is a new dir's lock taken (one open
//     and flock, CONFIG SET dir), so that it is published with the dir.
//   - ln (listenerSet) is a leaf: it guards the listener list and Run's
//     serve hook; the accept loops serve starts take no proxy lock, and
//     old listeners are closed after it is released.
//   - rewriteMu is held across CONFIG REWRITE's file I/O, and nothing is
//     taken under it but a load of the configuration.
//   - History.mu is held while calling into the stream log (PlanPartial,
//     PlanFull, AttachFetched: the log's identity, bounds and a new reader):
//     History.mu, then streamlog's lock. The follower calls the log with no
//     proxy lock held, and records under History.mu alone which stream
//     generation the log follows (logFollows), so that a plan from the log
//     is made only for the generation the log holds; streamlog calls nothing
//     back.
//   - life (Run and Close) and bgMu are never held while waiting.
//   - durable.appended's mu (a downstream.LogSignal) is a leaf, held to
//     hand out or close one channel.
//   - A replica (package downstream) has no mutex of its own; the
//     downstream.Host it is given takes the proxy's locks each alone.
//   - A report (an INFO, a scrape) takes no lock of its own: it reads
//     atomics and takes the history's, the registry's, the pool's and the
//     stream log's locks each alone.
//   - In package upstream, a session's writeMu is a leaf that serialises the
//     answers to GETACK and the periodic ACKs on the main link, and guards
//     the highest offset the session acknowledged and when it last sent an
//     ACK (for the quiet rule of ackpolicy.go). Host.AckOffset is called
//     before it is taken: it reads the configuration, then History.mu (the
//     epoch), then registry.mu, one at a time.
//
// No lock is held across network I/O but that last one, for one write
// bounded by the write deadline. A change of identity (an upstream full
// resync or a new replid) is made under History.mu and returns an epoch; the
// caller then closes, from the registry and with no lock held, the replicas
// planned before that epoch.
//
// # The data path
//
// The primary's bytes go from the socket straight into the tail of the
// stream's last block (Fill), are scanned in place for REPLCONF GETACK and
// MULTI/EXEC, and are published up to the last whole command the scanner
// accepted; nothing unscanned reaches a replica. Each replica's cursor hands
// its writer slices of those same blocks, which it writes with writev: no
// payload is copied in user space on the way through. A TLS replica's
// writer hands the same slices to the tls.Conn, one Write each (writev
// needs the raw socket), so the only copy is the encryption's; a spilled
// snapshot goes to it through a buffer instead of sendfile. Snapshots are held in
// the same kind of blocks and sent the same way, or from a spilled file with
// sendfile.
//
// # Generations
//
// An upstream full resync starts a new generation: the history installs the
// new snapshot, resets the stream at its offset (every open cursor fails
// with replbuf.ErrReset) and forgets the spilled file; every replica of the
// old generation is disconnected and comes back for a sync of the new one.
// A partial resync (+CONTINUE) keeps the stream; a new replid from the
// primary makes the old one replid2, so replicas continue by partial resync
// after they reconnect. Clients, the configuration, the counters and the
// snapshots retired earlier (released once no replica reads them) survive
// both.
package proxy

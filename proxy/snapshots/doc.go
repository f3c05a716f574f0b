// Package snapshots carries out the snapshot work package history decides
// on: the history says what is needed (a fetch to run, a snapshot to write
// to dir, one to adopt) and a Keeper does it, then tells the history how it
// went. One Keeper per server.
//
// What it owns:
//
//   - The shared fetch (fetch.go): a full sync the history cannot serve
//     from a held snapshot joins the history's one fetch in flight, which
//     PlanFull or PlanBackup starts here; its attempts, the backoff between
//     them (the upstream link's rule, shared by every fetch: a failed
//     attempt of any fetch, or a replica's failed full sync, holds back the
//     next attempt of any other), when it is given up, its counting and its
//     one log line per failure. A filtered RDB (FetchFiltered) is
//     fetched for one replica and counted with the others.
//   - Where an arriving payload goes (payload.go), one rule for the main
//     link's full sync and a fetch: memory, or dir as it arrives, or
//     refused before it is read.
//   - The snapshot source (source.go, snapshot-from): every fetch, and the
//     proxy's own sync (a Seed, which the main link continues on the
//     primary), asked of a replica of the same primary or a peer proxy;
//     its failures counted by reason, logged once per cause, and the
//     primary asked instead under snapshot-from-fallback yes.
//   - Snapshots written to dir (spill.go, persist.go): spilled under
//     maxmemory-policy evict-snapshots, persisted for the stream log and
//     refreshed before the log stops covering them; adopted at start, and
//     the leftovers of earlier runs removed.
//
// The main link delivers its payloads and seeds here itself: a Keeper is
// upstream.Snapshots (PayloadStarted, PayloadFailed, Seed), handed to the
// link before Run; and each replica plans its full sync here, tells how it
// ended and gets a filtered RDB: a Keeper is downstream.Snapshots too
// (PlanFull, PlanBackup, FullSyncEnded, FetchFiltered). A payload that
// starts to arrive is signalled on PayloadStarts, which the server's
// monitor waits on. It reaches the link's side links only through Source,
// and the server only through Host, both declared here: it reads the
// server's memory and the stream log's extent, and tells it of the one
// change of the history's identity it makes, a seed's new generation
// (HistoryChanged), whose earlier replicas the server disconnects. It
// imports history, snapfile, replbuf and, for the interface the Keeper
// satisfies, upstream; nothing above them.
//
// # Goroutines
//
// Run runs the background work: each fetch, spill and persist on a
// goroutine of its own, started by the call that asked for it (PlanFull,
// Evict, Persist, Refresh) and ended by Run's context. Work asked for
// before Run starts with it; work asked for after Run ended, or after
// Close, is undone in the history at once (the fetch's waiters refused, the
// snapshot kept in memory). Run returns once every piece of work has
// returned; Close ends it and waits.
//
// A Seed runs on a goroutine of the work group too; Seed, and the Seed's
// Position, Begin and Abort, are called on the upstream link's goroutine.
// PayloadStarted and PayloadFailed run on the upstream link's goroutine,
// FetchFiltered on a replica's; Refresh is called by the monitor alone,
// which owns its schedule. Adopt and RemoveLeftovers run at start, before
// Run.
//
// # Locks
//
// Keeper.mu guards the work group and is a leaf: the history is called with
// it released, and no callback of Source or Host is made under it. The
// fetch backoff's mutex (fetchRetry.mu) is a leaf too.
package snapshots

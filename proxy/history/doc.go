// Package history owns what replproxy holds of its primary's replication
// history, and the lifecycle of all of it:
//
//   - the replication identity the proxy presents (replid, replid2,
//     second_repl_offset) and whether the stream holds the primary's bytes,
//     with the epoch that counts its changes;
//   - the stream (*replbuf.Stream), created by New and never replaced (Reset
//     starts a new generation of it), and the stream log it serves from when
//     memory no longer holds an offset (SetLog), with the generation the log
//     follows (LogFollows);
//   - the snapshots: the newest, the replaced ones not yet released
//     (retired), the newest when it lives on disk (a snapfile.File) and the
//     one being written there, and a main link's payload while it arrives;
//   - the one snapshot fetch in flight (a Fetch: who waits for it, where its
//     payload goes, how it ended) and why it was started (FetchReason),
//     including the proxy's own sync from the snapshot source (seed.go:
//     BeginAt starts the history at the source's position while its
//     snapshot arrives; Continues checks a later snapshot of the source's
//     against the history);
//   - the sync plans (PlanPartial, PlanFull, AttachFetched, FetchedPayload)
//     and why a replica gets a full sync (FullSyncReason); a backup's
//     (PlanBackup: a snapshot within a bound of the stream's end, else a
//     fetch) and a filtered sync's (PlanFiltered, AttachFiltered);
//   - eviction: the candidates it offers eviction.Plan, Evict, SpillDone,
//     ReleaseRetired; the snapshot on disk: PersistNewest, RefetchSpilled,
//     AdoptSpilled;
//   - the stream log's follower and its syncer (Follower, follower.go and the
//     follower_*.go files): what the log holds of the stream, how far it is
//     behind (Lag, in bytes and seconds), whether it is down and why, and
//     what happens when the disk is slower than the stream: past the memory
//     window the follower lets go of the stream's blocks and the log restarts
//     as a new generation (Restarts) rather than the upstream being read more
//     slowly (follower.go says why); the configuration it reads comes in as
//     FollowerConfig's functions.
//
// It decides; it does not start. A method that decides that background work
// is due records it and returns it, as eviction.Plan returns actions and
// etcd's raft returns Ready: PlanFull and RefetchSpilled return the Fetch to
// run, Evict and PersistNewest the snapshot to write to dir. The caller
// starts it after the history's lock is released, and hands it back
// (FetchNotStarted, SpillNotStarted) when it cannot, so that a record never
// outlives work that will not run. Install, BeginAt and ContinueAs return a
// Change (the new epoch, and whether the stream restarted or the replid
// changed), and the caller disconnects the replicas planned before it. The
// proxy's decisions about files (where an arriving payload goes) and its
// configuration stay out: a payload's destination comes in as a Payload,
// the counters it bumps as Counters. PlanBackup returns its Fetch as
// PlanFull does.
//
// # Goroutines
//
// The client goroutines plan (PlanPartial, PlanFull, AttachFetched,
// FetchedPayload, LeaveFetch, and PlanBackup, PlanFiltered, AttachFiltered);
// the upstream link's run goroutine installs
// what it learnt (Install, BeginAt, ContinueAs, PayloadArriving,
// PayloadEnded) and
// fills, publishes and discards the stream without the lock (its one
// producer); a fetch goroutine reports its fetch (FetchStarted, FetchEnded,
// FetchGaveUp, FetchWaiters); the stream log's follower records what it
// follows (LogFollows, AwaitHistory); a spill goroutine ends its write
// (SpillDone); the monitor evicts and persists (EvictionCandidates, Evict,
// ReleaseRetired, PersistNewest, RefetchSpilled); New, before Run, recovers
// (RecoverFrom, SetLog, AdoptSpilled); INFO, ROLE, MEMORY and /metrics read
// (Identity, Newest, HeldOffset, SnapshotBytes, SpilledSnapshot, Servable,
// the stream's figures). A Follower's Run is the follower's goroutine, and
// starts and joins the syncer's and, while the log resets as a new
// generation, the reset's (the follower watches its cursor meanwhile:
// Follower.reset); the package starts no other goroutine.
//
// # Lock
//
// One mutex, History.mu, guards every field under it. It is a leaf but for
// replbuf and the stream log: the only lock held while calling into replbuf
// (History.mu, then replbuf's Stream.mu, then Pool.mu) and into streamlog
// (History.mu, then the log's lock: the log's identity, bounds and a new
// reader, for a plan), and no lock of the proxy's is taken under it. It is
// never held together with the proxy's client registry lock. Nothing logs
// under it; the one file operation under it is opening the snapshot on disk
// for a full sync's plan (snapfile.File.Open, which does not block), so that
// the file the plan serves is the one recorded. A snapfile.File and a
// Fetch's channels and results, once closed, are read without it.
//
// A Follower calls the stream log with no lock of its own held, and records
// under History.mu alone which generation the log follows (LogFollows); its
// round lock (Follower.round) is a leaf that guards only how to end the
// current round, taken by the syncer and the follower, never across I/O;
// so is the lock of its lag marks (Follower.marks), written by the
// follower and read by INFO and /metrics, which take the stream's lock
// for Lag only after letting it go.
//
// # Generations
//
// An upstream full resync starts a new generation (Install): the new
// snapshot becomes the newest, the stream is reset at its offset (every open
// cursor fails with replbuf.ErrReset), the snapshot on disk is forgotten and
// the log stops serving until its follower holds the new generation; the
// caller disconnects every replica planned before the new epoch, and each
// comes back for a sync of the new generation. A partial resync (+CONTINUE)
// keeps the stream; a new replid from the primary (ContinueAs) makes the old
// one replid2, so replicas continue by partial resync after they reconnect.
// A position that moves between memory and the log carries its generation,
// so that a reader of one generation is never handed another's bytes.
package history

package proxy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// A history is what the proxy holds of the primary's replication history,
// and the one owner of its lifecycle:
//
//   - the replication identity the proxy presents (replid, replid2,
//     second_repl_offset) and whether the stream holds the primary's bytes;
//   - the stream, created here and never replaced (Reset starts a new
//     generation of it);
//   - the snapshots: the newest (current), the replaced ones not yet
//     released (retired), the newest when evicted to disk (spilled) and the
//     one being written there (spilling);
//   - the one snapshot fetch in flight;
//   - the sync plans: planPartial and planFull attach a replica's cursors;
//     install and continueAs take what the upstream link learnt; eviction
//     candidates, evict, spillDone and releaseRetired free memory.
//
// Callers: the client goroutines (planPartial, planFull, attachFetched,
// fetchedPayload, leaveFetch), the upstream link's run goroutine (install, continueAs,
// identity, payloadArriving, payloadEnded), the fetch goroutine (fetchStarted,
// fetchEnded, fetchGaveUp, fetchWaiters), the log follower (logFollows), a
// spill goroutine (spillDone), the monitor (the eviction
// methods, releaseRetired, and with the stream log persistNewest and
// refetchSpilled: snapshot_disk.go), New before Run (recoverFrom,
// adoptSpilled), INFO, ROLE and MEMORY (identity, newest, snapshotBytes,
// spilledSnapshot, stream figures).
//
// Lock: mu guards every field under it. It is the only proxy lock ever held
// while calling into replbuf (lock order: history.mu, then replbuf's
// Stream.mu, then Pool.mu), and no other proxy lock is taken under it: a
// method that decides to start background work (planFull and refetchSpilled
// a fetch, evict and persistNewest a write to dir) records it and returns
// it, and the caller starts it once mu is released, or undoes the record
// (fetchNotStarted, spillNotStarted) when the server no longer starts
// background work. It
// is never held together with the client registry's lock (registry.mu): install
// and continueAs return the new epoch, and the caller disconnects the
// replicas planned before it after the change, with neither lock held.
// Nothing logs under mu; the one file operation left under it is opening the
// spilled snapshot in planFull, so that the file the plan serves is the one
// recorded (the open does not block: O_NONBLOCK, and a non-regular file is
// refused).
//
// The stream is created by newHistory and never replaced; stream returns it.
// The upstream link, its one producer, fills, publishes and discards without
// mu, CONFIG SET sets its backlog size (setBacklogSize, under mu), and
// anyone may read its figures
// (Offset, Usage, Backlog); Attach, Reset and Close are the history's alone.
type history struct {
	st    *replbuf.Stream // set once; see the type's comment
	pool  *replbuf.Pool
	log   hclog.Logger
	stats *stats // atomics: eviction counters
	// disk is the stream log (durable.go), or nil with repl-log-size 0. Set
	// before Run; planPartial serves offsets memory no longer holds from it
	// (lock order: history.mu, then the log's).
	disk *streamlog.Log

	mu struct {
		sync.Mutex

		// The replication identity the proxy presents: the primary's.
		replID       string
		replID2      string
		secondOffset int64 // second_repl_offset; -1 when replID2 is cleared
		synced       bool  // the stream holds the primary's bytes (a sync completed)
		// recovered: this generation of the stream was recovered from the
		// stream log at start; a replica ahead of it may wait for the
		// stream (see planPartial). Cleared by install.
		recovered bool
		// changed is closed and replaced at every change of epoch, for
		// awaitHistory.
		changed chan struct{}
		// epoch counts the changes of identity (install, continueAs). A plan
		// carries the epoch it was made in, so that the caller of a change
		// disconnects exactly the replicas planned before it.
		epoch uint64

		snapshot *replbuf.Snapshot   // the newest complete or arriving snapshot, if any
		retired  []*replbuf.Snapshot // replaced snapshots, released once unread
		spilled  *snapfile.File      // the newest snapshot, when it lives on disk
		spilling *replbuf.Snapshot   // the snapshot being written to disk
		// unpersisted is the newest snapshot when writing it to disk for
		// the stream log failed: it stays in memory, not tried again.
		unpersisted *replbuf.Snapshot
		fetch       *fetch // the snapshot fetch in flight, if any
		// logGen is the stream generation the stream log continues, set by
		// the log follower (logFollows) once the log holds that generation's
		// bytes and cleared (0) whenever it stops following: the log serves
		// a plan only while logGen is the stream's generation, so that a
		// plan from the log and the generation it is made for are one
		// decision (a new generation, install, makes it stale at once).
		logGen uint64
		// arriving is the payload of the main link's full sync while it
		// arrives, counted as snapshot memory until install or
		// payloadEnded; arrivingFile is the file in dir it is written to
		// as it arrives, or nil (payload_disk.go).
		arriving     *replbuf.Snapshot
		arrivingFile *payloadFile
	}
}

// newHistory returns an empty history: a fresh replid, no snapshot, and a
// stream at offset 0 keeping backlogSize bytes.
func newHistory(pool *replbuf.Pool, backlogSize int64, st *stats, log hclog.Logger) *history {
	h := &history{
		st:    replbuf.NewStream(0, &replbuf.Config{BacklogSize: backlogSize, Pool: pool}),
		pool:  pool,
		log:   log,
		stats: st,
	}
	h.mu.replID = replid.New()
	h.mu.replID2 = replid.None
	h.mu.secondOffset = -1
	h.mu.changed = make(chan struct{})
	return h
}

// changedLocked tells awaitHistory's callers of a new epoch.
// REQUIRES: h.mu held.
func (h *history) changedLocked() {
	close(h.mu.changed)
	h.mu.changed = make(chan struct{})
}

// awaitHistory waits until the stream holds the primary's bytes and returns
// the identity then, or false when ctx ends first.
func (h *history) awaitHistory(ctx context.Context) (replIdentity, bool) {
	for {
		h.mu.Lock()
		id := replIdentity{h.mu.replID, h.mu.replID2, h.mu.secondOffset, h.mu.synced}
		ch := h.mu.changed
		h.mu.Unlock()
		if id.history {
			return id, true
		}
		select {
		case <-ctx.Done():
			return id, false
		case <-ch:
		}
	}
}

// recoverFrom starts the stream at last, under id, with what the stream log
// recovered at start: replicas continue from the log, and the upstream link
// asks for the bytes after last. Before Run only.
func (h *history) recoverFrom(id streamlog.Identity, last int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.replID, h.mu.replID2, h.mu.secondOffset = id.ReplID, id.ReplID2, id.SecondOffset
	h.mu.synced = true
	h.mu.recovered = true
	h.mu.epoch++
	h.changedLocked()
	h.st.Reset(last)
}

// logFollows records that the stream log holds the stream of generation gen
// and follows it (gen 0: it no longer does). It reports false, recording
// nothing, when the stream has moved to another generation meanwhile.
// The log follower's, and recovered's before Run.
func (h *history) logFollows(gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != 0 && gen != h.st.Generation() {
		h.mu.logGen = 0
		return false
	}
	h.mu.logGen = gen
	return true
}

// stream returns the stream, for its producer and its figures (see history).
func (h *history) stream() *replbuf.Stream { return h.st }

// setBacklogSize sets the stream's backlog size to what latest returns,
// read under mu, so that of several callers the last to get mu sets the
// value published last (CONFIG SET repl-backlog-size).
func (h *history) setBacklogSize(latest func() int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.SetBacklogSize(latest())
}

// replIdentity is the replication identity at one moment.
type replIdentity struct {
	replID, replID2 string
	secondOffset    int64
	history         bool
}

func (h *history) identity() replIdentity {
	h.mu.Lock()
	defer h.mu.Unlock()
	return replIdentity{h.mu.replID, h.mu.replID2, h.mu.secondOffset, h.mu.synced}
}

// epoch returns the current epoch: replicas planned in it share the
// history's offsets.
func (h *history) epoch() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.epoch
}

// newest returns the newest snapshot in memory, or nil.
func (h *history) newest() *replbuf.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.snapshot
}

// install makes sn, the payload of an upstream full sync, the newest snapshot
// and starts a new generation of the stream at its offset: the primary's
// bytes from offset+1 on, under sn's replid. Every open cursor fails with
// replbuf.ErrReset; the caller then disconnects the replicas planned before
// epoch. A payload written to dir as it arrived (payload_disk.go) becomes
// the snapshot on disk instead: memory held only a window of it.
func (h *history) install(sn *replbuf.Snapshot) (epoch uint64) {
	h.mu.Lock()
	var sp *snapfile.File
	if f := h.mu.arrivingFile; h.mu.arriving == sn && f != nil {
		if sp = f.spilled(); sp != nil && f.evict {
			// maxmemory sent it to dir: a spill, as evict's
			h.stats.evictedSnapshots.Add(1)
			h.stats.evictedBytes.Add(sn.Size())
		}
	}
	h.mu.arriving, h.mu.arrivingFile = nil, nil
	h.retireLocked(h.mu.snapshot)
	h.mu.snapshot = sn
	if sp != nil {
		h.mu.snapshot = nil
		h.retireLocked(sn) // released at once: a windowed snapshot has no readers
	}
	old := h.replaceSpilledLocked(sp)
	h.mu.replID = sn.ReplID()
	h.mu.replID2 = replid.None
	h.mu.secondOffset = -1
	h.mu.synced = true
	h.mu.recovered = false
	h.mu.epoch++
	h.changedLocked()
	epoch = h.mu.epoch
	h.st.Reset(sn.Offset())
	h.mu.Unlock()
	h.removeSpilled(old)
	return epoch
}

// payloadArriving records sn, a main link's payload from its header on, and
// the file it goes to (nil: memory only), so that snapshotBytes counts it.
func (h *history) payloadArriving(sn *replbuf.Snapshot, f *payloadFile) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.arriving, h.mu.arrivingFile = sn, f
}

// payloadEnded forgets sn, a payload that failed; the link releases it.
func (h *history) payloadEnded(sn *replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.arriving == sn {
		h.mu.arriving, h.mu.arrivingFile = nil, nil
	}
}

// continueAs takes the replid of an upstream +CONTINUE <replid>: when it is
// new, the old one moves to replid2, valid up to the next byte of the stream
// (PROTOCOL §5). changed reports that; the caller then disconnects the
// replicas planned before epoch, which reconnect and continue through
// replid2.
func (h *history) continueAs(newID string) (oldID string, secondOffset int64, epoch uint64, changed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if newID == "" || newID == h.mu.replID {
		return h.mu.replID, h.mu.secondOffset, h.mu.epoch, false
	}
	oldID = h.mu.replID
	h.mu.replID2 = oldID
	h.mu.secondOffset = h.st.Offset() + 1
	h.mu.replID = newID
	h.mu.epoch++
	h.changedLocked()
	return oldID, h.mu.secondOffset, h.mu.epoch, true
}

// matchesLocked is the one replid-match rule of a partial resync (PROTOCOL
// §4.2), for a replica asking for the bytes from next on and for a snapshot
// (next = its offset+1): replID is ours, or our replid2 up to
// second_repl_offset. REQUIRES: h.mu held.
func (h *history) matchesLocked(replID string, next int64) bool {
	return replID == h.mu.replID || (replID == h.mu.replID2 && next <= h.mu.secondOffset)
}

// servableLocked reports whether sn can start a full sync now.
// REQUIRES: h.mu held.
func (h *history) servableLocked(sn *replbuf.Snapshot) bool {
	if sn == nil || sn.State() == replbuf.SnapshotFailed {
		return false
	}
	return h.matchesLocked(sn.ReplID(), sn.Offset()+1)
}

// retireLocked puts a replaced snapshot aside; releaseRetired releases it
// once no replica reads it any more. REQUIRES: h.mu held.
func (h *history) retireLocked(sn *replbuf.Snapshot) {
	if sn != nil {
		h.mu.retired = append(h.mu.retired, sn)
	}
}

// replaceSpilledLocked makes sp the spilled snapshot and returns the
// previous record when its file is to be removed (by removeSpilled, after
// h.mu is released; a replica still sending it keeps its open descriptor).
// REQUIRES: h.mu held.
func (h *history) replaceSpilledLocked(sp *snapfile.File) (old *snapfile.File) {
	if prev := h.mu.spilled; prev != nil && (sp == nil || !os.SameFile(prev.Info, sp.Info)) {
		old = prev
	}
	h.mu.spilled = sp
	return old
}

// removeSpilled removes a replaced spilled file, if the name still refers
// to it (a spill that renamed a newer file into place meanwhile keeps it).
// REQUIRES: h.mu not held (file I/O and logging).
func (h *history) removeSpilled(old *snapfile.File) {
	if old == nil {
		return
	}
	if err := old.Remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.log.Warn("cannot remove the spilled snapshot", "path", old.Path(), "error", err)
	}
}

// close ends the stream: its cursors fail. Run calls it once every
// goroutine that used the history has stopped.
func (h *history) close() { h.st.Close(nil) }

// servable reports whether the history alone can serve replicas, with no
// primary: a sync with the primary has completed (the stream holds its bytes
// under its replid) and the backlog holds at least one byte. A returning
// replica whose offset lies in the backlog then continues by partial resync
// (planPartial serves it with the link down); a new replica still needs the
// link for its full sync (beginSync refuses it with -NOMASTERLINK). why says
// what is there, or what is missing. /readyz asks it when the upstream link
// is not up.
func (h *history) servable() (ok bool, why string) {
	h.mu.Lock()
	synced := h.mu.synced
	h.mu.Unlock()
	if !synced {
		return false, "no sync with the primary has completed"
	}
	first, histlen := h.st.Backlog()
	if h.disk != nil {
		if logFirst, _ := h.disk.Bounds(); logFirst < first {
			first, histlen = logFirst, histlen+first-logFirst
		}
	}
	if histlen == 0 {
		return false, "the backlog is empty"
	}
	return true, "partial resyncs from offset " + strconv.FormatInt(first, 10) + " to " + strconv.FormatInt(first+histlen, 10)
}

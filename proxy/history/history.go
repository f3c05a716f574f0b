package history

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// A History is the proxy's replication history: see the package doc for
// what it owns, who calls it and its lock.
type History struct {
	st   *replbuf.Stream // set once; see the type's comment
	pool *replbuf.Pool
	log  hclog.Logger
	// counters are the proxy's atomics the history bumps (evictions);
	// set once by New.
	counters Counters
	// disk is the stream log, or nil with repl-log-size 0. Set by SetLog
	// before Run; PlanPartial serves offsets memory no longer holds from it
	// (lock order: History.mu, then the log's).
	disk *streamlog.Log

	mu struct {
		sync.Mutex

		// The replication identity the proxy presents: the primary's.
		replID       string
		replID2      string
		secondOffset int64 // second_repl_offset; -1 when replID2 is cleared
		synced       bool  // the stream holds the primary's bytes (a sync completed)
		// changed is closed and replaced at every change of epoch, for
		// AwaitHistory.
		changed chan struct{}
		// epoch counts the changes of identity (Install, BeginAt,
		// ContinueAs: each returns a Change). A plan carries the epoch it
		// was made in, so that the caller of a change disconnects exactly
		// the replicas planned before it.
		epoch uint64

		snapshot *replbuf.Snapshot   // the newest complete or arriving snapshot, if any
		retired  []*replbuf.Snapshot // replaced snapshots, released once unread
		spilled  *snapfile.File      // the newest snapshot, when it lives on disk
		spilling *replbuf.Snapshot   // the snapshot being written to disk
		// unpersisted is the newest snapshot when writing it to disk for
		// the stream log failed: it stays in memory, not tried again.
		unpersisted *replbuf.Snapshot
		fetch       *Fetch // the snapshot fetch in flight, if any
		// logGen is the stream generation the stream log continues, set by
		// the log follower (LogFollows) once the log holds that generation's
		// bytes and cleared (0) whenever it stops following: the log serves
		// a plan only while logGen is the stream's generation, so that a
		// plan from the log and the generation it is made for are one
		// decision (a new generation, install, makes it stale at once).
		logGen uint64
		// logReady says the log follower is running rounds (not waiting
		// out a fault), so that it takes logPin within moments; logPin is
		// a cursor at a new generation's first byte, made by Install and
		// owned by whoever holds mu until the follower takes it (TakeLogPin):
		// right after a full sync the primary sends everything it buffered
		// meanwhile at once, megabytes within milliseconds, and without the
		// pin the backlog would let go of the first bytes before the
		// follower's goroutine ran, leaving the new snapshot's stream in
		// neither memory nor the log (a fetch, a fork, for its replicas).
		logReady bool
		logPin   *replbuf.Cursor
		// arriving is the payload of the main link's full sync while it
		// arrives, counted as snapshot memory until install or
		// PayloadEnded; arrivingFile is the file in dir it is written to
		// as it arrives, or nil (package snapshots).
		arriving     *replbuf.Snapshot
		arrivingFile Payload
	}
}

// Counters are the atomics the history bumps, owned by the proxy's
// statistics: every field is set.
type Counters struct {
	EvictedSnapshots, EvictedBytes *atomic.Int64
}

// New returns an empty history: a fresh replid, no snapshot, and a
// Stream at offset 0 keeping backlogSize bytes.
func New(pool *replbuf.Pool, backlogSize int64, counters Counters, log hclog.Logger) *History {
	h := &History{
		// Arrival times kept: each replica's delay (how old the bytes it
		// lacks are) is read from them.
		st:       replbuf.NewStream(0, &replbuf.Config{BacklogSize: backlogSize, Pool: pool, Arrivals: true}),
		pool:     pool,
		log:      log,
		counters: counters,
	}
	h.mu.replID = replid.New()
	h.mu.replID2 = replid.None
	h.mu.secondOffset = -1
	h.mu.changed = make(chan struct{})
	return h
}

// changedLocked tells AwaitHistory's callers of a new epoch.
// REQUIRES: h.mu held.
func (h *History) changedLocked() {
	close(h.mu.changed)
	h.mu.changed = make(chan struct{})
}

// AwaitHistory waits until the stream holds the primary's bytes and returns
// the identity then, or false when ctx ends first.
func (h *History) AwaitHistory(ctx context.Context) (Identity, bool) {
	for {
		h.mu.Lock()
		id := Identity{h.mu.replID, h.mu.replID2, h.mu.secondOffset, h.mu.synced}
		ch := h.mu.changed
		h.mu.Unlock()
		if id.History {
			return id, true
		}
		select {
		case <-ctx.Done():
			return id, false
		case <-ch:
		}
	}
}

// RecoverFrom starts the stream at last, under id, with what the stream log
// recovered at start: replicas continue from the log, and the upstream link
// asks for the bytes after last. Before Run only.
func (h *History) RecoverFrom(id streamlog.Identity, last int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.replID, h.mu.replID2, h.mu.secondOffset = id.ReplID, id.ReplID2, id.SecondOffset
	h.mu.synced = true
	h.mu.epoch++
	h.changedLocked()
	h.st.Reset(last)
}

// LogFollows records that the stream log holds the stream of generation gen
// and follows it (gen 0: it no longer does). It reports false, recording
// nothing, when the stream has moved to another generation meanwhile.
// The log follower's, and recovered's before Run.
func (h *History) LogFollows(gen uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != 0 && gen != h.st.Generation() {
		h.mu.logGen = 0
		return false
	}
	h.mu.logGen = gen
	return true
}

// SetLog makes l, the stream log recovered at start, the log the plans
// serve from when memory no longer holds an offset. Before Run only.
func (h *History) SetLog(l *streamlog.Log) { h.disk = l }

// Stream returns the stream, for its producer and its figures (see history).
func (h *History) Stream() *replbuf.Stream { return h.st }

// SetBacklogSize sets the stream's backlog size to what latest returns,
// read under mu, so that of several callers the last to get mu sets the
// value published last (CONFIG SET repl-backlog-size).
func (h *History) SetBacklogSize(latest func() int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.SetBacklogSize(latest())
}

// Identity is the replication identity at one moment.
type Identity struct {
	ReplID, ReplID2 string
	SecondOffset    int64 // second_repl_offset; -1 when ReplID2 is cleared
	History         bool  // the stream holds the primary's bytes (a sync completed)
}

// Identity returns the replication identity now.
func (h *History) Identity() Identity {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Identity{h.mu.replID, h.mu.replID2, h.mu.secondOffset, h.mu.synced}
}

// A Change is a change of the history's identity that the replicas planned
// before it cannot follow, as Install, BeginAt and ContinueAs return it: the
// caller acts on it once the history's lock is released, by disconnecting
// every replica planned before Epoch (for the reason Kind gives), which
// comes back for a sync of the history as it is now. The zero Change is
// none.
type Change struct {
	Epoch uint64     // the history's epoch from the change on
	Kind  ChangeKind // what changed
}

// ChangeKind is what a Change changed.
type ChangeKind int

const (
	// NoChange: ContinueAs of the replid in force; no replica is
	// disconnected.
	NoChange ChangeKind = iota
	// NewGeneration: the stream restarted at a new offset (Install,
	// BeginAt); every open cursor fails with replbuf.ErrReset.
	NewGeneration
	// NewReplID: the primary's replid changed (ContinueAs); the stream
	// goes on, and the old replid is replid2.
	NewReplID
)

// Epoch returns the current epoch: replicas planned in it share the
// history's offsets.
func (h *History) Epoch() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.epoch
}

// HeldOffset returns the offset of the snapshot a full sync would be
// served from now (PlanFull's: the newest in memory, else the one on disk,
// while the stream continues it), and false when there is none.
func (h *History) HeldOffset() (off int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if sn := h.mu.snapshot; h.servableLocked(sn) {
		return sn.Offset(), true
	}
	if sp := h.mu.spilled; sp != nil && h.mu.snapshot == nil && h.matchesLocked(sp.ReplID, sp.Offset+1) {
		return sp.Offset, true
	}
	return 0, false
}

// Newest returns the newest snapshot in memory, or nil.
func (h *History) Newest() *replbuf.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.snapshot
}

// Install makes sn, the payload of an upstream full sync, the newest snapshot
// and starts a new generation of the stream at its offset: the primary's
// bytes from offset+1 on, under sn's replid. Every open cursor fails with
// replbuf.ErrReset; the caller then disconnects the replicas planned before
// the Change (NewGeneration). A payload written to dir as it arrived (package snapshots) becomes
// the snapshot on disk instead: memory held only a window of it.
func (h *History) Install(sn *replbuf.Snapshot) Change {
	h.mu.Lock()
	var sp *snapfile.File
	if f := h.mu.arrivingFile; h.mu.arriving == sn && f != nil {
		if sp = f.Spilled(); sp != nil && f.Evicted() {
			// maxmemory sent it to dir: a spill, as evict's
			h.counters.EvictedSnapshots.Add(1)
			h.counters.EvictedBytes.Add(sn.Size())
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
	h.mu.epoch++
	h.changedLocked()
	c := Change{Epoch: h.mu.epoch, Kind: NewGeneration}
	h.st.Reset(sn.Offset())
	h.pinForLogLocked()
	h.mu.Unlock()
	h.removeSpilled(old)
	return c
}

// pinForLogLocked replaces logPin with a cursor at the stream's new
// generation's first byte, when a log follower runs (see logReady).
// REQUIRES: h.mu held.
func (h *History) pinForLogLocked() {
	if h.mu.logPin != nil {
		h.mu.logPin.Close()
		h.mu.logPin = nil
	}
	if h.disk == nil || !h.mu.logReady {
		return
	}
	if c, err := h.st.Attach(h.st.Offset() + 1); err == nil {
		h.mu.logPin = c
	}
}

// LogReady tells the history whether the log follower is running rounds
// (true) or waiting out a fault (false: a pin made now would hold the
// stream until it returns, so none is, and one not taken is dropped).
func (h *History) LogReady(ready bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.logReady = ready
	if !ready && h.mu.logPin != nil {
		h.mu.logPin.Close()
		h.mu.logPin = nil
	}
}

// TakeLogPin hands the log follower the cursor Install pinned at generation
// gen's first byte, or nil when there is none for gen (it is then closed).
// The caller owns it from here.
func (h *History) TakeLogPin(gen uint64) *replbuf.Cursor {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.mu.logPin
	h.mu.logPin = nil
	if c != nil && c.Generation() != gen {
		c.Close()
		return nil
	}
	return c
}

// PayloadArriving records sn, a main link's payload from its header on, and
// the file it goes to (nil: memory only), so that SnapshotBytes counts it.
func (h *History) PayloadArriving(sn *replbuf.Snapshot, f Payload) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.arriving, h.mu.arrivingFile = sn, f
}

// PayloadEnded forgets sn, a payload that failed; the link releases it.
func (h *History) PayloadEnded(sn *replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.arriving == sn {
		h.mu.arriving, h.mu.arrivingFile = nil, nil
	}
}

// ContinueAs takes the replid of an upstream +CONTINUE <replid>: when it is
// new, the old one moves to replid2, valid up to the next byte of the stream
// (PROTOCOL §5), and the Change is NewReplID: the caller then disconnects
// the replicas planned before it, which reconnect and continue through
// replid2. The replid in force, or none, changes nothing (NoChange).
func (h *History) ContinueAs(newID string) (oldID string, secondOffset int64, c Change) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if newID == "" || newID == h.mu.replID {
		return h.mu.replID, h.mu.secondOffset, Change{Epoch: h.mu.epoch}
	}
	oldID = h.mu.replID
	h.mu.replID2 = oldID
	h.mu.secondOffset = h.st.Offset() + 1
	h.mu.replID = newID
	h.mu.epoch++
	h.changedLocked()
	return oldID, h.mu.secondOffset, Change{Epoch: h.mu.epoch, Kind: NewReplID}
}

// matchesLocked is the one replid-match rule of a partial resync (PROTOCOL
// §4.2), for a replica asking for the bytes from next on and for a snapshot
// (next = its offset+1): replID is ours, or our replid2 up to
// second_repl_offset. REQUIRES: h.mu held.
func (h *History) matchesLocked(replID string, next int64) bool {
	return replID == h.mu.replID || (replID == h.mu.replID2 && next <= h.mu.secondOffset)
}

// servableLocked reports whether sn can start a full sync now.
// REQUIRES: h.mu held.
func (h *History) servableLocked(sn *replbuf.Snapshot) bool {
	if sn == nil || sn.State() == replbuf.SnapshotFailed {
		return false
	}
	return h.matchesLocked(sn.ReplID(), sn.Offset()+1)
}

// retireLocked puts a replaced snapshot aside; ReleaseRetired releases it
// once no replica reads it any more. REQUIRES: h.mu held.
func (h *History) retireLocked(sn *replbuf.Snapshot) {
	if sn != nil {
		h.mu.retired = append(h.mu.retired, sn)
	}
}

// replaceSpilledLocked makes sp the spilled snapshot and returns the
// previous record when its file is to be removed (by removeSpilled, after
// h.mu is released; a replica still sending it keeps its open descriptor).
// REQUIRES: h.mu held.
func (h *History) replaceSpilledLocked(sp *snapfile.File) (old *snapfile.File) {
	if prev := h.mu.spilled; prev != nil && (sp == nil || !os.SameFile(prev.Info, sp.Info)) {
		old = prev
	}
	h.mu.spilled = sp
	return old
}

// removeSpilled removes a replaced spilled file, if the name still refers
// to it (a spill that renamed a newer file into place meanwhile keeps it).
// REQUIRES: h.mu not held (file I/O and logging).
func (h *History) removeSpilled(old *snapfile.File) {
	if old == nil {
		return
	}
	if err := old.Remove(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.log.Warn("cannot remove the spilled snapshot", "path", old.Path(), "error", err)
	}
}

// Close ends the stream: its cursors fail. Run calls it once every
// goroutine that used the history has stopped.
func (h *History) Close() { h.st.Close(nil) }

// Servable reports whether the history alone can serve replicas, with no
// primary: a sync with the primary has completed (the stream holds its bytes
// under its replid) and the backlog holds at least one byte. A returning
// replica whose offset lies in the backlog then continues by partial resync
// (PlanPartial serves it with the link down); a new replica still needs the
// link for its full sync (downstream.Accept refuses it with -NOMASTERLINK). why says
// what is there, or what is missing. /readyz asks it when the upstream link
// is not up.
func (h *History) Servable() (ok bool, why string) {
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

// InFlight returns the snapshot fetch in flight, if any, and how many
// replicas wait for it.
func (h *History) InFlight() (f *Fetch, waiters int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.fetch == nil {
		return nil, 0
	}
	return h.mu.fetch, h.mu.fetch.waiters
}

// Retire puts sn aside as replaced (released once no replica reads it),
// and forgets it as the newest if it was: the next full sync then needs
// another snapshot. With forgetDisk the snapshot on disk is forgotten too
// (its file stays). For tests that need a full sync to fetch.
func (h *History) Retire(sn *replbuf.Snapshot, forgetDisk bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.retireLocked(sn)
	if h.mu.snapshot == sn {
		h.mu.snapshot = nil
	}
	if forgetDisk {
		h.mu.spilled = nil
	}
}

// SetNewest makes sn, a complete snapshot of the stream's replid, the
// Newest, retiring the one before, as a fetch's start does. For tests that
// need a given snapshot in place.
func (h *History) SetNewest(sn *replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.retireLocked(h.mu.snapshot)
	h.mu.snapshot = sn
}

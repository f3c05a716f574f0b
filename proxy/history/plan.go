package history

import (
	"errors"
	"fmt"
	"os"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// A Plan is how a replica will be served, decided under the history's lock.
// The replica's connection owns what it holds (Reader, File, Cursor,
// FromLog): it closes them, and leaves Fetch (LeaveFetch) once it ends.
type Plan struct {
	Partial  bool
	ReplID   string
	Offset   int64             // the +FULLRESYNC offset (full syncs)
	Snapshot *replbuf.Snapshot // full: the snapshot to send, or nil when fetching
	Reader   *replbuf.Cursor   // full: its reader, taken with the plan so it cannot be released meanwhile
	Spilled  *snapfile.File    // full: the snapshot file to send instead
	File     *os.File          // full: that file, opened with the plan so it cannot be removed meanwhile
	Fetch    *Fetch            // full: the fetch to wait for
	Cursor   *replbuf.Cursor   // the stream from the first byte the replica needs
	FromLog  *streamlog.Reader // the stream log from that byte, when memory no longer holds it (Cursor nil)
	Gen      uint64            // the stream's generation when planned (for FromLog's move to memory); 0 for a plan still waiting for its fetch
	Epoch    uint64            // the history's epoch when planned (see history.mu.epoch)
}

// ErrShuttingDown refuses a full sync that would need a fetch once the
// server has stopped starting background work.
var ErrShuttingDown = errors.New("replproxy is shutting down")

// PlanPartial checks PROTOCOL §4.2: the replid is ours (or our replid2 up to
// second_repl_offset) and the offset lies in the backlog. It attaches the
// cursor under the lock, so no reset or trim can come in between. refused
// is PartialAccepted, or why the replica needs a full sync.
func (h *History) PlanPartial(replID string, off int64, legacy bool) (plan Plan, refused FullSyncReason) {
	// Anything but a replid as Redis makes them, or an offset out of
	// bounds, is a request for a full sync, as "?" is: never an error, which
	// would stop a replica for good.
	if legacy || !replid.Valid(replID) || off < 0 || off > replid.MaxOffset {
		return Plan{}, FullSyncRequested
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.mu.synced:
		return Plan{}, FullSyncNoHistory
	case !h.matchesLocked(replID, off):
		return Plan{}, FullSyncReplIDMismatch
	case off > h.st.Offset()+1+maxAhead:
		return Plan{}, FullSyncOffsetOutOfRange
	}
	plan = Plan{Partial: true, ReplID: h.mu.replID, Epoch: h.mu.epoch, Gen: h.st.Generation()}
	cur, err := h.st.Attach(off)
	if err == nil {
		plan.Cursor = cur
		return plan, PartialAccepted
	}
	if plan.FromLog = h.logReaderLocked(replID, off); plan.FromLog != nil {
		return plan, PartialAccepted
	}
	return Plan{}, FullSyncOffsetOutOfRange
}

// maxAhead is how far ahead of the stream's end a replica asking for our
// replid may be and still wait for the stream to reach its offset, rather
// than take a full sync as Redis would give it: bytes it received before a
// crash and the log had not kept, or from the primary or another proxy a
// moment ahead of this one (a replica moved here, or back here after a
// restart). Under the same replid the bytes it has are the bytes the stream
// will bring (a replid names one history), and a change of replid closes
// the replicas planned before it, so one waiting past a failover's switch
// reconnects and is judged again. Further ahead is another history's.
const maxAhead = 64 << 20

// LogReaderAt returns a reader of the stream log from the position (gen,
// off) of a replica's cursor, or nil when the log does not hold it: the log
// must follow that very generation of the stream, which must still be the
// stream's (an upstream full sync may have started another, even under the
// same replid and over the same offsets, before its replicas are
// disconnected). Within the generation the current replid names its bytes.
func (h *History) LogReaderAt(gen uint64, off int64) *streamlog.Reader {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.st.Generation() {
		return nil
	}
	return h.logReaderLocked(h.mu.replID, off)
}

// logReaderLocked returns a reader of the stream log from off, when the log
// holds it under a replid that lets replID continue there, or nil. Only a
// log that follows the stream's current generation serves: after an
// upstream full sync the log still holds the old generation's bytes (under
// the same replid, when the primary kept it) until the follower resets it,
// and a replica told +CONTINUE from them would be dropped at that reset
// with nothing to continue into.
// REQUIRES: h.mu held.
func (h *History) logReaderLocked(replID string, off int64) *streamlog.Reader {
	if h.disk == nil || h.mu.logGen == 0 || h.mu.logGen != h.st.Generation() {
		return nil
	}
	id := h.disk.Identity()
	if replID != id.ReplID && (replID != id.ReplID2 || off > id.SecondOffset) {
		return nil
	}
	rd, err := h.disk.NewReader(off)
	if err != nil {
		return nil
	}
	return rd
}

// PlanFull picks the newest servable snapshot and pins the stream from just
// after it (for a snapshot on disk, from the stream log when memory no longer
// holds it); without one, it joins the one snapshot fetch, recording a new
// one if none is in flight. start is that new fetch, for the caller to run
// once h.mu is released (History.mu is a leaf: nothing is started under
// it); a caller that cannot start it calls FetchNotStarted.
func (h *History) PlanFull() (plan Plan, start *Fetch) {
	plan, start, unservable, _ := h.planFullSince(-1, FetchReplicaNeeded)
	if unservable != nil {
		h.log.Warn("spilled snapshot not served: fetching a new one", "error", unservable)
	}
	return plan, start
}

// ErrBackupFetchBehind refuses a backup (PlanBackup) while the fetch in
// flight started from further behind the stream's end than the backup may
// be, and no other can start before it ends (one fetch at a time, so that
// the primary forks at most once for everyone waiting).
var ErrBackupFetchBehind = errors.New("a snapshot fetch from further behind than backup-max-stream-since is in progress; try again when it ends")

// PlanBackup plans the full sync of a backup client (REPLCONF rdb-only 1),
// which gets a snapshot and none of the stream after it, so that only a
// snapshot at most maxSince bytes of stream behind the stream's end serves:
// the newest held one if it is that fresh, else the fetch in flight if it
// has not started yet (the primary's snapshot will be at least as new as
// the stream's end now) or started from close enough, else a new fetch
// (start, reason FetchBackup), as a backup taken from the primary costs it
// one fork. A held snapshot further behind is never served to it. err is
// ErrBackupFetchBehind when the one fetch in flight is too old to join.
func (h *History) PlanBackup(maxSince int64) (plan Plan, start *Fetch, err error) {
	plan, start, unservable, err := h.planFullSince(maxSince, FetchBackup)
	if unservable != nil {
		h.log.Warn("spilled snapshot not served: fetching a new one", "error", unservable)
	}
	return plan, start, err
}

// planFullSince is PlanFull (maxSince < 0), and PlanBackup with maxSince >=
// 0: then a snapshot (held or in flight) serves only if at most maxSince
// bytes of stream came after it, and a new fetch has reason. It takes h.mu
// for the whole plan; the caller logs after. unservable is why a
// spilled file was refused (and forgotten), for the caller to log.
func (h *History) planFullSince(maxSince int64, reason FetchReason) (plan Plan, start *Fetch, unservable, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.st.Offset()
	fresh := func(off int64) bool { return maxSince < 0 || end-off <= maxSince }
	if sn := h.mu.snapshot; h.servableLocked(sn) && fresh(sn.Offset()) {
		plan := Plan{ReplID: h.mu.replID, Offset: sn.Offset(), Snapshot: sn, Epoch: h.mu.epoch}
		if err := h.attachSnapshotLocked(&plan); err == nil {
			return plan, nil, nil, nil
		}
	}
	if sp := h.mu.spilled; sp != nil && h.mu.snapshot == nil && h.matchesLocked(sp.ReplID, sp.Offset+1) && fresh(sp.Offset) {
		// The stream after the file: from memory, else from the stream log
		// (a snapshot on disk outlives the memory backlog, and a restart).
		plan := Plan{ReplID: h.mu.replID, Offset: sp.Offset, Spilled: sp, Epoch: h.mu.epoch, Gen: h.st.Generation()}
		if cur, err := h.st.Attach(sp.Offset + 1); err == nil {
			plan.Cursor = cur
		} else {
			plan.FromLog = h.logReaderLocked(sp.ReplID, sp.Offset+1)
		}
		if plan.Cursor != nil || plan.FromLog != nil {
			f, err := sp.Open()
			if err == nil {
				plan.File = f
				return plan, nil, nil, nil
			}
			// Forgotten, not removed: the name may hold someone else's file.
			unservable = err
			h.mu.spilled = nil
			if plan.Cursor != nil {
				plan.Cursor.Close()
			}
			if plan.FromLog != nil {
				plan.FromLog.Close()
			}
		}
	}
	if f := h.mu.fetch; f != nil && f.sn != nil && !fresh(f.sn.Offset()) {
		// Started (its +FULLRESYNC set f.sn) from too far behind: waiting
		// for it would serve what this plan refused in a held snapshot.
		return Plan{}, nil, unservable, ErrBackupFetchBehind
	}
	if h.mu.fetch == nil {
		start = &Fetch{ready: make(chan struct{}), reason: reason}
		h.mu.fetch = start
	}
	h.mu.fetch.waiters++ // until leaveFetch
	return Plan{ReplID: h.mu.replID, Fetch: h.mu.fetch, Epoch: h.mu.epoch}, start, unservable, nil
}

// FetchNotStarted undoes a fetch that PlanFull or RefetchSpilled recorded
// and the caller could not start (the server no longer starts background
// work): it is no longer the one in flight, and every replica that joined it
// meanwhile fails with ErrShuttingDown, as the one that recorded it does.
func (h *History) FetchNotStarted(f *Fetch) { h.FetchGaveUp(f, ErrShuttingDown) }

// AttachFetched completes plan, which joined fetch f, once f has started:
// a reader of its snapshot and the stream from just after its offset (see
// attachSnapshotLocked), if the snapshot still matches the stream. For a
// payload that may go to dir (f.file), only the stream: the payload comes
// once it has ended (FetchedPayload).
func (h *History) AttachFetched(f *Fetch, plan *Plan) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.servableLocked(f.sn) {
		return errors.New("fetched snapshot no longer matches the stream")
	}
	if f.file != nil {
		plan.Offset = f.sn.Offset()
		if err := h.attachStreamLocked(plan, f.sn.ReplID(), f.sn.Offset()+1); err != nil {
			return fmt.Errorf("fetched snapshot at offset %d: %w", f.sn.Offset(), err)
		}
		return nil
	}
	plan.Snapshot, plan.Offset = f.sn, f.sn.Offset()
	if err := h.attachSnapshotLocked(plan); err != nil {
		plan.Snapshot = nil
		return fmt.Errorf("fetched snapshot at offset %d: %w", f.sn.Offset(), err)
	}
	return nil
}

// attachSnapshotLocked takes a reader of plan.Snapshot, a snapshot in
// memory, and the stream after it: a cursor when memory still holds its
// offset+1, else a reader of the stream log from there. The log holds what
// memory no longer does: a snapshot that took longer to arrive than the
// backlog lasts under writes stays servable while the log covers it, as a
// direct replica's output buffer would hold those bytes, instead of costing
// the primary another fork.
// REQUIRES: h.mu held.
func (h *History) attachSnapshotLocked(plan *Plan) error {
	sn := plan.Snapshot
	rd, err := sn.NewReader()
	if err != nil {
		return err
	}
	if err := h.attachStreamLocked(plan, sn.ReplID(), sn.Offset()+1); err != nil {
		rd.Close()
		return err
	}
	plan.Reader = rd
	return nil
}

// attachStreamLocked pins, for plan, the stream from next on under replID:
// a cursor when memory still holds next, else a reader of the stream log.
// REQUIRES: h.mu held.
func (h *History) attachStreamLocked(plan *Plan, replID string, next int64) error {
	plan.Gen = h.st.Generation()
	cur, err := h.st.Attach(next)
	if err == nil {
		plan.Cursor = cur
		return nil
	}
	if lr := h.logReaderLocked(replID, next); lr != nil {
		plan.FromLog = lr
		return nil
	}
	return err
}

// FetchedPayload completes plan, whose stream AttachFetched pinned, with
// the payload of f, a fetch that may have gone to dir, once it ended: the
// file (opened now, so that it cannot be removed meanwhile) or a reader of
// the snapshot, complete in memory.
func (h *History) FetchedPayload(f *Fetch, plan *Plan) error {
	if sp := f.spilled; sp != nil {
		file, err := sp.Open() // a file operation, outside h.mu
		if err != nil {
			return fmt.Errorf("fetched snapshot on disk: %w", err)
		}
		plan.Spilled, plan.File = sp, file
		return nil
	}
	// The reader under h.mu, as attachSnapshotLocked's: a snapshot replaced
	// meanwhile is released only once unread.
	h.mu.Lock()
	defer h.mu.Unlock()
	rd, err := f.sn.NewReader()
	if err != nil {
		return fmt.Errorf("fetched snapshot: %w", err)
	}
	plan.Snapshot, plan.Reader = f.sn, rd
	return nil
}

// LeaveFetch uncounts a replica whose plan joined f, once it has ended.
func (h *History) LeaveFetch(f *Fetch) {
	if f == nil {
		return
	}
	h.mu.Lock()
	f.waiters--
	h.mu.Unlock()
}

// FetchWaiters is how many replicas still wait for f.
func (h *History) FetchWaiters(f *Fetch) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f.waiters
}

// FetchStarted makes sn, the snapshot f's +FULLRESYNC announced, the newest
// and hands it to f's waiters, if the primary answered with the replid the
// Stream has. A payload that may go to dir (pf not nil) becomes the newest
// only once it has ended (FetchEnded); until then it is counted as arriving,
// and the waiters only pin the stream after it.
func (h *History) FetchStarted(f *Fetch, sn *replbuf.Snapshot, pf Payload) error {
	h.mu.Lock()
	// Equality, not matchesLocked: the primary's answer is its current
	// replid, which must be the stream's current one for the snapshot to
	// continue into it; replid2 is only ever an older name.
	if sn.ReplID() != h.mu.replID {
		err := fmt.Errorf("primary answered with replid %s, the stream has %s", sn.ReplID(), h.mu.replID)
		h.mu.Unlock()
		return err
	}
	if pf != nil {
		f.sn, f.file, f.done, f.arriving, f.gen = sn, pf, make(chan struct{}), true, h.st.Generation()
		close(f.ready)
		h.mu.Unlock()
		return nil
	}
	h.retireLocked(h.mu.snapshot)
	h.mu.snapshot = sn
	old := h.replaceSpilledLocked(nil)
	f.sn = sn
	close(f.ready)
	h.mu.Unlock()
	h.removeSpilled(old)
	return nil
}

// FetchEnded ends a fetch that started: f is no longer the one in flight,
// and its snapshot, should it have failed (err), is no longer the newest.
// A payload that may have gone to dir becomes the newest snapshot now, on
// disk or in memory, as the main link's install does, and its waiters are
// told (f.done).
func (h *History) FetchEnded(f *Fetch, err error) {
	if f.file != nil {
		h.fetchedEnded(f, err)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.fetch == f {
		h.mu.fetch = nil
	}
	f.unpinLocked()
	if err != nil && h.mu.snapshot == f.sn {
		h.mu.snapshot = nil
		h.retireLocked(f.sn)
	}
}

// FetchGaveUp ends a fetch that never started: its waiters fail with err.
func (h *History) FetchGaveUp(f *Fetch, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.fetch == f {
		h.mu.fetch = nil
	}
	f.unpinLocked()
	f.err = err
	close(f.ready)
}

// unpinLocked lets go of the stream a seed held (BeginAt) once it ended.
// REQUIRES: History.mu held.
func (f *Fetch) unpinLocked() {
	if f.pin != nil {
		f.pin.Close()
		f.pin = nil
	}
}

// errFetchedStale refuses a fetched payload that ended after the stream
// moved to another generation or replid (an upstream full sync meanwhile).
var errFetchedStale = errors.New("fetched snapshot no longer matches the stream")

// fetchedEnded is FetchEnded for a payload that may have gone to dir
// (f.file): it is the newest snapshot from now on, if it arrived whole and
// still matches the stream; its waiters then get it (FetchedPayload).
func (h *History) fetchedEnded(f *Fetch, err error) {
	sn, sp := f.sn, f.file.Spilled()
	h.mu.Lock()
	if h.mu.fetch == f {
		h.mu.fetch = nil
	}
	f.unpinLocked()
	f.arriving = false
	if err == nil && (h.st.Generation() != f.gen || !h.matchesLocked(sn.ReplID(), sn.Offset()+1)) {
		err = errFetchedStale
	}
	var old *snapfile.File
	switch {
	case err != nil:
		h.retireLocked(sn)
		// A file committed for a payload nobody will be served: removed,
		// if the name still holds it.
		old, sp = sp, nil
	case sp != nil:
		if f.file.Evicted() { // maxmemory sent it to dir: a spill, as evict's
			h.counters.EvictedSnapshots.Add(1)
			h.counters.EvictedBytes.Add(sn.Size())
		}
		h.retireLocked(h.mu.snapshot)
		h.mu.snapshot = nil
		h.retireLocked(sn) // released once unread: a windowed snapshot has no readers
		old = h.replaceSpilledLocked(sp)
	default: // whole in memory
		h.retireLocked(h.mu.snapshot)
		h.mu.snapshot = sn
		old = h.replaceSpilledLocked(nil)
	}
	f.spilled, f.doneErr = sp, err
	close(f.done)
	h.mu.Unlock()
	h.removeSpilled(old)
}

// PlanFiltered plans the full sync of a replica that asked for a filtered
// RDB (REPLCONF rdb-filter-only): no snapshot the proxy holds is one, so the
// plan holds only the identity and epoch it is made in; the replica's writer
// gets the filtered RDB from the primary and then AttachFiltered.
func (h *History) PlanFiltered() Plan {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Plan{ReplID: h.mu.replID, Epoch: h.mu.epoch}
}

// AttachFiltered completes plan, a PlanFiltered, with sn, the filtered RDB
// the primary made (a snapshot of its own, not the history's), and, unless
// rdbOnly, the stream from just after its offset, which may lie ahead of the
// stream's end (the primary's offset at its fork): the cursor then starts
// when the stream reaches it. sn must continue the stream's replid.
func (h *History) AttachFiltered(sn *replbuf.Snapshot, plan *Plan, rdbOnly bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.matchesLocked(sn.ReplID(), sn.Offset()+1) {
		return fmt.Errorf("filtered snapshot of replid %s does not continue the stream's (%s)", sn.ReplID(), h.mu.replID)
	}
	plan.ReplID, plan.Offset = sn.ReplID(), sn.Offset()
	if !rdbOnly {
		if err := h.attachStreamLocked(plan, sn.ReplID(), sn.Offset()+1); err != nil {
			return fmt.Errorf("filtered snapshot at offset %d: %w", sn.Offset(), err)
		}
	}
	rd, err := sn.NewReader()
	if err != nil {
		if plan.Cursor != nil {
			plan.Cursor.Close()
			plan.Cursor = nil
		}
		if plan.FromLog != nil {
			plan.FromLog.Close()
			plan.FromLog = nil
		}
		return err
	}
	plan.Snapshot, plan.Reader = sn, rd
	return nil
}

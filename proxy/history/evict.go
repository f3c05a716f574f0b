package history

import (
	"strconv"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
)

// heldSnapshotsLocked lists the snapshots in memory, newest first.
// REQUIRES: h.mu held.
func (h *History) heldSnapshotsLocked() []*replbuf.Snapshot {
	var list []*replbuf.Snapshot
	if h.mu.snapshot != nil {
		list = append(list, h.mu.snapshot)
	}
	list = append(list, h.mu.retired...)
	return list
}

// SnapshotBytes is what the snapshots take: in memory, at usable sizes, and
// on disk (the spilled one).
func (h *History) SnapshotBytes() (inMemory, onDisk int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, sn := range h.heldSnapshotsLocked() {
		inMemory += sn.Usage().Allocated()
	}
	if sn := h.mu.arriving; sn != nil {
		inMemory += sn.Usage().Allocated()
	}
	if f := h.mu.fetch; f != nil && f.arriving {
		inMemory += f.sn.Usage().Allocated() // a fetched payload not yet the newest (fetch.file)
	}
	if sp := h.mu.spilled; sp != nil {
		onDisk = sp.Size
	}
	return inMemory, onDisk
}

// EvictionCandidates describes the snapshots held in memory.
func (h *History) EvictionCandidates() []eviction.Candidate {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cands []eviction.Candidate
	for _, sn := range h.heldSnapshotsLocked() {
		cands = append(cands, eviction.Candidate{
			ID:     SnapshotID(sn),
			Bytes:  sn.Usage().Allocated(),
			Busy:   sn.State() == replbuf.SnapshotBuilding || sn.Readers() > 0 || sn == h.mu.spilling,
			Newest: sn == h.mu.snapshot,
		})
	}
	return cands
}

// SnapshotID names a snapshot for eviction.Candidate and Evict: its
// replid, offset and creation time.
func SnapshotID(sn *replbuf.Snapshot) string {
	return sn.ReplID() + ":" + strconv.FormatInt(sn.Offset(), 10) + ":" + strconv.FormatInt(sn.Created().UnixNano(), 10)
}

// Evict evicts the snapshot with that id: a retired one nobody reads is
// released; the newest is returned as spill, recorded as being written, for
// the caller to write to disk in the background once h.mu is released
// (ending with SpillDone), or to hand back with SpillNotStarted.
func (h *History) Evict(id string) (spill *replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, sn := range h.mu.retired {
		if SnapshotID(sn) == id && sn.Readers() == 0 {
			h.mu.retired = append(h.mu.retired[:i], h.mu.retired[i+1:]...)
			h.countEviction(sn)
			sn.Release()
			h.pool.DropFree()
			return nil
		}
	}
	sn := h.mu.snapshot
	if sn == nil || SnapshotID(sn) != id || h.mu.spilling != nil {
		return nil
	}
	h.mu.spilling = sn
	return sn
}

// SpillNotStarted undoes the record of a write to disk that evict or
// PersistNewest returned and the caller could not start.
func (h *History) SpillNotStarted(sn *replbuf.Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.spilling == sn {
		h.mu.spilling = nil
	}
}

// countEviction counts an evicted snapshot (atomics only).
func (h *History) countEviction(sn *replbuf.Snapshot) {
	h.counters.EvictedSnapshots.Add(1)
	h.counters.EvictedBytes.Add(sn.Usage().Allocated())
}

// SpillDone ends the write of sn to dir that evict (evicted) or
// PersistNewest (not evicted) started: file is the file written, or err why
// it could not be. Unless sn was replaced meanwhile, it leaves memory
// (retired: released once no replica reads it) and, when written, is served
// from the file from now on. Only maxmemory's spills count as evictions. A
// spill that failed drops the snapshot; a persist that failed keeps it in
// memory, as without the stream log, and is not tried again for it.
func (h *History) SpillDone(sn *replbuf.Snapshot, dir string, file *snapfile.File, err error, evicted bool) {
	h.mu.Lock()
	h.mu.spilling = nil
	if h.mu.snapshot != sn {
		h.mu.Unlock()
		if err == nil {
			// Replaced meanwhile: the file serves nobody.
			file.Remove()
		}
		return
	}
	if err != nil && !evicted {
		h.mu.unpersisted = sn
		h.mu.Unlock()
		h.log.Warn("snapshot not written to disk: kept in memory", "dir", dir, "error", err, "snapshot-bytes", sn.Size())
		return
	}
	h.mu.snapshot = nil
	if evicted {
		h.countEviction(sn)
	}
	h.retireLocked(sn)
	if err != nil {
		h.mu.Unlock()
		h.log.Warn("snapshot dropped: cannot spill it to dir", "dir", dir, "error", err, "snapshot-bytes", sn.Size())
		return
	}
	sp := file
	old := h.replaceSpilledLocked(sp)
	h.mu.Unlock()
	h.removeSpilled(old)
	msg := "snapshot written to disk"
	if evicted {
		msg = "snapshot spilled to disk"
	}
	h.log.Info(msg, "path", sp.Path(), "replid", sp.ReplID, "offset", sp.Offset, "snapshot-bytes", sn.Size())
}

// PersistNewest returns the newest snapshot, recorded as being written,
// once it is complete, when no other write to dir runs (spills are
// serialised by h.mu.spilling) and no earlier write of it failed. The caller
// writes it in the background once h.mu is released, to end with
// SpillDone(..., false), or hands it back with SpillNotStarted.
func (h *History) PersistNewest() *replbuf.Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	sn := h.mu.snapshot
	if sn == nil || sn.State() != replbuf.SnapshotComplete || h.mu.spilling != nil || sn == h.mu.unpersisted {
		return nil
	}
	h.mu.spilling = sn
	return sn
}

// SpilledSnapshot returns the record of the snapshot on disk, or nil. The
// record is never changed once made: its fields may be read without h.mu.
func (h *History) SpilledSnapshot() *snapfile.File {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.spilled
}

// ReleaseRetired gives back the blocks of replaced snapshots nobody reads,
// and with dropFree (under maxmemory) the pool's free blocks with them.
func (h *History) ReleaseRetired(dropFree bool) {
	h.mu.Lock()
	var free []*replbuf.Snapshot
	kept := h.mu.retired[:0]
	for _, sn := range h.mu.retired {
		if sn.State() != replbuf.SnapshotBuilding && sn.Readers() == 0 {
			free = append(free, sn)
		} else {
			kept = append(kept, sn)
		}
	}
	clear(h.mu.retired[len(kept):])
	h.mu.retired = kept
	h.mu.Unlock()
	for _, sn := range free {
		sn.Release()
	}
	if len(free) > 0 && dropFree {
		// Under maxmemory, memory given up is given back, not kept as free blocks.
		h.pool.DropFree()
	}
}

package history

import (
	"fmt"

	"github.com/replproxy/replproxy/replid"
)

// A seed is the proxy's own sync from the snapshot source (snapshot-from):
// the history starts at the source's position while its snapshot arrives
// (BeginAt); a snapshot the source sends later is checked against the
// history before any of it is read (Continues).

// BeginAt starts a new generation of the stream at offset under replID, as
// Install does, for the proxy's own sync from the snapshot source (a seed):
// the primary continued the source's position (+CONTINUE), so the stream
// after it comes from the main link while the snapshot still arrives over
// f, a NewSeed, which becomes the fetch in flight: replicas that need a
// full sync join it, and it is ended as any fetch (FetchStarted once its
// payload's header arrived, then FetchEnded; FetchGaveUp if it fails
// first). Until it ends the stream after the snapshot is held, so that the
// snapshot stays servable however long its payload takes: by the stream
// log, which follows the new generation from its first byte, or, with the
// log off or down, by a pin in memory from offset+1. The snapshots
// held so far are of a history the primary no longer continues: they are
// forgotten, as at Install. The caller disconnects the replicas planned
// before the Change (NewGeneration). On the main link's goroutine, as
// Install.
func (h *History) BeginAt(f *Fetch, replID string, offset int64) Change {
	h.mu.Lock()
	h.mu.arriving, h.mu.arrivingFile = nil, nil
	h.retireLocked(h.mu.snapshot)
	h.mu.snapshot = nil
	old := h.replaceSpilledLocked(nil)
	h.mu.replID = replID
	h.mu.replID2 = replid.None
	h.mu.secondOffset = -1
	h.mu.synced = true
	h.mu.epoch++
	h.changedLocked()
	c := Change{Epoch: h.mu.epoch, Kind: NewGeneration}
	h.st.Reset(offset)
	h.pinForLogLocked()
	if h.disk == nil || !h.mu.logReady {
		// Without a log that follows the new generation from its first
		// byte, memory alone holds the stream the snapshot needs.
		if c, err := h.st.Attach(offset + 1); err == nil {
			f.pin = c
		}
	}
	h.mu.fetch = f
	h.mu.Unlock()
	h.removeSpilled(old)
	return c
}

// Continues checks that a snapshot at (replID, offset), fetched from the
// snapshot source, can start a full sync of this history: its replid is
// the stream's own (as FetchStarted requires), and the bytes after it are
// still held, in memory or the stream log, or yet to come within maxAhead
// (further ahead is another history's, as for a replica's PSYNC). The error
// is a *replid.NotContinued otherwise.
func (h *History) Continues(replID string, offset int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if replID != h.mu.replID {
		return &replid.NotContinued{Reason: "replid", Detail: fmt.Sprintf(
			"the snapshot source has replid %s, the stream %s", replID, h.mu.replID)}
	}
	if end := h.st.Offset(); offset > end+maxAhead {
		return &replid.NotContinued{Reason: "ahead", Detail: fmt.Sprintf(
			"the snapshot source is at offset %d, more than %d bytes past the stream's end (%d)", offset, maxAhead, end)}
	}
	if c, err := h.st.Attach(offset + 1); err == nil {
		c.Close()
		return nil
	}
	if lr := h.logReaderLocked(replID, offset+1); lr != nil {
		lr.Close()
		return nil
	}
	first, _ := h.st.Backlog()
	return &replid.NotContinued{Reason: "behind", Detail: fmt.Sprintf(
		"the snapshot source is at offset %d, before the stream's backlog (from %d)", offset, first)}
}

package history

import (
	"errors"
	"fmt"

	"github.com/replproxy/replproxy/proxy/snapfile"
)

// RefetchSpilled records a background fetch when the snapshot on disk is
// the newest, no fetch runs, and either the stream written since it (to
// logLast) reaches limit or the log (from logFirst) or the replid no longer
// continues it. It returns that fetch, for the caller to start once h.mu is
// released (or to undo with FetchNotStarted), and the snapshot it replaces;
// nil, nil when none is due.
func (h *History) RefetchSpilled(logFirst, logLast, limit int64) (start *Fetch, replaces *snapfile.File) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sp := h.mu.spilled
	if sp == nil || h.mu.snapshot != nil || h.mu.fetch != nil || h.mu.spilling != nil || !h.mu.synced {
		return nil, nil
	}
	if logLast-sp.Offset < limit && logFirst <= sp.Offset+1 && h.matchesLocked(sp.ReplID, sp.Offset+1) {
		return nil, nil
	}
	start = &Fetch{ready: make(chan struct{}), reason: FetchRefresh}
	h.mu.fetch = start
	return start, sp
}

// AdoptSpilled makes sp the spilled snapshot if the recovered stream, whose
// log holds logFirst to logLast, continues it: its replid matches at
// offset+1 and the log holds offset+1 (or ends at offset). Before Run only.
func (h *History) AdoptSpilled(sp *snapfile.File, logFirst, logLast int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.mu.synced:
		return errors.New("the stream log holds no history")
	case !h.matchesLocked(sp.ReplID, sp.Offset+1):
		return fmt.Errorf("replid %s at offset %d is not the stream log's (%s)", sp.ReplID, sp.Offset, h.mu.replID)
	case sp.Offset+1 < logFirst || sp.Offset > logLast:
		return fmt.Errorf("the stream log holds offsets %d to %d, not the stream after offset %d", logFirst, logLast, sp.Offset)
	}
	h.mu.spilled = sp
	return nil
}

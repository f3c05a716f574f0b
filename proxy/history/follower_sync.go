package history

import (
	"context"
	"fmt"
	"time"
)

// The stream log's syncer, under repl-log-fsync everysec: a goroutine of
// its own, which the follower's Run starts and joins (see the top of
// follower.go).

// syncLoop syncs the log under FsyncEverySec, once a SyncEvery at most
// and only after the follower appended, until ctx ends: an idle log is
// neither synced nor woken for, as Redis's everysec fsyncs only an AOF that
// grew; a sealed segment is synced at once. A failed sync makes the log's
// error sticky; the follower's round is ended with it, so that the follower
// stops the log now (see the top of follower.go).
func (f *Follower) syncLoop(ctx context.Context) {
	var last time.Time // when the last sync began
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		sealed := false
		select {
		case <-ctx.Done():
			return
		case <-f.dirty:
		case <-f.log.SealedReady():
			sealed = true
		}
		// The rest of the period since the last sync, unless a sealed
		// segment waits: synced now, here, so that the follower need not
		// sync it itself a few rolls later.
		if wait := time.Until(last.Add(f.cfg.SyncEvery)); !sealed && wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-f.log.SealedReady():
				t.Stop()
			}
		}
		// A mark per sync, whatever the follower does: while a write
		// holds it, the bytes published meanwhile get an age too.
		st := f.hist.Stream()
		f.marks.mark(st.Generation(), st.Offset(), time.Now())
		if f.cfg.Fsync() != FsyncEverySec || f.down.Load() {
			continue
		}
		last = time.Now()
		// An empty log (no identity yet) has nothing to sync.
		if err := f.log.Sync(); err != nil && f.log.Identity().ReplID != "" {
			f.endRound(fmt.Errorf("%w: %w", errSyncFailed, err))
		}
	}
}

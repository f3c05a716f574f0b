package snapshots

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/replbuf"
)

// PlanFull plans a full sync (History.PlanFull): from the newest servable
// snapshot, else from the one shared fetch, started here if the plan
// recorded a new one. A fetch that cannot start (the Keeper closed) is
// undone and the sync refused with history.ErrShuttingDown.
func (k *Keeper) PlanFull() (history.Plan, error) {
	plan, start := k.hist.PlanFull()
	return k.planned(plan, start)
}

// PlanBackup is PlanFull for a backup client (REPLCONF rdb-only 1): a held
// snapshot serves only within maxSince bytes of the stream's end
// (backup-max-stream-since), a fresher one is fetched otherwise
// (History.PlanBackup).
func (k *Keeper) PlanBackup(maxSince int64) (history.Plan, error) {
	plan, start, err := k.hist.PlanBackup(maxSince)
	if err != nil {
		return history.Plan{}, err
	}
	return k.planned(plan, start)
}

func (k *Keeper) planned(plan history.Plan, start *history.Fetch) (history.Plan, error) {
	if start != nil && !k.startFetch(start) {
		k.hist.LeaveFetch(start)
		return history.Plan{}, history.ErrShuttingDown
	}
	return plan, nil
}

// startFetch runs f on the work group (runFetch), or reports false after
// telling the history it never started.
func (k *Keeper) startFetch(f *history.Fetch) bool {
	return k.start(job{
		run:  func(ctx context.Context) { k.runFetch(ctx, f) },
		undo: func() { k.hist.FetchNotStarted(f) },
	})
}

// runFetch makes attempts at f until one hands out the snapshot, and ends f
// with its outcome. Each attempt asks the snapshot source when one is
// configured (source.go), and the primary otherwise, or once the source
// failed under snapshot-from-fallback yes (at once, no backoff: the source
// is not the primary). An attempt that fails before the snapshot was handed
// out (refused, silent, behind, of another history, or an answer Redis
// never sends) is retried after the link's backoff, as long as ctx lasts,
// the configured primary is the one the fetch began with and a replica
// waits for it (a background refresh, which none waits for, is tried
// once); otherwise f gives up, and its waiters with it. A failure after the
// snapshot was handed out is not retried here: the replicas following it
// fail with it and come back for a new one. Every failed attempt is
// counted; one of the primary's is logged each time, one of the source's
// once per cause.
func (k *Keeper) runFetch(ctx context.Context, f *history.Fetch) {
	began := k.settings().Primary
	fellBack := false
	var backoff time.Duration
	for {
		from := ""
		if !fellBack {
			from = k.settings().Source
		}
		started, err := k.fetchOnce(ctx, f, from)
		if err == nil {
			return
		}
		k.counts.failures.Add(1)
		if from != "" {
			k.sourceFailed(from, err)
			if !started && ctx.Err() == nil && k.fallsBack(err) {
				fellBack = true
				continue
			}
		}
		if started {
			if from == "" {
				k.log.Warn("snapshot fetch failed", "error", err)
			}
			return
		}
		why := k.stopReason(ctx, began, f)
		if why == "" {
			backoff = k.backoff(backoff)
			if from == "" {
				k.log.Warn("snapshot fetch failed", "error", err, "retry-in-ms", backoff.Milliseconds())
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			// The wait may have changed everything: look again.
			if why = k.stopReason(ctx, began, f); why == "" {
				continue
			}
		}
		k.log.Warn("snapshot fetch given up", "error", err, "reason", why)
		k.hist.FetchGaveUp(f, err)
		return
	}
}

// stopReason says why a failed fetch must not be tried again, or "" when
// it should be: ctx ended (the server stops), the configured primary is not
// the one the fetch began with, or nobody waits for it any more.
func (k *Keeper) stopReason(ctx context.Context, began string, f *history.Fetch) string {
	if ctx.Err() != nil {
		return "server stopping"
	}
	if now := k.settings().Primary; now != began || now == "" {
		return "replicaof changed"
	}
	if k.hist.FetchWaiters(f) == 0 {
		return "no replica waits"
	}
	return ""
}

// fetchOnce makes one attempt at f, from the source from ("": the
// primary). started reports whether the snapshot was handed out (the
// history's FetchStarted); a failure before that leaves f open for another
// attempt. A source's position is checked against the history
// (History.Continues) before it is asked (by its INFO) and again at its
// +FULLRESYNC, before any of its payload is read.
func (k *Keeper) fetchOnce(ctx context.Context, f *history.Fetch, from string) (started bool, err error) {
	var position func(string, int64, bool) error
	if from != "" {
		position = func(replID string, offset int64, _ bool) error { return k.hist.Continues(replID, offset) }
	}
	sn, err := k.src.FetchSnapshot(ctx, from, position, func(sn *replbuf.Snapshot, size int64) (Sink, error) {
		k.memoryGrows()
		// The same rule as the main link's payload: a declared size dir
		// or memory cannot hold is refused here, unread.
		pf, sink, err := k.sinkFor(sn, size, "fetch")
		if err != nil {
			return nil, err
		}
		var to history.Payload // nil, not a typed nil, for memory
		if pf != nil {
			to = pf
		}
		if err := k.hist.FetchStarted(f, sn, to); err != nil {
			return nil, err
		}
		started = true
		return sink, nil
	})
	if err != nil && !started {
		return false, err
	}
	k.hist.FetchEnded(f, err)
	if err != nil {
		return true, err
	}
	k.counted(f.Reason())
	lg := k.log
	if from != "" {
		k.sourceServed()
		lg = lg.With("source", from)
	}
	lg.Info("snapshot fetched", "replid", sn.ReplID(), "offset", sn.Offset(), "snapshot-bytes", sn.Size(), "reason", f.Reason().String())
	return true, nil
}

// counted counts one completed fetch.
func (k *Keeper) counted(r history.FetchReason) {
	k.counts.fetches.Add(1)
	k.counts.byReason[r].Add(1)
}

// filteredLimit bounds a filtered RDB the proxy relays (FetchFiltered): it
// holds one in memory, uncounted by the history, for one replica, and Redis
// 7.0's filters leave the functions at most.
const filteredLimit = 8 << 20

// FetchFiltered gets the filtered RDB a replica asked for (REPLCONF
// rdb-filter-only), on the replica's goroutine: no held snapshot is
// filtered, and it is never the history's. The empty filter (no keys, no
// functions: redis-cli --replica's) is an RDB the proxy writes itself
// (emptyRDB), at no fork. Any other is fetched from the primary and counts
// as a snapshot fetch (reason filtered), as it costs the primary a fork;
// the primary's refusal comes back as a Refusal, for the replica to pass on.
func (k *Keeper) FetchFiltered(ctx context.Context, filter string) (*replbuf.Snapshot, error) {
	if filter == "" {
		return k.emptyRDB()
	}
	from := k.settings().Source
	sn, err := k.src.FetchFiltered(ctx, from, filter, filteredLimit)
	if err != nil && from != "" {
		k.counts.failures.Add(1)
		k.sourceFailed(from, err)
		if ctx.Err() != nil || !k.fallsBack(err) {
			return nil, err
		}
		from = ""
		sn, err = k.src.FetchFiltered(ctx, from, filter, filteredLimit)
	}
	if err != nil {
		k.counts.failures.Add(1)
		k.log.Warn("snapshot fetch failed", "error", err, "filter", filter)
		return nil, err
	}
	k.counted(history.FetchFiltered)
	lg := k.log
	if from != "" {
		k.sourceServed()
		lg = lg.With("source", from)
	}
	lg.Info("snapshot fetched", "replid", sn.ReplID(), "offset", sn.Offset(), "snapshot-bytes", sn.Size(),
		"reason", history.FetchFiltered.String(), "filter", filter)
	return sn, nil
}

// emptyRDB is the RDB Redis 7.0 makes under REPLCONF rdb-filter-only "":
// no keys and no functions, here the header, the end opcode and the CRC64
// trailer, taken at the stream's end under its replid, where the primary's
// would stand at its fork. A stream that moves on meanwhile is attached from
// just after it all the same (History.AttachFiltered), as after a fork.
func (k *Keeper) emptyRDB() (*replbuf.Snapshot, error) {
	rdb := []byte("REDIS0010\xff")
	rdb = binary.LittleEndian.AppendUint64(rdb, replbuf.CRC64(0, rdb))
	sn := replbuf.NewSnapshot(k.hist.Identity().ReplID, k.hist.Stream().Offset(), nil, time.Now())
	if err := sn.Append(rdb); err != nil {
		sn.Release()
		return nil, err
	}
	if err := sn.Complete(); err != nil {
		sn.Release()
		return nil, err
	}
	return sn, nil
}

package snapshots

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/rdbcheck"
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
// failed under snapshot-from-fallback yes (at once: the source is not the
// primary). Every attempt first waits out the fetch backoff (retry), which
// the last failed attempt of any fetch set. An attempt that fails before
// the snapshot was handed out (refused, silent, behind, of another history,
// or an answer Redis never sends) is retried, as long as ctx lasts, the
// configured primary is the one the fetch began with and a replica waits
// for it (a background refresh, which none waits for, is tried once);
// otherwise f gives up, and its waiters with it. A failure after the
// snapshot was handed out is not retried here: the replicas following it
// fail with it and come back for a new one, which the backoff holds back.
// Every failed attempt is counted; one of the primary's is logged each
// time, one of the source's once per cause.
func (k *Keeper) runFetch(ctx context.Context, f *history.Fetch) {
	began := k.settings().Primary
	fellBack, atOnce := false, false
	var err error // the last attempt's
	for {
		if !atOnce {
			if why := k.awaitRetry(ctx, began, f); why != "" {
				if err == nil {
					err = fmt.Errorf("%w: %s", errNotTried, why)
				}
				k.log.Warn("snapshot fetch given up", "error", err, "reason", why)
				k.hist.FetchGaveUp(f, err)
				return
			}
		}
		atOnce = false
		from := ""
		if !fellBack {
			from = k.settings().Source
		}
		var started bool
		started, err = k.fetchOnce(ctx, f, from)
		if err == nil {
			return
		}
		k.counts.failures.Add(1)
		wait := k.retry.failed(k.backoff, time.Now())
		if from != "" {
			k.sourceFailed(from, err)
			if !started && ctx.Err() == nil && k.fallsBack(err) {
				fellBack, atOnce = true, true
				continue
			}
		}
		if from == "" {
			k.log.Warn("snapshot fetch failed", "error", err, "retry-in-ms", wait.Milliseconds())
		}
		if started {
			return
		}
	}
}

// FullSyncEnded is told that a replica's full sync completed (ok: it loaded
// its payload), or failed before that: the next fetch goes at once, or
// waits one more backoff step. Any goroutine.
func (k *Keeper) FullSyncEnded(ok bool) {
	if ok {
		k.retry.succeeded()
		return
	}
	k.retry.failed(k.backoff, time.Now())
}

// errNotTried is why a fetch given up while it waited for its first
// attempt failed: nobody waits for it any more, the primary changed, or the
// server stops.
var errNotTried = errors.New("snapshot fetch given up before its first attempt")

// awaitRetry waits until the fetch backoff lets an attempt start, and
// returns "" then; or, when the wait ends the fetch, why (stopReason). An
// attempt the backoff does not hold back starts at once, whoever waits for
// it (a background refresh too).
func (k *Keeper) awaitRetry(ctx context.Context, began string, f *history.Fetch) string {
	waited := false
	for d := k.retry.wait(time.Now()); d > 0; d = k.retry.wait(time.Now()) {
		if why := k.stopReason(ctx, began, f); why != "" {
			return why
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		waited = true
	}
	if waited {
		// The wait may have changed everything: look again.
		return k.stopReason(ctx, began, f)
	}
	return ""
}

// fetchRetry is the backoff every fetch shares: an attempt that failed,
// before or after its snapshot was handed out, for whatever fetch (a seed
// included), and a replica's full sync that failed, hold back the next
// attempt of any fetch by the link's backoff rule, each failure in a row
// waiting longer, so that replicas a failed fetch or a failed load
// dropped, back at once with a fetch of their own, do not each cost the
// source or the primary a fork. A full sync that completes resets it: a
// fetch that completes is not enough, as replicas that fail to load every
// snapshot would otherwise have one fork after another. Any goroutine.
type fetchRetry struct {
	mu        sync.Mutex    // a leaf; guards the two below
	last      time.Duration // the backoff after the last failure in a row; 0 after a success
	notBefore time.Time     // no attempt starts before
}

// failed records a failed attempt at now and returns the wait it sets.
func (r *fetchRetry) failed(backoff func(time.Duration) time.Duration, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = backoff(r.last)
	r.notBefore = now.Add(r.last)
	return r.last
}

// succeeded records a completed full sync: the next failure waits the least.
func (r *fetchRetry) succeeded() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.notBefore = 0, time.Time{}
}

// wait is how long an attempt at now must still wait.
func (r *fetchRetry) wait(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.notBefore.Sub(now), 0)
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
	sn, err := k.src.FetchSnapshot(ctx, from, position, func(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error) {
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
// the primary's refusal comes back as a *wire.RefusedError, for the replica to pass on.
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
	rdb = binary.LittleEndian.AppendUint64(rdb, rdbcheck.CRC64(0, rdb))
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

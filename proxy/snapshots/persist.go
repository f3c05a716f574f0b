package snapshots

import (
	"errors"
	"io/fs"
	"time"

	"github.com/replproxy/replproxy/proxy/snapfile"
)

// The snapshot on disk (stream log on: repl-log-size > 0).
//
//   - Writing: the monitor calls Persist, which writes every complete
//     newest snapshot (an upstream full sync's, a side-link fetch's) to dir
//     as a spill does (a snapfile.Sink with its metadata: replid, offset,
//     size and the CRC64 of the whole file). The history then retires the
//     snapshot from memory (released once no replica reads it), so memory
//     holds a snapshot only while it still arrives; full syncs are served
//     from the file with sendfile. This is not an eviction:
//     evicted_snapshots counts only maxmemory's spills.
//   - Serving: a full sync's plan sends the file, then the stream after its
//     offset: from memory when memory still holds it, else from the stream
//     log.
//   - Restart: Adopt takes the file when snapfile.Load finds its metadata
//     sound and the file the regular file it describes, with that CRC64
//     (the file is read once), and the recovered log continues the stream
//     from offset+1 under a matching replid. Otherwise RemoveLeftovers
//     removes both files, and the log line says why.
//   - Refresh: a snapshot stays servable while the log covers the stream
//     after it; the log keeps at most repl-log-size bytes (plus a segment)
//     and drops the oldest first. By default nothing more: the proxy never
//     makes the primary fork more often than the same replicas attached
//     directly would, so a new snapshot is fetched only when a replica needs
//     one the proxy cannot serve (PlanFull; every replica arriving meanwhile
//     shares it). With repl-snapshot-refresh set, an eager refresh: once the
//     stream written since the snapshot reaches
//     repl-snapshot-max-stream-since (by default refreshFraction of
//     repl-log-size), or the log or the replid no longer continue it,
//     Refresh starts one side-link fetch in the background, with no replica
//     waiting, so that the next full sync finds a fresh snapshot instead of
//     waiting for a fork. At most one fetch runs (the history's), a
//     background one is tried once (runFetch retries only while a replica
//     waits), and at most once per repl-snapshot-refresh, so a primary that
//     is down costs one attempt per interval, not a storm.

const (
	// refreshNumerator/refreshDenominator is refreshFraction: the share of
	// repl-log-size written since the snapshot that starts a background
	// fetch when repl-snapshot-max-stream-since is 0 (its default). A
	// quarter of the log is left for the fetch to finish in.
	refreshNumerator, refreshDenominator = 3, 4
)

// Persist writes the newest complete snapshot to dir when the stream log is
// on (see the top of the file). From the monitor.
func (k *Keeper) Persist() {
	if !k.durable {
		return
	}
	if sn := k.hist.PersistNewest(); sn != nil {
		k.startWrite(sn, k.settings().Dir, false)
	}
}

// Refresh starts a background fetch, under repl-snapshot-refresh only, when
// the snapshot on disk is about to outlive the stream log's cover (see the
// top of the file). From the monitor, which owns refreshAfter.
func (k *Keeper) Refresh(now time.Time) {
	set := k.settings()
	if !k.durable || set.Refresh <= 0 || now.Before(k.refreshAfter) || !k.src.Connected() {
		return
	}
	first, last, live := k.host.LogBounds()
	if !live {
		return
	}
	limit := set.MaxStreamSince
	if limit <= 0 {
		limit = set.LogSize / refreshDenominator * refreshNumerator
	}
	f, replaces := k.hist.RefetchSpilled(first, last, limit)
	if f == nil || !k.startFetch(f) {
		return
	}
	k.refreshAfter = now.Add(set.Refresh)
	k.log.Info("fetching a fresh snapshot: the stream log will soon no longer cover the one on disk",
		"snapshot-offset", replaces.Offset, "log-first-offset", first, "log-last-offset", last)
}

// Adopt makes the snapshot a previous run left in dir the history's
// snapshot on disk, if it can serve (see the top of the file); otherwise it
// says why, and RemoveLeftovers removes it. At start, after the stream log
// is recovered and before RemoveLeftovers.
func (k *Keeper) Adopt(dir string) {
	if !k.durable {
		return
	}
	sp, err := snapfile.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return // nothing left, or a file without metadata (a crash mid-write)
	}
	if err == nil {
		first, last, _ := k.host.LogBounds()
		err = k.hist.AdoptSpilled(sp, first, last)
	}
	if err != nil {
		k.log.Warn("snapshot on disk not adopted: removing it", "dir", dir, "error", err)
		return
	}
	k.log.Info("snapshot on disk adopted", "path", sp.Path(), "replid", sp.ReplID, "offset", sp.Offset,
		"snapshot-bytes", sp.Size)
}

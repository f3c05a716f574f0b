package proxy

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// The snapshot on disk (stream log on: repl-log-size > 0).
//
//   - Writing: the monitor hands every complete newest snapshot (an upstream
//     full sync's, a side-link fetch's) to persistNewest, which writes it to
//     dir as a spill does (a snapfile.Sink with its metadata: replid,
//     offset, size and the CRC64 of the whole file). spillDone then retires the snapshot from memory (released once
//     no replica reads it), so memory holds a snapshot only while it still
//     arrives; full syncs are served from the file with sendfile. This is
//     not an eviction: evicted_snapshots counts only maxmemory's spills.
//   - Serving: planFull sends the file, then the stream after its offset:
//     from memory when memory still holds it, else from the stream log.
//   - Restart: New adopts the file (adoptSnapshot) when snapfile.Load
//     finds its metadata sound and the file the regular file it describes,
//     with that CRC64 (the file is read once), and the recovered log continues the stream from
//     offset+1 under a matching replid. Otherwise removeSpillLeftovers
//     removes both files, and the log line says why.
//   - Refetch: a snapshot stays servable while the log covers the stream
//     after it; the log keeps at most repl-log-size bytes (plus a segment)
//     and drops the oldest first. By default nothing more: the proxy never
//     makes the primary fork more often than the same replicas attached
//     directly would, so a new snapshot is fetched only when a replica needs
//     one the proxy cannot serve (planFull; every replica arriving meanwhile
//     shares it). With repl-snapshot-refresh set, an eager refresh: once the
//     stream written since the snapshot reaches
//     repl-snapshot-max-stream-since (by default refetchFraction of
//     repl-log-size), or the log or the replid no longer continue it, the
//     monitor starts one side-link fetch in the background, with no replica
//     waiting, so that the next full sync finds a fresh snapshot instead of
//     waiting for a fork. At most one fetch runs (History.mu.fetch), a
//     background one is tried once (fetchLoop does not retry a fetch no
//     replica waits for), and at most once per repl-snapshot-refresh, so a
//     primary that is down costs one attempt per interval, not a storm.

const (
	// refetchNumerator/refetchDenominator is refetchFraction: the share
	// of repl-log-size written since the snapshot that starts a background
	// fetch when repl-snapshot-max-stream-since is 0 (its default). A
	// quarter of the log is left for the fetch to finish in.
	refetchNumerator, refetchDenominator = 3, 4
)

// persistSnapshot writes the newest complete snapshot to dir when the stream
// log is on (see the top of the file). From the monitor.
func (s *Server) persistSnapshot() {
	if s.durable == nil {
		return
	}
	dir := s.config().Dir
	if sn := s.hist.PersistNewest(); sn != nil &&
		!s.goBackground(func(ctx context.Context) { s.writeSnapshot(ctx, sn, dir, false) }) {
		s.hist.SpillNotStarted(sn)
	}
}

// refetchBeforeStale starts a background fetch, under repl-snapshot-refresh
// only, when the snapshot on disk is about to outlive the stream log's cover
// (see the top of the file). From the monitor, which owns refetchAfter.
func (s *Server) refetchBeforeStale(now time.Time) {
	d := s.durable
	every := s.config().ReplSnapshotRefresh
	if d == nil || every <= 0 || now.Before(s.refetchAfter) || s.up.State() != upstream.StateConnected || d.follow.Down() {
		return
	}
	first, last := d.log.Bounds()
	limit := s.config().ReplSnapshotMaxStreamSince
	if limit <= 0 {
		limit = s.config().ReplLogSize / refetchDenominator * refetchNumerator
	}
	f, replaces := s.hist.RefetchSpilled(first, last, limit)
	if f == nil {
		return
	}
	if !s.goBackground(func(ctx context.Context) { s.runFetch(ctx, f) }) {
		s.hist.FetchNotStarted(f)
		return
	}
	s.refetchAfter = now.Add(every)
	s.log.Info("fetching a fresh snapshot: the stream log will soon no longer cover the one on disk",
		"snapshot-offset", replaces.Offset, "log-first-offset", first, "log-last-offset", last)
}

// adoptSnapshot makes the snapshot a previous run left in dir the spilled
// one, if it can serve (see the top of the file); otherwise it says why, and
// removeSpillLeftovers removes it. In New, after the stream log is
// recovered.
func (s *Server) adoptSnapshot(dir string) {
	sp, err := snapfile.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return // nothing left, or a file without metadata (a crash mid-write)
	}
	if err == nil {
		first, last := s.durable.log.Bounds()
		err = s.hist.AdoptSpilled(sp, first, last)
	}
	if err != nil {
		s.log.Warn("snapshot on disk not adopted: removing it", "dir", dir, "error", err)
		return
	}
	s.log.Info("snapshot on disk adopted", "path", sp.Path(), "replid", sp.ReplID, "offset", sp.Offset,
		"snapshot-bytes", sp.Size)
}

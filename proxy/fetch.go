package proxy

import (
	"context"
	"errors"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// goBackground runs f on the server's background group, with the server's
// lifetime. It reports false when the server is not running.
func (s *Server) goBackground(f func(ctx context.Context)) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgCtx == nil || s.bgCtx.Err() != nil {
		return false
	}
	ctx := s.bgCtx
	s.bg.Go(func() { f(ctx) })
	return true
}

// runFetch fetches one snapshot for f on the background group: the link's
// fetch loop retries its attempts (fetchOnce) with the link's backoff while
// a replica waits for it, and this is the one place that turns the loop's
// end into the fetch's end, logging it once.
func (s *Server) runFetch(ctx context.Context, f *history.Fetch) {
	err := s.up.FetchLoop(ctx, upstream.FetchJob{
		Attempt: func(ctx context.Context) (bool, error) { return s.fetchOnce(ctx, f) },
		Wanted:  func() bool { return s.hist.FetchWaiters(f) > 0 },
		Failed:  func() { s.stats.snapshotFetchFailures.Add(1) },
	})
	var stop *upstream.FetchStopError
	switch {
	case err == nil:
	case errors.As(err, &stop):
		s.log.Warn("snapshot fetch failed, not retrying", "error", stop.Err, "reason", stop.Reason)
		s.hist.FetchGaveUp(f, stop.Err)
	default:
		s.log.Warn("snapshot fetch failed", "error", err)
	}
}

// fetchOnce makes one attempt at f. started reports whether the snapshot was
// handed out (f.Ready() closed); a failure before that leaves f open for
// another attempt.
func (s *Server) fetchOnce(ctx context.Context, f *history.Fetch) (started bool, err error) {
	sn, err := s.up.FetchSnapshot(ctx, func(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error) {
		s.wakeMonitorNow() // memory grows while it arrives
		// The same rule as the main link's payload: a declared size dir
		// or memory cannot hold is refused here, unread.
		pf, sink, err := s.payloadSink(sn, size, "fetch")
		if err != nil {
			return nil, err
		}
		var to history.Payload // nil, not a typed nil, for memory
		if pf != nil {
			to = pf
		}
		if err := s.hist.FetchStarted(f, sn, to); err != nil {
			return nil, err
		}
		started = true
		return sink, nil // nil: followed in memory
	})
	if err != nil && !started {
		return false, err
	}
	s.hist.FetchEnded(f, err)
	if err != nil {
		return true, err
	}
	s.stats.snapshotFetches.Add(1)
	s.stats.snapshotFetchReasons[f.Reason()].Add(1)
	s.log.Info("snapshot fetched", "replid", sn.ReplID(), "offset", sn.Offset(), "snapshot-bytes", sn.Size(),
		"reason", f.Reason().String())
	return true, nil
}

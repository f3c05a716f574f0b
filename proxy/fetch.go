package proxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"

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
		// The same rule as the main link's payload: a declared size dir
		// cannot hold is refused here, unread.
		pf, err := s.payloadSink(sn, size, "fetch")
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
		if pf == nil {
			return nil, nil // followed in memory (no typed nil in the interface)
		}
		return pf, nil
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
	s.log.Info("snapshot fetched", "replid", sn.ReplID(), "offset", sn.Offset(), "size", humanize.IBytes(uint64(sn.Size())),
		"reason", f.Reason().String())
	return true, nil
}

// awaitFetch waits for plan's shared fetch to start, sending keepalive
// newlines (allowed before +FULLRESYNC), then completes plan with a reader
// of the fetched snapshot (none yet for a payload that may go to dir: see
// fetch.file) and the stream from just after its offset
// (history.attachFetched).
func (s *Server) awaitFetch(ctx context.Context, w *replicaWriter, plan *history.Plan) error {
	f := plan.Fetch
	if err := w.keepaliveUntil(ctx, f.Ready()); err != nil {
		return err
	}
	if f.Err() != nil {
		return fmt.Errorf("snapshot fetch: %w", f.Err())
	}
	return s.hist.AttachFetched(f, plan)
}

// awaitFetched waits, for a replica told +FULLRESYNC of fetch f whose
// payload may go to dir (f.file), until the payload has ended, sending
// keepalive newlines meanwhile (a replica takes them between +FULLRESYNC and
// the payload, and they renew its repl-timeout, as a primary's while its
// BGSAVE runs). It then completes plan with what to send: the file in dir,
// or a reader of the snapshot when it stayed in memory (history.fetchedPayload).
func (s *Server) awaitFetched(ctx context.Context, w *replicaWriter, f *history.Fetch, plan *history.Plan) error {
	if err := w.keepaliveUntil(ctx, f.Done()); err != nil {
		return err
	}
	if f.DoneErr() != nil {
		return fmt.Errorf("snapshot fetch: %w", f.DoneErr())
	}
	return s.hist.FetchedPayload(f, plan)
}

// keepaliveUntil sends a keepalive newline every keepaliveInterval until
// done is closed (nil), a write fails or ctx ends (their error).
func (w *replicaWriter) keepaliveUntil(ctx context.Context, done <-chan struct{}) error {
	t := time.NewTicker(keepaliveInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
			if err := w.write([]byte("\n")); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

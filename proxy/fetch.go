package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// A fetch is one snapshot taken from the primary over a side link
// (REPLCONF rdb-only 1, PSYNC ? -1) for replicas that need a full sync when
// no held snapshot is servable. Every replica waiting meanwhile shares it,
// and runFetch tries again while one waits.
type fetch struct {
	ready chan struct{} // closed once sn is set (the +FULLRESYNC arrived) or err is (runFetch gave up)
	sn    *replbuf.Snapshot
	err   error

	// A fetch whose payload may go to dir as it arrives (payloadSink: the
	// stream log is on, or maxmemory under evict-snapshots, and its size is
	// not known to fit) is not followed in memory while it arrives: memory
	// keeps only a window of it, which no reader could follow. Its waiters
	// take the stream from just after it at once (the stream is pinned from
	// there while it arrives, invariant 7), send +FULLRESYNC and then
	// keepalive newlines until done, and then the payload: from the file in
	// dir (sendfile, as any snapshot on disk), or from memory when it stayed
	// there (small, or dir could not take it). All of them set by
	// fetchStarted under history.mu before ready is closed, and spilled and
	// doneErr by fetchEnded before done is closed; read after the channel.
	file    *payloadFile   // where the payload goes; nil: followed in memory as it arrives
	done    chan struct{}  // with file: closed once the payload ended
	spilled *snapfile.File // with file, once done: the payload on disk; nil when it stayed in memory
	doneErr error          // with file, once done: why the payload failed, or nil
	// arriving: with file, the payload is still arriving, counted in
	// mem_snapshots (history.snapshotBytes); guarded by history.mu.
	arriving bool
	// gen: with file, the stream's generation at fetchStarted; a payload
	// that ends in another one (an upstream full sync meanwhile, which may
	// keep the replid) does not displace that sync's snapshot. Set under
	// history.mu.
	gen uint64

	reason fetchReason // why it was started; set at creation

	// waiters counts the replicas whose plan joined this fetch and that are
	// still connected; guarded by history.mu. planFull counts a replica before
	// it is registered, so a fetch that fails at once still sees it.
	waiters int
}

// A fetchReason says why a snapshot fetch (a fork on the primary) was
// started. Each completed fetch is counted per reason in INFO's proxy
// section (snapshot_fetches_<reason>) and in
// replproxy_snapshot_fetches_by_reason_total{reason}; together they add up to
// snapshot_fetches.
type fetchReason int32

const (
	fetchReplicaNeeded fetchReason = iota // a replica needed a snapshot the proxy could not serve
	fetchRefresh                          // repl-snapshot-refresh: the log was about to stop covering the snapshot on disk
	numFetchReasons
)

// String returns the reason as INFO and the metrics name it.
func (r fetchReason) String() string {
	switch r {
	case fetchReplicaNeeded:
		return "replica_needed"
	case fetchRefresh:
		return "refresh"
	}
	return "unknown"
}

// fetchCounts counts completed fetches per reason.
type fetchCounts [numFetchReasons]atomic.Int64

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

// runFetch fetches one snapshot for f on the background group: it runs
// fetchLoop and is the one place that turns the loop's end into the fetch's
// end, logging it once.
func (s *Server) runFetch(ctx context.Context, f *fetch) {
	err := s.fetchLoop(ctx, f)
	var stop *fetchStopError
	switch {
	case err == nil:
	case errors.As(err, &stop):
		s.log.Warn("snapshot fetch failed, not retrying", "error", stop.err, "reason", stop.reason)
		s.hist.fetchGaveUp(f, stop.err)
	default:
		s.log.Warn("snapshot fetch failed", "error", err)
	}
}

// fetchStopError ends a fetch given up before the primary answered: its
// waiters fail with err.
type fetchStopError struct {
	reason string // why it is not retried
	err    error  // the last attempt's failure
}

func (e *fetchStopError) Error() string { return e.err.Error() + " (not retried: " + e.reason + ")" }
func (e *fetchStopError) Unwrap() error { return e.err }

// fetchLoop makes attempts at f until one starts. As soon as the primary
// answers with +FULLRESYNC, the snapshot becomes the server's newest and
// waiting replicas start following it while it arrives; fetchLoop returns
// nil once it has arrived, or the error that ended it.
//
// An attempt that fails before that (the primary refused, went silent, or
// answered what Redis never sends) is counted and retried with backoff, as
// long as a replica still waits for this fetch, the server runs and
// replicaof names the same primary; otherwise the loop returns a
// *fetchStopError. A failure after the snapshot was handed out is not
// retried here: the replicas following it fail with it and come back for a
// new one.
func (s *Server) fetchLoop(ctx context.Context, f *fetch) error {
	primary := s.fetchPrimary()
	backoff := upstream.BackoffMin
	for {
		started, err := s.fetchOnce(ctx, f)
		if err == nil {
			return nil
		}
		s.stats.snapshotFetchFailures.Add(1)
		if started {
			return err
		}
		why := s.fetchStopReason(ctx, f, primary)
		if why == "" {
			s.log.Warn("snapshot fetch failed", "error", err, "retry-in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, upstream.BackoffMax)
			// The wait may have changed everything: look again.
			why = s.fetchStopReason(ctx, f, primary)
		}
		if why != "" {
			return &fetchStopError{reason: why, err: err}
		}
	}
}

// fetchPrimary returns host:port of the configured primary, "" for none.
func (s *Server) fetchPrimary() string { return s.upstreamTarget().Addr }

// fetchStopReason says why a failed fetch must not be tried again, or ""
// when it should be: the server stops, replicaof changed since the fetch
// began, or no replica waits for it any more.
func (s *Server) fetchStopReason(ctx context.Context, f *fetch, primary string) string {
	if ctx.Err() != nil {
		return "server stopping"
	}
	if p := s.fetchPrimary(); p != primary || p == "" {
		return "replicaof changed"
	}
	if s.hist.fetchWaiters(f) == 0 {
		return "no replica waits"
	}
	return ""
}

// fetchOnce makes one attempt at f. started reports whether the snapshot was
// handed out (f.ready closed); a failure before that leaves f open for
// another attempt.
func (s *Server) fetchOnce(ctx context.Context, f *fetch) (started bool, err error) {
	sn, err := s.up.FetchSnapshot(ctx, func(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error) {
		// The same rule as the main link's payload: a declared size dir
		// cannot hold is refused here, unread.
		pf, err := s.payloadSink(sn, size, "fetch")
		if err != nil {
			return nil, err
		}
		if err := s.hist.fetchStarted(f, sn, pf); err != nil {
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
	s.hist.fetchEnded(f, err)
	if err != nil {
		return true, err
	}
	s.stats.snapshotFetches.Add(1)
	s.stats.snapshotFetchReasons[f.reason].Add(1)
	s.log.Info("snapshot fetched", "replid", sn.ReplID(), "offset", sn.Offset(), "size", humanize.IBytes(uint64(sn.Size())),
		"reason", f.reason.String())
	return true, nil
}

// awaitFetch waits for plan's shared fetch to start, sending keepalive
// newlines (allowed before +FULLRESYNC), then completes plan with a reader
// of the fetched snapshot (none yet for a payload that may go to dir: see
// fetch.file) and the stream from just after its offset
// (history.attachFetched).
func (s *Server) awaitFetch(ctx context.Context, w *replicaWriter, plan *syncPlan) error {
	f := plan.fetch
	if err := w.keepaliveUntil(ctx, f.ready); err != nil {
		return err
	}
	if f.err != nil {
		return fmt.Errorf("snapshot fetch: %w", f.err)
	}
	return s.hist.attachFetched(f, plan)
}

// awaitFetched waits, for a replica told +FULLRESYNC of fetch f whose
// payload may go to dir (f.file), until the payload has ended, sending
// keepalive newlines meanwhile (a replica takes them between +FULLRESYNC and
// the payload, and they renew its repl-timeout, as a primary's while its
// BGSAVE runs). It then completes plan with what to send: the file in dir,
// or a reader of the snapshot when it stayed in memory (history.fetchedPayload).
func (s *Server) awaitFetched(ctx context.Context, w *replicaWriter, f *fetch, plan *syncPlan) error {
	if err := w.keepaliveUntil(ctx, f.done); err != nil {
		return err
	}
	if f.doneErr != nil {
		return fmt.Errorf("snapshot fetch: %w", f.doneErr)
	}
	return s.hist.fetchedPayload(f, plan)
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

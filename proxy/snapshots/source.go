package snapshots

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// The snapshot source (snapshot-from, Settings.Source) is a replica of the
// same primary, or a peer replproxy, that every snapshot the proxy needs is
// fetched from instead of the primary: the proxy's own sync (a Seed), the
// fetches its replicas and backups wait for, and filtered RDBs. A Redis
// replica forks for it (REPLCONF rdb-only 1), a peer proxy serves what it
// holds; the primary does not fork. Its +FULLRESYNC says where in the
// primary's stream the snapshot stands, which is checked before any of its
// payload is read: for a seed by the main link against the primary's
// history (upstream), for a fetch against the proxy's own (History.Continues).
//
// A source that cannot be used is counted by reason and logged once per
// cause (a source that stays down is one line, not one per retry); then
// Settings.Fallback (snapshot-from-fallback yes) asks the primary as
// without a source, counted as a fallback, and otherwise the source is
// tried again with the link's backoff while replicas wait: nothing older
// or of another history is ever served.

// Why a snapshot source could not be used, as INFO
// (snapshot_source_failures_<reason>) and /metrics
// (replproxy_snapshot_source_failures_total{reason}) name it.
const (
	SourceReplID  = "replid"  // its replid is not in the primary's history (or the proxy's): it replicates another primary
	SourceBehind  = "behind"  // it stands before what the primary's backlog (or the proxy's) still holds
	SourceAhead   = "ahead"   // it stands past the primary's end (or far past the proxy's) under the same replid: another history
	SourceDown    = "down"    // it could not be reached, went silent or dropped the link
	SourceRefused = "refused" // it answered with an error (-NOMASTERLINK, -LOADING, ...)
)

// SourceReasons lists the reasons, in the order SourceCounts.Failures counts them.
var SourceReasons = [...]string{SourceReplID, SourceBehind, SourceAhead, SourceDown, SourceRefused}

// SourceCounts are the snapshot source's figures, as INFO and /metrics
// report them.
type SourceCounts struct {
	Fetches   int64 // snapshots completed from the source
	Fallbacks int64 // times the primary was asked because the source could not be used
	Failures  [len(SourceReasons)]int64
}

type sourceCounters struct {
	fetches, fallbacks atomic.Int64
	failures           [len(SourceReasons)]atomic.Int64

	mu     sync.Mutex
	logged string // the cause last logged (source and reason), until a success; guarded by mu
}

// SourceCounts reads the source's counters; any goroutine.
func (k *Keeper) SourceCounts() SourceCounts {
	c := SourceCounts{Fetches: k.source.fetches.Load(), Fallbacks: k.source.fallbacks.Load()}
	for i := range c.Failures {
		c.Failures[i] = k.source.failures[i].Load()
	}
	return c
}

// sourceReason classifies a failure of the source, as an index into
// SourceReasons: the reason a check gave (SourceReason), an error reply, or
// anything else (it is down).
func sourceReason(err error) int {
	name := SourceDown
	var checked *replid.NotContinued
	var refused *wire.RefusedError
	switch {
	case errors.As(err, &checked):
		name = checked.Reason
	case errors.As(err, &refused):
		name = SourceRefused
	}
	if i := slices.Index(SourceReasons[:], name); i >= 0 {
		return i
	}
	return slices.Index(SourceReasons[:], SourceDown) // a reason this package does not know
}

// sourceFailed counts a failure of the source from and logs it once per
// cause.
func (k *Keeper) sourceFailed(from string, err error) {
	reason := sourceReason(err)
	k.source.failures[reason].Add(1)
	cause := from + "\x00" + SourceReasons[reason]
	k.source.mu.Lock()
	again := k.source.logged == cause
	k.source.logged = cause
	k.source.mu.Unlock()
	lg := k.log.Warn
	if again {
		lg = k.log.Debug
	}
	lg("snapshot source cannot be used", "source", from, "reason", SourceReasons[reason], "error", err,
		"fallback", k.settings().Fallback)
}

// fallsBack reports whether the primary is to be asked in place of a
// source that failed with err: under snapshot-from-fallback yes, or when
// the primary forked for it already (a PrimaryForked error). Such a
// fallback is counted.
func (k *Keeper) fallsBack(err error) bool {
	var forked *replid.NotContinued
	if k.settings().Fallback || (errors.As(err, &forked) && forked.Forked) {
		k.source.fallbacks.Add(1)
		return true
	}
	return false
}

// sourceServed counts a snapshot completed from the source; the next
// failure is logged again whatever its cause.
func (k *Keeper) sourceServed() {
	k.source.fetches.Add(1)
	k.source.mu.Lock()
	k.source.logged = ""
	k.source.mu.Unlock()
}

// A Seed is a snapshot from the source for the proxy's own sync, which the
// main link asks the primary to continue (an upstream.Seed, which the link
// has of Keeper.Seed): the main link's goroutine calls Position, then Begin
// or Abort, once; a fetch goroutine of the Keeper's runs the side link
// meanwhile.
type Seed struct {
	k    *Keeper
	f    *history.Fetch
	from string

	ready   chan struct{} // closed once the position is known, or the side link failed first (err)
	replID  string        // set before ready is closed
	offset  int64         // set before ready is closed
	err     error         // set before ready is closed
	decided chan error    // the main link's answer, once: nil begins, an error aborts
}

// Seed starts a snapshot from the source for the proxy's own sync and
// returns once the source's +FULLRESYNC named its position (a *Seed); it
// returns nil and no error when no source is configured. When the source
// fails first, err says why and fallback whether to ask the primary
// instead (both counted and logged here). It is upstream.Snapshots' Seed,
// called by the main link.
//
// check, when not nil, is the primary's rule for a position it continues
// (the main link has its INFO): the source is not asked for a snapshot, a
// fork, from a position it refuses.
func (k *Keeper) Seed(ctx context.Context, check func(replID string, offset int64) error) (seed upstream.Seed, fallback bool, err error) {
	from := k.settings().Source
	if from == "" {
		return nil, false, nil
	}
	s := &Seed{k: k, f: history.NewSeed(), from: from, ready: make(chan struct{}), decided: make(chan error, 1)}
	// A seed queued before Run and undone by Close is refused as one
	// asked for after Close is: its waiter must not wait for a side link
	// that will never run.
	undo := func() { s.err = ErrClosed; close(s.ready) }
	if !k.start(job{run: func(ctx context.Context) { k.runSeed(ctx, s, check) }, undo: undo}) {
		return nil, false, ErrClosed
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		s.decided <- ctx.Err() // the side link, at its +FULLRESYNC, sees it
		return nil, false, ctx.Err()
	}
	switch {
	case errors.Is(s.err, ErrClosed):
		return nil, false, s.err // the server stops: no failure of the source's
	case s.err != nil:
		k.sourceFailed(from, s.err)
		return nil, k.fallsBack(s.err), s.err
	}
	return s, false, nil
}

// Position is where the source stands: its +FULLRESYNC's replid and offset.
func (s *Seed) Position() (replID string, offset int64) { return s.replID, s.offset }

// Begin starts the history at the seed's position (History.BeginAt), lets
// the payload arrive into it, and then tells the Host of the new
// generation (HistoryChanged), whose replicas planned before it the server
// disconnects.
func (s *Seed) Begin() {
	c := s.k.hist.BeginAt(s.f, s.replID, s.offset)
	s.decided <- nil
	s.k.host.HistoryChanged(c)
}

// Abort refuses the seed (its payload is not read), counts and logs why,
// and reports whether to ask the primary for a full sync instead.
func (s *Seed) Abort(why error) (fallback bool) {
	s.decided <- why
	s.k.sourceFailed(s.from, why)
	return s.k.fallsBack(why)
}

// runSeed runs the seed's side link: the position to the main link, its
// answer, and once begun the payload into the history's fetch, which then
// ends as any fetch does.
func (k *Keeper) runSeed(ctx context.Context, s *Seed, check func(string, int64) error) {
	positioned, begun, started := false, false, false
	sn, err := k.src.FetchSnapshot(ctx, s.from, func(replID string, offset int64, announced bool) error {
		if !announced {
			if check == nil {
				return nil
			}
			return check(replID, offset)
		}
		s.replID, s.offset, positioned = replID, offset, true
		close(s.ready)
		select {
		case err := <-s.decided:
			begun = err == nil
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}, func(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error) {
		k.memoryGrows()
		pf, sink, err := k.sinkFor(sn, size, "snapshot-source")
		if err != nil {
			return nil, err
		}
		var to history.Payload // nil, not a typed nil, for memory
		if pf != nil {
			to = pf
		}
		if err := k.hist.FetchStarted(s.f, sn, to); err != nil {
			return nil, err
		}
		started = true
		return sink, nil
	})
	if err != nil {
		k.counts.failures.Add(1)
		k.retry.failed(k.backoff, time.Now())
	}
	switch {
	case !positioned:
		s.err = err
		close(s.ready) // Seed counts the source's failure and logs it
		return
	case !begun:
		return // aborted: Abort counted why; the history never knew it
	case !started:
		k.hist.FetchGaveUp(s.f, err)
	default:
		k.hist.FetchEnded(s.f, err)
	}
	if err != nil {
		// Its waiters fail and come back for a fetch of their own.
		k.sourceFailed(s.from, err)
		return
	}
	k.counted(history.FetchProxySync)
	k.sourceServed()
	k.log.Info("snapshot fetched from the snapshot source", "source", s.from, "replid", sn.ReplID(),
		"offset", sn.Offset(), "snapshot-bytes", sn.Size(), "reason", history.FetchProxySync.String())
}

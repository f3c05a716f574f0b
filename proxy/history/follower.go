package history

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/streamlog"
)

// The stream log's follower and syncer (repl-log-size > 0).
//
//   - Writing: one goroutine, the follower, reads the stream like a replica,
//     through its own cursor, and appends every published byte to the log,
//     a batch of blocks per call (AppendBuffers), marking the batches that
//     end at the published end (whole commands).
//     It never slows the relay: if the disk falls behind by more than the
//     replica output limit, or fails, the follower lets go of its cursor,
//     the log stops ("down", counted, one WARN per outage) and the proxy
//     serves from memory as without a log; every Retry it starts the log
//     again, as a new generation from the memory backlog's first byte. A
//     new stream generation (an upstream full sync) starts a new log
//     generation too; a new replid is recorded as it happens.
//   - fsync: under FsyncAlways the follower syncs after every batch; under
//     FsyncEverySec a second goroutine, the syncer, syncs once a SyncEvery.
//     A failed sync is a fault of the log like a failed write: the syncer
//     ends the follower's round with it, and the follower stops the log
//     (down, counted, its WARN), so that INFO says so at once rather than at
//     the next append.

// Fsync is repl-log-fsync: when the stream log is fsynced.
type Fsync int

const (
	FsyncNo       Fsync = iota // never by the proxy: when the OS writes it back
	FsyncEverySec              // once a second, by the syncer
	FsyncAlways                // after every batch, by the follower
)

// FollowerConfig is what a Follower reads of the configuration: functions
// read the value in force each time, so that CONFIG SET takes effect at
// once.
type FollowerConfig struct {
	Fsync func() Fsync
	// BehindLimit is how far the log may fall behind the stream's end (the
	// replica output buffer's hard limit) before it stops; 0: no limit.
	BehindLimit func() int64
	// Retry is how long the log stays down after a failure before the
	// follower starts it again.
	Retry time.Duration
	// SyncEvery is the syncer's period under FsyncEverySec.
	SyncEvery time.Duration
	// Appended, when set, is called after every batch appended and when a
	// round ends (the log no longer follows), so that readers waiting at
	// the log's end look again; it must not block.
	Appended func()
}

// errLogBehind stops the log when the disk cannot keep up with the stream.
var errLogBehind = errors.New("the stream log fell behind the stream by more than the replica output buffer limit")

// ErrGenerationMoved is a stream generation that changed while a reader of
// the stream attached.
var ErrGenerationMoved = errors.New("the stream started a new generation")

// errSyncFailed marks a sync the syncer could not make.
var errSyncFailed = errors.New("stream log: sync failed")

// A Follower keeps the stream log following the history's stream (see the
// top of the file). Run's goroutine owns gen and down's transitions; the
// syncer, started and joined by Run, only ends a round (round); the
// atomics are read by INFO and /metrics.
type Follower struct {
	hist *History
	log  *streamlog.Log
	lg   hclog.Logger
	cfg  FollowerConfig

	gen     uint64      // the stream generation the log continues; Run's after it starts
	down    atomic.Bool // the log is not following the stream
	errors  atomic.Int64
	lastErr atomic.Pointer[string]

	round struct {
		sync.Mutex
		// end ends the follower's current round with a cause (the
		// syncer's failure); nil between rounds.
		end context.CancelCauseFunc
	}
}

// NewFollower returns the follower of h's stream into l, which h serves
// plans from (SetLog). lg names the log in its lines.
func NewFollower(h *History, l *streamlog.Log, lg hclog.Logger, cfg FollowerConfig) *Follower {
	return &Follower{hist: h, log: l, lg: lg, cfg: cfg}
}

// Recovered records that the log holds the stream's current generation,
// which RecoverFrom started at the log's end. Before Run only.
func (f *Follower) Recovered() {
	f.gen = f.hist.Stream().Generation()
	f.hist.LogFollows(f.gen)
}

// Down reports whether the log is not following the stream now.
func (f *Follower) Down() bool { return f.down.Load() }

// Errors counts the log's faults (each stop of the log, and each failed
// retry).
func (f *Follower) Errors() int64 { return f.errors.Load() }

// LastError is the last fault's message, or "".
func (f *Follower) LastError() string {
	if p := f.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// fault records why the log went down, and warns once per outage.
func (f *Follower) fault(err error) {
	f.errors.Add(1)
	msg := err.Error()
	f.lastErr.Store(&msg)
	if !f.down.Swap(true) {
		f.lg.Warn("stream log stopped: serving from memory only until it can resume",
			"error", err, "retry-in-ms", f.cfg.Retry.Milliseconds())
	}
}

// Run appends the stream to the log until ctx ends, then appends what is
// left (it is the last of the stream's readers to stop). It runs the syncer
// beside it and returns once both have stopped; the caller then closes the
// log.
func (f *Follower) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { f.syncLoop(ctx) })
	for {
		round, end := context.WithCancelCause(ctx)
		f.setRound(end)
		err := f.follow(round)
		f.setRound(nil)
		end(nil)
		// Whatever ended it, the log no longer follows the stream: no plan
		// may read it until the next round has reset or reattached it.
		f.hist.LogFollows(0)
		f.appended() // readers at its end look again
		if ctx.Err() != nil {
			return
		}
		if cause := context.Cause(round); errors.Is(cause, errSyncFailed) {
			err = cause
		}
		if errors.Is(err, replbuf.ErrReset) || errors.Is(err, ErrGenerationMoved) {
			continue // a new generation: the next round resets the log
		}
		f.fault(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.cfg.Retry):
		}
	}
}

// appended tells the readers at the log's end (FollowerConfig.Appended).
func (f *Follower) appended() {
	if f.cfg.Appended != nil {
		f.cfg.Appended()
	}
}

// setRound records how to end the current round (nil: none runs).
func (f *Follower) setRound(end context.CancelCauseFunc) {
	f.round.Lock()
	defer f.round.Unlock()
	f.round.end = end
}

// endRound ends the follower's current round, if one runs, with err.
func (f *Follower) endRound(err error) {
	f.round.Lock()
	defer f.round.Unlock()
	if f.round.end != nil {
		f.round.end(err)
	}
}

// follow attaches the follower's cursor where the log continues the stream,
// or resets the log to the memory backlog when it cannot, and then appends
// until an error, ctx's end (after a last drain) or a new generation.
func (f *Follower) follow(ctx context.Context) error {
	h := f.hist
	st := h.Stream()
	id, ok := h.AwaitHistory(ctx)
	if !ok {
		return ctx.Err()
	}
	gen := st.Generation()
	var cur *replbuf.Cursor
	if gen == f.gen && !f.down.Load() && f.log.Err() == nil && f.log.Identity().ReplID != "" {
		_, last := f.log.Bounds()
		cur, _ = st.Attach(last + 1) // nil when the memory no longer holds it
	}
	if cur == nil {
		memFirst, _ := st.Backlog()
		c, err := st.Attach(memFirst)
		if err != nil {
			return fmt.Errorf("attach to the stream: %w", err)
		}
		if err := f.log.Reset(id.log(), memFirst-1); err != nil {
			c.Close()
			return err
		}
		cur, f.gen = c, gen
	}
	defer cur.Close()
	if !h.LogFollows(gen) {
		return ErrGenerationMoved
	}
	if f.down.Swap(false) {
		f.lg.Info("stream log resumed", "offset", cur.Offset())
	}
	epoch := h.Epoch()
	for {
		if e := h.Epoch(); e != epoch {
			// A new replid at the same generation (+CONTINUE <new id>).
			epoch = e
			if err := f.log.SetIdentity(h.Identity().log()); err != nil {
				return err
			}
		}
		bufs, err := cur.Pending()
		if err != nil {
			return err
		}
		if len(*bufs) == 0 {
			if ctx.Err() != nil {
				return ctx.Err() // drained: everything published is in the log
			}
			if err := cur.Wait(ctx); err != nil && ctx.Err() == nil {
				return err
			}
			continue
		}
		var n int64
		for _, b := range *bufs {
			n += int64(len(b))
		}
		// The published end is always a command's end; a batch that
		// reaches it ends one.
		boundary := cur.Offset()+n-1 == st.Offset()
		// The whole batch in one call: records of up to RecordMax bytes,
		// each written by one writev of its blocks, not one per block.
		if err := f.log.AppendBuffers(*bufs, boundary); err != nil {
			return err
		}
		f.appended()
		if err := cur.Advance(n); err != nil {
			return err
		}
		if f.cfg.Fsync() == FsyncAlways {
			if err := f.log.Sync(); err != nil {
				return err
			}
		}
		if limit := f.cfg.BehindLimit(); limit > 0 && cur.Lag() > limit {
			return errLogBehind
		}
	}
}

// syncLoop syncs the log once a SyncEvery under FsyncEverySec, until ctx
// ends. A failed sync makes the log's error sticky; the follower's round
// is ended with it, so that the follower stops the log now (see the top of
// the file).
func (f *Follower) syncLoop(ctx context.Context) {
	t := time.NewTicker(f.cfg.SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f.cfg.Fsync() != FsyncEverySec || f.down.Load() {
				continue
			}
			// An empty log (no identity yet) has nothing to sync.
			if err := f.log.Sync(); err != nil && f.log.Identity().ReplID != "" {
				f.endRound(fmt.Errorf("%w: %w", errSyncFailed, err))
			}
		}
	}
}

// log converts the identity for the stream log.
func (id Identity) log() streamlog.Identity {
	return streamlog.Identity{ReplID: id.ReplID, ReplID2: id.ReplID2, SecondOffset: id.SecondOffset}
}

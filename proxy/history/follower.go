package history

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/streamlog"
)

// The stream log's follower and syncer (repl-log-size > 0). The follower
// is here; the start of a new log generation is follower_reset.go's, the
// syncer follower_sync.go's, and the lag's marks follower_lag.go's.
//
//   - Writing: one goroutine, the follower, reads the stream like a replica,
//     through its own cursor, and appends every published byte to the log,
//     a batch of blocks per call (AppendBuffers), marking the batches that
//     end at the published end (whole commands).
//     It never slows the relay: if the disk fails, the follower lets go of
//     its cursor, the log stops ("down", counted in Errors, one WARN per
//     outage) and the proxy serves from memory as without a log; every
//     Retry it starts the log again, as a new generation from the memory
//     backlog's first byte. A new stream generation (an upstream full sync)
//     starts a new log generation too; a new replid is recorded as it
//     happens.
//   - Falling behind: the follower's cursor pins every block from its
//     position to the stream's end, so a disk slower than the stream would
//     make memory grow with the distance. Past the memory window
//     (BehindLimit: the window replicas are sent from memory within) the
//     follower lets go of its cursor, which releases the blocks, and the
//     log restarts: it is down for Retry (counted in Restarts, not Errors,
//     one WARN per restart), then starts as a new generation from the
//     memory backlog (within half the window of the end, or from the end
//     when dropping the old segments took that long: reset), as after a
//     fault. A follower starved of CPU falls behind as a slow disk does,
//     and restarts the same way. The upstream is never read more
//     slowly for the log's sake: the primary would pay for the disk with
//     its own output buffer (past its client-output-buffer-limit it drops
//     the proxy, and a full sync is a fork), and every replica with its
//     latency, to keep history that only serves what memory no longer
//     holds. What a restart costs is that history: partial resyncs from
//     the log's older range, and replicas reading it, end with the old
//     generation (they resync, from memory or by a full sync); until the
//     new generation starts the log keeps its old range on disk, so a
//     crash meanwhile still restarts from it (PSYNC from its end, which the
//     primary serves while its backlog covers it). Within half the window
//     the follower appends whole batches; beyond it, one record
//     (streamlog.RecordMax) per call, so that it checks its lag at least
//     once per record written: the follower pins at most the window plus
//     what arrives while one record is written.
//   - Lag: Lag reports how far the log is behind the published stream, in
//     bytes (published minus appended) and in seconds (how long ago the
//     oldest byte not yet in the log was published), from a few marks of
//     (published end, time) the follower takes as it goes (lagMarks): no
//     cost per byte, and the age grows while a write blocks.
//   - fsync: under FsyncAlways the follower syncs after every batch; under
//     FsyncEverySec a second goroutine, the syncer, syncs once a SyncEvery
//     while the follower appends (an idle log costs no wake-up).
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
	// memory window) before the follower lets go and the log restarts as a
	// new generation (see the top of the file); 0: no limit.
	BehindLimit func() int64
	// Retry is how long the log stays down after a failure before the
	// follower starts it again.
	Retry time.Duration
	// SyncEvery is the syncer's period under FsyncEverySec.
	SyncEvery time.Duration
	// AppendEvery is how often a flowing stream is appended (see
	// appendInterval, the default when 0).
	AppendEvery time.Duration
	// Appended, when set, is called after every batch appended and when a
	// round ends (the log no longer follows), so that readers waiting at
	// the log's end look again; it must not block.
	Appended func()
}

// errLogBehind restarts the log when the disk cannot keep up with the stream.
var errLogBehind = errors.New("the stream log fell behind the stream by more than the memory window")

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

	gen      uint64      // the stream generation the log continues; Run's after it starts
	down     atomic.Bool // the log is not following the stream
	errors   atomic.Int64
	restarts atomic.Int64 // restarts for falling behind by more than BehindLimit
	lastErr  atomic.Pointer[string]

	// marks is what the log holds of the stream and when its end was
	// published, for Lag: what it holds is written by Run's goroutine
	// alone; marks are taken by it, the syncer and Lag's callers (INFO,
	// /metrics).
	marks lagMarks

	// gathering is the offset of the follower's cursor while it sleeps to
	// let the stream gather (see appendInterval), 0 otherwise: Nudge reads
	// it to wake the follower once gatherBytes are pending. Written by
	// Run's goroutine, and cleared by the Nudge that wakes it.
	gathering atomic.Int64
	// nudge ends a gathering sleep (capacity 1; Nudge's send never blocks).
	nudge chan struct{}
	// dirty tells the syncer that the follower appended (capacity 1;
	// the follower's send never blocks): an idle log costs no wake-up.
	dirty chan struct{}

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
	return &Follower{hist: h, log: l, lg: lg, cfg: cfg, nudge: make(chan struct{}, 1), dirty: make(chan struct{}, 1)}
}

// Nudge is told by the stream's producer, after it publishes, that the
// stream's end is end: it wakes a follower gathering the stream (see
// appendInterval) once gatherBytes are pending, so that a fast stream is
// appended a record at a time and pins no more, while a slow one costs the
// follower one wake-up per appendInterval, not one per publish. It never
// blocks, and costs an atomic load while the follower is not gathering.
func (f *Follower) Nudge(end int64) {
	from := f.gathering.Load()
	if from == 0 || end+1-from < gatherBytes {
		return
	}
	if f.gathering.CompareAndSwap(from, 0) {
		select {
		case f.nudge <- struct{}{}:
		default:
		}
	}
}

// Recovered records that the log holds the stream's current generation,
// which RecoverFrom started at the log's end. Before Run only.
func (f *Follower) Recovered() {
	f.gen = f.hist.Stream().Generation()
	_, last := f.log.Bounds()
	f.marks.appendedTo(f.gen, last)
	f.hist.LogFollows(f.gen)
}

// Down reports whether the log is not following the stream now.
func (f *Follower) Down() bool { return f.down.Load() }

// Errors counts the log's faults (each stop of the log, and each failed
// retry).
func (f *Follower) Errors() int64 { return f.errors.Load() }

// Restarts counts the times the log fell behind the stream by more than
// BehindLimit and restarted as a new generation.
func (f *Follower) Restarts() int64 { return f.restarts.Load() }

// Lag returns how far the log is behind the stream published: the bytes
// published and not yet appended, and how long ago (at now) the oldest of
// them was published, at least (see lagMarks); 0 and 0 when it holds all.
// Safe from any goroutine; it waits for no I/O.
func (f *Follower) Lag(now time.Time) (bytes int64, age time.Duration) {
	st := f.hist.Stream()
	end, gen := st.Offset(), st.Generation()
	b, age := f.marks.lag(gen, end, now, func() int64 { first, _ := st.Backlog(); return first - 1 })
	// Whoever asks marks the end as well, so that bytes published while the
	// follower is held by its disk are aged from this look on.
	f.marks.mark(gen, end, now)
	return b, age
}

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
// log. A fault of the log is retried, never returned: Run returns nil once
// ctx has ended.
func (f *Follower) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { f.syncLoop(ctx) })
	defer f.hist.LogReady(false)
	for {
		f.hist.LogReady(true)
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
			return nil
		}
		if cause := context.Cause(round); errors.Is(cause, errSyncFailed) {
			err = cause
		}
		if errors.Is(err, replbuf.ErrReset) || errors.Is(err, ErrGenerationMoved) {
			continue // a new generation: the next round resets the log
		}
		if errors.Is(err, errLogBehind) {
			f.restart()
		} else {
			f.fault(err)
		}
		f.hist.LogReady(false)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.cfg.Retry):
		}
	}
}

// restart records that the log fell behind by more than BehindLimit and
// let go of the stream: down until the next round starts it as a new
// generation, counted, and one WARN per restart (it was following, so each
// is a new event).
func (f *Follower) restart() {
	f.restarts.Add(1)
	lag, age := f.Lag(time.Now())
	f.down.Store(true)
	f.lg.Warn("stream log fell behind the memory window: restarting it as a new generation",
		"lag-bytes", lag, "lag-ms", age.Milliseconds(), "window-bytes", f.cfg.BehindLimit(), "retry-in-ms", f.cfg.Retry.Milliseconds())
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
// or resets the log to the memory backlog when it cannot (attach), and then
// appends (appendFrom) until an error, ctx's end (after a last drain) or a
// new generation.
func (f *Follower) follow(ctx context.Context) error {
	h := f.hist
	st := h.Stream()
	id, ok := h.AwaitHistory(ctx)
	if !ok {
		return ctx.Err()
	}
	gen := st.Generation()
	cur, restarted, err := f.attach(id, st, gen)
	if err != nil {
		return err
	}
	defer cur.Close()
	f.marks.appendedTo(gen, cur.Offset()-1)
	if !h.LogFollows(gen) {
		return ErrGenerationMoved
	}
	if f.down.Swap(false) {
		f.lg.Info("stream log resumed", "offset", cur.Offset(), "new-generation", restarted)
	}
	return f.appendFrom(ctx, st, cur, gen)
}

// attach returns a cursor of st at the byte after the log's last, when the
// log holds generation gen of the stream, follows it (not down, no error,
// an identity) and memory still holds that byte; otherwise it resets the
// log as a new generation (reset), records that the log continues gen, and
// reports restarted.
func (f *Follower) attach(id Identity, st *replbuf.Stream, gen uint64) (cur *replbuf.Cursor, restarted bool, err error) {
	if gen == f.gen && !f.down.Load() && f.log.Err() == nil && f.log.Identity().ReplID != "" {
		_, last := f.log.Bounds()
		if cur, _ = st.Attach(last + 1); cur != nil { // nil when the memory no longer holds it
			return cur, false, nil
		}
	}
	cur, err = f.reset(id, st)
	if err != nil {
		return nil, false, err
	}
	f.gen = gen
	return cur, true, nil
}

// appendFrom appends generation gen of st to the log from cur, a batch of
// blocks at a time, gathering between batches while the stream flows (see
// appendInterval), until an error, ctx's end once everything published is
// in the log, a new generation, or a lag past BehindLimit (errLogBehind).
// Under FsyncAlways each batch is synced as it is written. A new replid at
// the same generation is recorded as it happens.
func (f *Follower) appendFrom(ctx context.Context, st *replbuf.Stream, cur *replbuf.Cursor, gen uint64) error {
	h := f.hist
	epoch := h.Epoch()
	// gather holds the follower back while the stream gathers (see
	// appendInterval); created stopped, reused.
	gather := time.NewTimer(time.Hour)
	gather.Stop()
	defer gather.Stop()
	wrote := false // the last batch taken was written
	for {
		if e := h.Epoch(); e != epoch {
			// A new replid at the same generation (+CONTINUE <new id>).
			epoch = e
			if err := f.log.SetIdentity(h.Identity().log()); err != nil {
				return err
			}
		}
		// The published end now, before the batch is taken: the age of the
		// oldest byte not in the log is measured from marks like this one.
		f.marks.mark(gen, st.Offset(), time.Now())
		bufs, err := cur.Pending()
		if err != nil {
			return err
		}
		if len(*bufs) == 0 {
			if ctx.Err() != nil {
				return ctx.Err() // drained: everything published is in the log
			}
			// Under repl-log-fsync always each batch is synced as it is
			// written: nothing gathers.
			gathering := f.cfg.Fsync() != FsyncAlways
			// It wrote last time round: the stream is flowing, so it
			// gathers at once, without asking a publish to wake it first
			// (one wake-up per batch, not two). Idle, it waits for the
			// next publish, and then gathers.
			flowing := wrote && gathering
			wrote = false
			if !flowing {
				if err := cur.Wait(ctx); err != nil && ctx.Err() == nil {
					return err
				}
			}
			if flowing || (gathering && cur.Lag() < gatherBytes) {
				f.gather(ctx, gather, cur)
			}
			continue
		}
		limit := f.cfg.BehindLimit()
		if limit > 0 && cur.Lag() > limit {
			return errLogBehind // before writing: it woke that far behind
		}
		batch := *bufs
		if limit > 0 && cur.Lag() > behindBytes {
			// Behind: one record per call, so that the lag is checked after
			// every record written rather than every batch, and what one
			// slow write pins is what arrives while one record is written.
			batch = recordPrefix(batch)
		}
		var n int64
		for _, b := range batch {
			n += int64(len(b))
		}
		// The published end is always a command's end; a batch that
		// reaches it ends one.
		boundary := cur.Offset()+n-1 == st.Offset()
		// The whole batch in one call: records of up to RecordMax bytes,
		// each written by one writev of its blocks, not one per block.
		if err := f.log.AppendBuffers(batch, boundary); err != nil {
			return err
		}
		f.appended()
		select {
		case f.dirty <- struct{}{}:
		default:
		}
		wrote = true
		if err := cur.Advance(n); err != nil {
			return err
		}
		f.marks.appendedTo(gen, cur.Offset()-1)
		if f.cfg.Fsync() == FsyncAlways {
			if err := f.log.Sync(); err != nil {
				return err
			}
		}
		if limit > 0 && cur.Lag() > limit {
			return errLogBehind
		}
	}
}

// While the stream flows, the follower appends once per appendInterval, or
// as soon as gatherBytes are pending (the producer's Nudge), whichever comes
// first (unless repl-log-fsync is always, where each batch is synced as it
// is written): a paced stream of a few thousand small publishes a second
// costs the log ten wake-ups and writes a second rather than one per
// publish, which, with the runtime's scheduler and monitor threads each
// write wakes, would be most of the log's cost; a fast one is appended a
// record at a time. The interval bounds how much later than the replicas the
// log has a byte (what a crash of the proxy loses of the log, which the
// primary sends again), and gatherBytes what the follower pins while it
// gathers.
//
// A follower more than behindBytes behind writes one record per call.
const (
	appendInterval = 100 * time.Millisecond
	gatherBytes    = streamlog.RecordMax
	behindBytes    = 4 * streamlog.RecordMax
)

// gather sleeps while the stream gathers: AppendEvery, or until a Nudge
// says gatherBytes are pending, or ctx ends.
func (f *Follower) gather(ctx context.Context, t *time.Timer, cur *replbuf.Cursor) {
	f.gathering.Store(cur.Offset())
	// Published before the nudge could look: a stream that is already far
	// enough ahead is taken at once.
	if cur.Lag() >= gatherBytes {
		f.gathering.Store(0)
		return
	}
	t.Reset(cmp.Or(f.cfg.AppendEvery, appendInterval))
	select {
	case <-t.C:
	case <-f.nudge:
		t.Stop()
	case <-ctx.Done():
		t.Stop()
	}
	f.gathering.Store(0)
}

// recordPrefix is the first slices of batch that one record of the log
// takes (streamlog.RecordMax bytes at most; the first slice whatever its
// size).
func recordPrefix(batch [][]byte) [][]byte {
	var n int
	for i, b := range batch {
		if n += len(b); n > streamlog.RecordMax && i > 0 {
			return batch[:i]
		}
	}
	return batch
}

// log converts the identity for the stream log.
func (id Identity) log() streamlog.Identity {
	return streamlog.Identity{ReplID: id.ReplID, ReplID2: id.ReplID2, SecondOffset: id.SecondOffset}
}

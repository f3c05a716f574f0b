package history

import (
	"cmp"
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
// log.
func (f *Follower) Run(ctx context.Context) {
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
			return
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
			return
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
	restarted := false
	if gen == f.gen && !f.down.Load() && f.log.Err() == nil && f.log.Identity().ReplID != "" {
		_, last := f.log.Bounds()
		cur, _ = st.Attach(last + 1) // nil when the memory no longer holds it
	}
	if cur == nil {
		c, err := f.reset(id, st)
		if err != nil {
			return err
		}
		cur, f.gen, restarted = c, gen, true
	}
	defer cur.Close()
	f.marks.appendedTo(gen, cur.Offset()-1)
	if !h.LogFollows(gen) {
		return ErrGenerationMoved
	}
	if f.down.Swap(false) {
		f.lg.Info("stream log resumed", "offset", cur.Offset(), "new-generation", restarted)
	}
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
// as soon as gatherBytes are pending (the producer's Nudge), whichever
// comes first (unless repl-log-fsync is always, where each batch is synced
// as it is written): a paced stream of a few thousand small publishes a
// second costs the log ten wake-ups and writes a second rather than one
// per publish, which, with the runtime's scheduler and monitor threads
// each write woke, was most of the log's cost; a fast one is appended a
// record at a time. The interval bounds how much later than the replicas
// the log has a byte (what a crash of the proxy loses of the log, which
// the primary sends again), and gatherBytes what the follower pins while
// it gathers.
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

// reset starts a new generation of the log where memory holds the stream,
// and attaches there. The cursor attaches first and pins the stream from
// there while the log resets: a fresh generation (after a full sync) must
// begin where the snapshot's stream does, or a replica synced from that
// snapshot finds neither memory nor the log holding the bytes after it and
// the primary forks again for a fetch, and the reset's meta.json fsync can
// take a second on a disk busy with the very snapshot being written, while
// the stream runs at tens of MB/s. Dropping a long log's segments (removes
// and fsyncs) can take seconds, though, and what the cursor pins
// meanwhile is memory the limit is there to bound: the reset runs on a
// goroutine of its own while this one watches the cursor's lag, and lets
// go of it past the limit. Where it starts then moves on: the published
// end, attached first and reset after, which is quick with nothing left
// to drop.
func (f *Follower) reset(id Identity, st *replbuf.Stream) (*replbuf.Cursor, error) {
	limit := f.cfg.BehindLimit()
	// start is where a new generation begins: the memory backlog's first
	// byte, or within half the limit of the end when memory holds more
	// (what a slow replica pins, or blocks not yet trimmed), so that it does
	// not start already behind by more than all of it.
	from, held := st.Backlog()
	if limit > 0 && held > limit/2 {
		from = max(from, st.Offset()+1-limit/2)
	}
	// After a full sync, Install pinned the generation's first byte: the
	// log starts there, with the snapshot's stream.
	c := f.hist.TakeLogPin(st.Generation())
	if c != nil {
		from = c.Offset()
	} else if c2, err := st.Attach(from); err == nil {
		c = c2
	}
	done := make(chan error, 1)
	go func() { done <- f.log.Reset(id.log(), from-1) }()
	kept, err := f.watchReset(done, c, limit)
	if err != nil {
		if kept {
			c.Close()
		}
		return nil, err
	}
	if kept {
		return c, nil
	}
	// The reset took long enough for memory to let go of from, or to leave
	// it past half the limit behind: the generation starts at the published end
	// instead (a command's end, so PSYNC from the log asks for whole
	// commands). The end is read before attaching, so a burst published in
	// between may trim it first: then again, from the new end.
	for range 10 {
		from = st.Offset() + 1
		if c, err = st.Attach(from); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("attach to the stream: %w", err)
	}
	if err := f.log.Reset(id.log(), from-1); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// resetWatch is how often reset looks at what its cursor pins while the
// log resets.
const resetWatch = 10 * time.Millisecond

// watchReset waits for the reset running on its own goroutine to report on
// done, and meanwhile closes c (nil: none) once it is more than half the
// limit (0: none) behind the stream's end, so that a slow reset pins less
// than a slow follower may and the new generation does not start already
// close to a restart. It returns whether c is still open, and the reset's
// error.
func (f *Follower) watchReset(done <-chan error, c *replbuf.Cursor, limit int64) (kept bool, err error) {
	if c == nil {
		return false, <-done
	}
	if limit <= 0 {
		return true, <-done
	}
	t := time.NewTicker(resetWatch)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return true, err
		case <-t.C:
			if c.Lag() > limit/2 {
				c.Close()
				return false, <-done
			}
		}
	}
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

// syncLoop syncs the log under FsyncEverySec, once a SyncEvery at most
// and only after the follower appended, until ctx ends: an idle log is
// neither synced nor woken for, as Redis's everysec fsyncs only an AOF that
// grew; a sealed segment is synced at once. A failed sync makes the log's
// error sticky; the follower's round is ended with it, so that the follower
// stops the log now (see the top of the file).
func (f *Follower) syncLoop(ctx context.Context) {
	var last time.Time // when the last sync began
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		sealed := false
		select {
		case <-ctx.Done():
			return
		case <-f.dirty:
		case <-f.log.SealedReady():
			sealed = true
		}
		// The rest of the period since the last sync, unless a sealed
		// segment waits: synced now, here, so that the follower need not
		// sync it itself a few rolls later.
		if wait := time.Until(last.Add(f.cfg.SyncEvery)); !sealed && wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-f.log.SealedReady():
				t.Stop()
			}
		}
		// A mark per sync, whatever the follower does: while a write
		// holds it, the bytes published meanwhile get an age too.
		st := f.hist.Stream()
		f.marks.mark(st.Generation(), st.Offset(), time.Now())
		if f.cfg.Fsync() != FsyncEverySec || f.down.Load() {
			continue
		}
		last = time.Now()
		// An empty log (no identity yet) has nothing to sync.
		if err := f.log.Sync(); err != nil && f.log.Identity().ReplID != "" {
			f.endRound(fmt.Errorf("%w: %w", errSyncFailed, err))
		}
	}
}

// log converts the identity for the stream log.
func (id Identity) log() streamlog.Identity {
	return streamlog.Identity{ReplID: id.ReplID, ReplID2: id.ReplID2, SecondOffset: id.SecondOffset}
}

// lagMarkCount bounds the marks kept: one is taken per batch the follower
// takes, and only those past what the log holds are kept, so a few dozen
// cover a window of batches; past it new marks are skipped (see mark).
const lagMarkCount = 128

// lagMark says that by at, the stream was published up to off.
type lagMark struct {
	off int64
	at  time.Time
}

// lagMarks measures the log's lag (Follower.Lag). A mark (off, at) says
// that every byte up to off was published by at, so the first mark past
// what the log holds bounds the age of the oldest byte it lacks from
// below: it is at least now - at old. Marks are taken by the follower
// before each batch, by the syncer once a second and by every Lag, so the
// age is exact to a batch while the follower runs, and to a second (or the
// last look) while a write holds it; it errs low, never high. Its lock is a
// leaf, held for no I/O and no call out.
type lagMarks struct {
	sync.Mutex
	// Guarded by the mutex; written by the follower's goroutine.
	gen      uint64 // the stream generation appended is in
	appended int64  // the last offset the log holds
	valid    bool   // appended was set: the log follows or followed a stream
	ring     [lagMarkCount]lagMark
	head, n  int // the oldest mark's index in ring, and how many there are
}

// appendedTo records that the log holds generation gen's stream up to off,
// and forgets the marks it no longer needs. A new generation's offsets are
// another stream's: its marks start anew.
func (m *lagMarks) appendedTo(gen uint64, off int64) {
	m.Lock()
	defer m.Unlock()
	if gen != m.gen {
		m.head, m.n = 0, 0
	}
	m.gen, m.appended, m.valid = gen, off, true
	for m.n > 0 && m.ring[m.head].off <= off {
		m.head, m.n = (m.head+1)%lagMarkCount, m.n-1
	}
}

// mark records that by at the stream of generation gen was published up
// to end. A mark of another generation than the log's (read before a new
// one began) would date another stream's offsets, and is dropped. Nothing
// new since the newest mark keeps that one (its time is the earlier
// bound); with the ring full the mark is skipped, which only makes the age
// err lower for bytes no mark covers.
func (m *lagMarks) mark(gen uint64, end int64, at time.Time) {
	m.Lock()
	defer m.Unlock()
	if gen != m.gen || end <= m.appended || m.n == lagMarkCount {
		return
	}
	if m.n > 0 && m.ring[(m.head+m.n-1)%lagMarkCount].off >= end {
		return
	}
	m.ring[(m.head+m.n)%lagMarkCount] = lagMark{off: end, at: at}
	m.n++
}

// lag is Follower.Lag for a stream of generation gen published up to end.
// start gives the offset a stream of another generation than the log's
// starts after: all of it is lag. It is called without m's lock held (it
// takes the stream's).
func (m *lagMarks) lag(gen uint64, end int64, now time.Time, start func() int64) (int64, time.Duration) {
	m.Lock()
	valid, appended, sameGen := m.valid, m.appended, gen == m.gen
	var at time.Time
	for i := range m.n {
		if mk := m.ring[(m.head+i)%lagMarkCount]; mk.off > appended {
			at = mk.at
			break
		}
	}
	m.Unlock()
	if !valid {
		return 0, 0
	}
	if !sameGen {
		return max(end-start(), 0), 0
	}
	bytes := max(end-appended, 0)
	if bytes == 0 || at.IsZero() {
		return bytes, 0
	}
	return bytes, max(now.Sub(at), 0)
}

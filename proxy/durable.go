package proxy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/streamlog"
)

// The stream log (repl-log-size > 0): the stream kept in dir by package
// streamlog, so that partial resyncs reach further back than the memory
// backlog and survive a restart.
//
//   - Writing: one goroutine, the follower, reads the stream like a replica,
//     through its own cursor, and appends every published byte to the log,
//     marking the batches that end at the published end (whole commands).
//     It never slows the relay: if the disk falls behind by more than the
//     replica output limit, or fails, the follower lets go of its cursor,
//     the log stops ("down", counted, one WARN per outage) and the proxy
//     serves from memory as without a log; every logRetryInterval it starts
//     the log again, as a new generation from the memory backlog's first
//     byte. A new stream generation (an upstream full sync) starts a new
//     log generation too; a new replid is recorded as it happens.
//   - fsync: a second goroutine syncs once a second under `repl-log-fsync
//     everysec`; under `always` the follower syncs after every batch.
//   - Reading: planPartial serves an offset older than the memory backlog
//     from the log (history.mu, then the log's lock); the replica's writer
//     sends the log from there, verifying each record, and moves to the
//     shared blocks once its offset is in memory (replica_writer.go).
//   - Restart: New recovers the log (verifying every record) and, when it
//     holds a history, starts the stream at its end under its identity, so
//     that replicas continue from the log at once and the link asks the
//     primary for PSYNC <replid> <end+1>.
//   - dir is locked (replproxy.lock, dirlock.go) before the log opens, and
//     stays locked while the server lives: a second proxy on the same dir
//     refuses to start.
const (
	// logDirName is the log's directory inside dir.
	logDirName = "replproxy-log"
	// lockFileName is dir's lock file.
	lockFileName = "replproxy.lock"
	// logRetryInterval is how long the log stays down after a failure
	// before the follower starts it again.
	logRetryInterval = 5 * time.Second
)

// errLogBehind stops the log when the disk cannot keep up with the stream.
var errLogBehind = errors.New("the stream log fell behind the stream by more than the replica output buffer limit")

// durable is the stream log and its state. The follower goroutine owns gen
// and down's transitions; the atomics are read by INFO.
type durable struct {
	log *streamlog.Log
	rec streamlog.Recovery
	lg  hclog.Logger

	closeOnce sync.Once
	retry     time.Duration // logRetryInterval, or a test's

	gen     uint64      // the stream generation the log continues; follower-owned after Run starts
	down    atomic.Bool // the log is not following the stream
	errors  atomic.Int64
	lastErr atomic.Pointer[string]
}

// openDurable opens (recovering) the log in dir, which the caller has
// locked (dirlock.go). wrap, when not nil, wraps the log's file layer.
func openDurable(cfg *config.Config, lg hclog.Logger, wrap func(streamlog.FS) streamlog.FS) (*durable, error) {
	root, err := os.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("stream log: open dir: %w", err)
	}
	defer root.Close()
	if err := root.Mkdir(logDirName, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("stream log: %w", err)
	}
	sub, err := root.OpenRoot(logDirName)
	if err != nil {
		return nil, fmt.Errorf("stream log: %w", err)
	}
	var fsys streamlog.FS = streamlog.RootFS{Root: sub}
	if wrap != nil {
		fsys = wrap(fsys)
	}
	l, rec, err := streamlog.Open(streamlog.Options{FS: fsys, MaxBytes: cfg.ReplLogSize})
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("stream log: %w", err)
	}
	return &durable{log: l, rec: rec, lg: lg.Named("log")}, nil
}

// close syncs and closes the log. Once: Run's end and Close may both ask.
func (d *durable) close() {
	d.closeOnce.Do(func() {
		if err := d.log.Close(); err != nil {
			d.lg.Warn("stream log: final sync failed", "error", err)
		}
	})
}

// recovered applies what the log holds to the history and the link, before
// Run: the stream starts at the log's end under its identity.
func (s *Server) recovered(d *durable) {
	id := d.log.Identity()
	first, last := d.log.Bounds()
	rec := d.rec
	if rec.Problem != "" {
		d.lg.Warn("stream log: cut while recovering", "problem", rec.Problem, "cut-bytes", rec.Cut)
	}
	if id.ReplID == "" {
		d.lg.Info("stream log: empty")
		return
	}
	s.hist.RecoverFrom(id, last)
	d.gen = s.hist.Stream().Generation()
	s.hist.LogFollows(d.gen)
	s.up.ResumeFrom(last)
	d.lg.Info("stream log: history recovered", "replid", id.ReplID, "first-offset", first, "last-offset", last,
		"verified-bytes", rec.Verified, "unfinished-bytes", rec.Unfinished)
}

// fault records why the log went down, and warns once per outage.
func (d *durable) fault(err error) {
	d.errors.Add(1)
	msg := err.Error()
	d.lastErr.Store(&msg)
	if !d.down.Swap(true) {
		d.lg.Warn("stream log stopped: serving from memory only until it can resume",
			"error", err, "retry-in", d.retry)
	}
}

// runLogFollower appends the stream to the log until ctx ends, then appends
// what is left and closes the log. See the comment at the top of the file.
func (s *Server) runLogFollower(ctx context.Context) {
	d := s.durable
	defer d.close()
	for {
		err := s.followLog(ctx)
		// Whatever ended it, the log no longer follows the stream: no plan
		// may read it until the next round has reset or reattached it.
		s.hist.LogFollows(0)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, replbuf.ErrReset) || errors.Is(err, errGenerationMoved) {
			continue // a new generation: the next round resets the log
		}
		d.fault(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d.retry):
		}
	}
}

// errGenerationMoved is a stream generation that changed while the follower
// attached.
var errGenerationMoved = errors.New("the stream started a new generation")

// followLog attaches the follower's cursor where the log continues the
// stream, or resets the log to the memory backlog when it cannot, and then
// appends until an error, ctx's end (after a last drain) or a new
// generation.
func (s *Server) followLog(ctx context.Context) error {
	d := s.durable
	st := s.hist.Stream()
	id, ok := s.hist.AwaitHistory(ctx)
	if !ok {
		return ctx.Err()
	}
	gen := st.Generation()
	var cur *replbuf.Cursor
	if gen == d.gen && !d.down.Load() && d.log.Err() == nil && d.log.Identity().ReplID != "" {
		_, last := d.log.Bounds()
		cur, _ = st.Attach(last + 1) // nil when the memory no longer holds it
	}
	if cur == nil {
		memFirst, _ := st.Backlog()
		c, err := st.Attach(memFirst)
		if err != nil {
			return fmt.Errorf("attach to the stream: %w", err)
		}
		if err := d.log.Reset(logIdentity(id), memFirst-1); err != nil {
			c.Close()
			return err
		}
		cur, d.gen = c, gen
	}
	defer cur.Close()
	if !s.hist.LogFollows(gen) {
		return errGenerationMoved
	}
	if d.down.Swap(false) {
		d.lg.Info("stream log resumed", "offset", cur.Offset())
	}
	epoch := s.hist.Epoch()
	for {
		if e := s.hist.Epoch(); e != epoch {
			// A new replid at the same generation (+CONTINUE <new id>).
			epoch = e
			if err := d.log.SetIdentity(logIdentity(s.hist.Identity())); err != nil {
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
		for i, b := range *bufs {
			if err := d.log.Append(b, boundary && i == len(*bufs)-1); err != nil {
				return err
			}
		}
		if err := cur.Advance(n); err != nil {
			return err
		}
		if s.config().ReplLogFsync == config.FsyncAlways {
			if err := d.log.Sync(); err != nil {
				return err
			}
		}
		if limit := replicaHardLimit(s.config()); limit > 0 && cur.Lag() > limit {
			return errLogBehind
		}
	}
}

// runLogSyncer syncs the log once a second under repl-log-fsync everysec.
// A failed sync makes the log's error sticky; the follower then stops it.
func (s *Server) runLogSyncer(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.config().ReplLogFsync == config.FsyncEverySec && !s.durable.down.Load() {
				if err := s.durable.log.Sync(); err != nil && s.durable.log.Identity().ReplID != "" {
					s.durable.lg.Debug("stream log: sync failed", "error", err)
				}
			}
		}
	}
}

// logIdentity converts the history's identity for the log.
func logIdentity(id history.Identity) streamlog.Identity {
	return streamlog.Identity{ReplID: id.ReplID, ReplID2: id.ReplID2, SecondOffset: id.SecondOffset}
}

// minMemoryWindow is the least memoryWindow is.
const minMemoryWindow = 16 << 20

// memoryWindow is how far behind the stream's end a replica may be and still
// be sent from memory while the stream log runs: further behind, it reads
// from the log, so that replicas never pin more than this (durable.go). It
// is repl-backlog-size, at least minMemoryWindow.
func (s *Server) memoryWindow() int64 {
	return max(s.config().ReplBacklogSize, minMemoryWindow)
}

// logLive reports whether the stream log follows the stream now.
func (s *Server) logLive() bool {
	return s.durable != nil && !s.durable.down.Load()
}

// logReport is the stream log's state as INFO persistence and /metrics
// show it, read once so that both say the same.
type logReport struct {
	enabled bool   // repl-log-size > 0
	open    bool   // the log was opened; the fields below are read only then
	openErr string // why it could not be opened at start, when enabled and not open
	live    bool   // following the stream (status ok), not down
	size    int64  // repl-log-size
	fsync   string // repl-log-fsync
	replID  string
	stats   streamlog.Stats
	syncAge int64 // seconds since the last fsync; -1 before the first
	errors  int64
	lastErr string

	partialSyncs, movedToDisk int64 // from the server's stats
	recovered, cut            int64 // what recovery verified and cut at start
}

// fsyncLag is the bytes written to the log and not yet fsynced.
func (r logReport) fsyncLag() int64 { return max(r.stats.Last-r.stats.Synced, 0) }

// logReport reads the stream log's state.
func (s *Server) logReport(now time.Time) logReport {
	d := s.durable
	cfg := s.config()
	r := logReport{enabled: cfg.ReplLogSize > 0, openErr: s.logOpenErr}
	if d == nil {
		return r
	}
	r.open, r.live = true, !d.down.Load()
	r.size, r.fsync = cfg.ReplLogSize, string(cfg.ReplLogFsync)
	r.replID = d.log.Identity().ReplID
	r.stats = d.log.Stats()
	r.syncAge = -1
	if !r.stats.LastSync.IsZero() {
		r.syncAge = int64(now.Sub(r.stats.LastSync) / time.Second)
	}
	r.errors = d.errors.Load()
	if p := d.lastErr.Load(); p != nil {
		r.lastErr = *p
	}
	r.partialSyncs, r.movedToDisk = s.stats.logPartialSyncs.Load(), s.stats.replicasToDisk.Load()
	r.recovered, r.cut = d.rec.Verified, d.rec.Cut
	return r
}

// writeInfoLog writes the stream log's fields of INFO persistence.
func (s *Server) writeInfoLog(w infoWriter, now time.Time) {
	r := s.logReport(now)
	w.kv("repl_log_enabled", b2i(r.enabled))
	if !r.open {
		if r.openErr != "" {
			w.kv("repl_log_status", "failed")
			w.kv("repl_log_last_error", r.openErr)
		}
		return
	}
	status := "ok"
	if !r.live {
		status = "down"
	}
	st := r.stats
	w.kv("repl_log_status", status)
	w.kv("repl_log_size", r.size)
	w.kv("repl_log_fsync", r.fsync)
	w.kv("repl_log_replid", r.replID)
	w.kv("repl_log_first_offset", st.First)
	w.kv("repl_log_last_offset", st.Last)
	w.kv("repl_log_bytes", st.Bytes)
	w.kv("repl_log_segments", st.Segments)
	w.kv("repl_log_synced_offset", st.Synced)
	w.kv("repl_log_fsync_lag_bytes", r.fsyncLag())
	w.kv("repl_log_last_fsync_age", r.syncAge)
	w.kv("repl_log_errors", r.errors)
	w.kv("repl_log_last_error", r.lastErr)
	w.kv("repl_log_partial_syncs", r.partialSyncs)
	w.kv("repl_log_replicas_moved_to_disk", r.movedToDisk)
	w.kv("repl_log_recovered_bytes", r.recovered)
	w.kv("repl_log_recovery_cut_bytes", r.cut)
}

package proxy

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/streamlog"
)

// The stream log (repl-log-size > 0): the stream kept in dir by package
// streamlog, so that partial resyncs reach further back than the memory
// backlog and survive a restart.
//
//   - Writing and fsync: the follower and its syncer (history.Follower),
//     started by Run and joined at its end: every published byte is
//     appended, and a log that fails stops ("down") and is started again,
//     the relay never waiting for it; one that falls behind by more than
//     the memory window lets go of the stream's blocks and restarts as a
//     new generation (counted in repl_log_restarts), so that a disk slower
//     than the stream never grows memory past the window.
//   - Reading: planPartial serves an offset older than the memory backlog
//     from the log (History.mu, then the log's lock); the replica's writer
//     sends the log from there, verifying each record, and moves to the
//     shared blocks once its offset is in memory (package downstream).
//   - Restart: New recovers the log (verifying every record) and, when it
//     holds a history, starts the stream at its end under its identity, so
//     that replicas continue from the log at once and the link asks the
//     primary for PSYNC <replid> <end+1>.
//   - dir is locked (replproxy.lock, streamlog.LockDir) before the log opens, and
//     stays locked while the server lives: a second proxy on the same dir
//     refuses to start.
const (
	// logDirName is the log's directory inside dir.
	logDirName = "replproxy-log"
	// lockFileName is dir's lock file.
	lockFileName = streamlog.LockName
	// logRetryInterval is how long the log stays down after a failure
	// before the follower starts it again.
	logRetryInterval = 5 * time.Second
)

// durable is the stream log and its follower. Set by New, read-only after.
type durable struct {
	log    *streamlog.Log
	rec    streamlog.Recovery
	lg     hclog.Logger
	follow *history.Follower // appends the stream to log; its state is INFO's

	closeOnce sync.Once

	// appended wakes the replicas sending from the log's end (downstream)
	// when the follower has appended, or the log stopped following.
	appended downstream.LogSignal
}

// openDurable opens (recovering) the log in dir, which the caller has
// locked (dirlock.go). wrap, when not nil, wraps the log's file layer.
func openDurable(cfg *config.Config, lg hclog.Logger, wrap func(streamlog.FS) streamlog.FS) (*durable, error) {
	dirFS, err := streamlog.DirFS(cfg.Dir, logDirName)
	if err != nil {
		return nil, fmt.Errorf("stream log: %w", err)
	}
	var fsys streamlog.FS = dirFS
	if wrap != nil {
		fsys = wrap(fsys)
	}
	l, rec, err := streamlog.Open(streamlog.Options{FS: fsys, MaxBytes: cfg.ReplLogSize})
	if err != nil {
		dirFS.Root.Close()
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

// recover applies what the log holds to the history and the link, before
// Run: the stream starts at the log's end under its identity.
func (d *durable) recover(hist *history.History, up *upstream.Link) {
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
	hist.RecoverFrom(id, last)
	d.follow.Recovered()
	up.ResumeFrom(last)
	d.lg.Info("stream log: history recovered", "replid", id.ReplID, "first-offset", first, "last-offset", last,
		"verified-bytes", rec.Verified, "unfinished-bytes", rec.Unfinished)
}

// followerConfig is what d's follower reads of the configuration in force
// (conf), and how it wakes the replicas waiting at the log's end.
func (d *durable) followerConfig(conf *liveConfig, retry time.Duration) history.FollowerConfig {
	return history.FollowerConfig{
		Fsync: func() history.Fsync {
			switch conf.config().ReplLogFsync {
			case config.FsyncAlways:
				return history.FsyncAlways
			case config.FsyncEverySec:
				return history.FsyncEverySec
			}
			return history.FsyncNo
		},
		// The follower pins what it has not yet appended, as a replica pins
		// what it has not sent: a window bounds both (a disk slower than the
		// stream restarts the log instead of growing memory), the log's
		// repl-log-window.
		BehindLimit: func() int64 { return logBehindLimit(conf.config()) },
		Retry:       retry,
		SyncEvery:   time.Second,
		Appended:    d.appended.Notify,
	}
}

// minMemoryWindow is the least memoryWindow is.
const minMemoryWindow = 16 << 20

// memoryWindow is how far behind the stream's end a replica may be and still
// be sent from memory while the stream log runs under cfg: further behind,
// it reads from the log, so that replicas never pin more than this. It is
// repl-backlog-size, at least minMemoryWindow.
func memoryWindow(cfg *config.Config) int64 {
	return max(cfg.ReplBacklogSize, minMemoryWindow)
}

// logBehindLimit is how far the log's follower may fall behind the stream's
// end under cfg before the log restarts: repl-log-window, at least the
// memory window.
func logBehindLimit(cfg *config.Config) int64 {
	return max(memoryWindow(cfg), cfg.ReplLogWindow)
}

// live reports whether the stream log follows the stream now: false
// without one (d nil).
func (d *durable) live() bool {
	return d != nil && !d.follow.Down()
}

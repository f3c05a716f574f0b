package snapshots

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// Source is the upstream link's side links, as the snapshot work uses them;
// the link (*upstream.Link) is one.
type Source interface {
	// FetchSnapshot opens a side link to from (host:port; "": the
	// configured primary) and asks for a snapshot (REPLCONF rdb-only 1,
	// PSYNC ? -1). position, when not nil, is called with the source's
	// replid and offset: as its INFO replication says before the PSYNC
	// (announced false; not called when it does not say), then as its
	// +FULLRESYNC names them, before the payload (announced true); an
	// error from it ends the fetch, the payload unread. started is called
	// with the new snapshot and the payload's declared size (-1:
	// EOF-marked) once the payload's header arrived, before its first
	// byte; the payload then goes into the snapshot and the sink started
	// returns (nil: memory only); an error from started refuses the
	// payload unread. An error reply is an error that errors.As finds as a
	// *wire.RefusedError.
	FetchSnapshot(ctx context.Context, from string, position func(replID string, offset int64, announced bool) error,
		started func(sn *replbuf.Snapshot, size int64) (upstream.PayloadSink, error)) (*replbuf.Snapshot, error)
	// FetchFiltered asks from ("": the primary) for the RDB it makes under
	// REPLCONF rdb-filter-only filter, refusing one over limit bytes. The
	// refusal is an error that errors.As finds as a *wire.RefusedError.
	FetchFiltered(ctx context.Context, from, filter string, limit int64) (*replbuf.Snapshot, error)
	// Connected reports whether the main link streams from the primary.
	Connected() bool
}

// Host is what the snapshot work reads of the server it runs in, only
// where a decision needs it: the memory counted against maxmemory (a
// payload under evict-snapshots), and the stream log's extent (refresh,
// adoption); and the one change of the history it makes that the server
// acts on, a seed's new generation. Each call is made with no lock of this
// package held.
type Host interface {
	// CountedMemory is used_memory less what is not counted for eviction.
	CountedMemory() int64
	// LogBounds is the stream log's first and last offset, and whether it
	// follows the stream now (live).
	LogBounds() (first, last int64, live bool)
	// HistoryChanged is told of c, the new generation a seed's Begin
	// started (History.BeginAt), once it is made: the server disconnects
	// the replicas planned before it. On the upstream link's goroutine.
	HistoryChanged(c history.Change)
}

// Settings are the directives the snapshot work reads: the server gives
// them at New and again after every change of the configuration
// (Configure), so that a decision reads them without a call out.
type Settings struct {
	// Primary is the address of the primary replicaof names ("": none).
	Primary string
	// Source is the snapshot source snapshot-from names (host:port; "":
	// the primary), and Fallback snapshot-from-fallback (source.go).
	Source   string
	Fallback bool
	Dir      string
	// MaxMemory is maxmemory (0: none); EvictSnapshots says
	// maxmemory-policy is evict-snapshots, under which a payload goes to
	// dir past it.
	MaxMemory      int64
	EvictSnapshots bool
	// Refresh is repl-snapshot-refresh (0: off), MaxStreamSince
	// repl-snapshot-max-stream-since (0: a share of LogSize),
	// LogSize repl-log-size.
	Refresh        time.Duration
	MaxStreamSince int64
	LogSize        int64
}

// Options build a Keeper.
type Options struct {
	History *history.History
	Source  Source
	Host    Host
	Log     hclog.Logger
	// Durable says the stream log is open: snapshots are written to dir
	// with the metadata a restart adopts, a payload past payloadMemoryMax
	// goes to dir as it arrives, and the newest snapshot is persisted.
	Durable bool
	// Backoff is the upstream link's backoff rule: the wait after prev (0:
	// the first).
	Backoff func(prev time.Duration) time.Duration
	// MachineMemory bounds a payload held in memory whole (0: not known).
	MachineMemory func() int64
	// Settings are the directives in force at New (then Configure).
	Settings Settings
	// Random names temporary files (nil: crypto/rand); a test seam.
	Random io.Reader
}

// ErrClosed refuses work and a second Run once the Keeper was closed.
var ErrClosed = errors.New("snapshots: closed")

// A Keeper carries out the snapshot work the history decides: the shared
// fetch, where an arriving payload goes, spills, persists and refreshes,
// adoption and leftovers at start (see the package doc).
type Keeper struct {
	hist    *history.History
	src     Source
	host    Host
	log     hclog.Logger
	durable bool
	backoff func(time.Duration) time.Duration
	machine func() int64
	random  io.Reader
	grows   chan struct{} // capacity 1: a payload started (PayloadStarts)

	set atomic.Pointer[Settings] // the directives in force (Configure)

	// refreshAfter is when Refresh may next start a background fetch;
	// owned by Refresh's caller (the monitor).
	refreshAfter time.Time

	counts counters
	source sourceCounters
	retry  fetchRetry // the backoff every fetch shares

	// The work group. Work asked for before Run waits in queued; Run
	// starts it, and everything asked for until Run ends, on its own
	// goroutine; after Close or Run's end, work is refused (its undo runs).
	mu      sync.Mutex
	ctx     context.Context // Run's, once it began; guarded by mu
	cancel  context.CancelFunc
	queued  []job
	closed  bool
	running sync.WaitGroup // the work's goroutines
	done    chan struct{}  // closed when Run returns; set with ctx
}

// A job is one piece of background work: run, or undo when it will never
// run (the Keeper closed first).
type job struct {
	run  func(ctx context.Context)
	undo func()
}

// New returns a Keeper; its background work runs once Run does.
func New(opts Options) *Keeper {
	lg := opts.Log
	if lg == nil {
		lg = hclog.NewNullLogger()
	}
	machine := opts.MachineMemory
	if machine == nil {
		machine = func() int64 { return 0 }
	}
	k := &Keeper{hist: opts.History, src: opts.Source, host: opts.Host, log: lg, durable: opts.Durable,
		backoff: opts.Backoff, machine: machine, random: opts.Random, grows: make(chan struct{}, 1)}
	k.Configure(opts.Settings)
	return k
}

// Configure makes set the directives in force; any goroutine.
func (k *Keeper) Configure(set Settings) { k.set.Store(&set) }

// settings are the directives in force.
func (k *Keeper) settings() Settings { return *k.set.Load() }

// memoryGrows says on PayloadStarts that a payload starts to arrive; it
// never blocks (a signal not yet taken stands for this one too).
func (k *Keeper) memoryGrows() {
	select {
	case k.grows <- struct{}{}:
	default:
	}
}

// PayloadStarts receives when a payload, the main link's or a fetch's,
// starts to arrive, so that whoever watches memory may look (the server's
// monitor, if it is resting) without the Keeper calling it: the signals
// of several payloads started since the last receive are one.
func (k *Keeper) PayloadStarts() <-chan struct{} { return k.grows }

// Run runs the background work until ctx ends or Close is called, then
// waits for the work in progress (each piece sees its context end) and
// returns nil; on a Keeper already closed or run, ErrClosed.
func (k *Keeper) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k.mu.Lock()
	if k.closed || k.ctx != nil {
		k.mu.Unlock()
		return ErrClosed
	}
	k.ctx, k.cancel, k.done = ctx, cancel, make(chan struct{})
	defer close(k.done)
	queued := k.queued
	k.queued = nil
	for _, j := range queued {
		k.running.Go(func() { j.run(ctx) })
	}
	k.mu.Unlock()
	<-ctx.Done()
	k.mu.Lock()
	k.closed = true // no work starts after this
	k.mu.Unlock()
	k.running.Wait()
	return nil
}

// Close ends Run and waits for it; work queued before any Run is undone.
// Any number of calls, from any goroutine.
func (k *Keeper) Close() error {
	k.mu.Lock()
	k.closed = true
	cancel, done, queued := k.cancel, k.done, k.queued
	k.queued = nil
	k.mu.Unlock()
	for _, j := range queued {
		j.undo()
	}
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}

// start runs j on the work group, or undoes it and reports false when the
// Keeper is closed.
func (k *Keeper) start(j job) bool {
	k.mu.Lock()
	switch {
	case k.closed:
		k.mu.Unlock()
		j.undo()
		return false
	case k.ctx == nil:
		k.queued = append(k.queued, j)
	default:
		ctx := k.ctx
		k.running.Go(func() { j.run(ctx) })
	}
	k.mu.Unlock()
	return true
}

// Counts are the snapshot fetches made, as INFO and /metrics report them.
type Counts struct {
	Fetches  int64 // completed
	Failures int64 // attempts that failed
	ByReason [history.NumFetchReasons]int64
}

type counters struct {
	fetches  atomic.Int64
	failures atomic.Int64
	byReason history.FetchCounts
}

// Counts reads the counters; any goroutine.
func (k *Keeper) Counts() Counts {
	c := Counts{Fetches: k.counts.fetches.Load(), Failures: k.counts.failures.Load()}
	for i := range c.ByReason {
		c.ByReason[i] = k.counts.byReason[i].Load()
	}
	return c
}

package proxy

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/report"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// The monitor is the proxy's cron: the background loop Redis runs as
// clientsCron and replicationCron, with the proxy's own work beside
// theirs. Each round, in order: replica timeouts and output-buffer limits,
// retired snapshots released, maxmemory and eviction, the snapshot on disk
// persisted and refreshed, released memory given back to the OS, the
// supervisor's status.

// monitorInterval is how often the monitor checks replicas (Redis's
// clientsCron and replicationCron run at 10 Hz and 1 Hz).
const monitorInterval = 100 * time.Millisecond

// While nothing moves (see activity) for quietAfter, the monitor runs once
// per quietInterval instead: an idle proxy then wakes a few times a
// second in all, as an idle redis-server does, rather than ten times for
// the monitor alone, each wake-up also waking the runtime's own threads.
// Nothing it watches can change fast while nothing moves: a replica's
// buffer grows only with the stream, memory only with the stream or a
// payload, and repl-timeout is counted in seconds. Fewer than quietBytes
// moved count as nothing (the primary's PING every 10 s, a trickle of
// writes). The stream's producer, once quietBytes have come since, and a
// payload's start wake it at once (wakeIfMoved, and the snapshot work's
// PayloadStarts).
const (
	quietAfter    = time.Second
	quietInterval = time.Second
	quietBytes    = 64 << 10
)

// cron is the monitor: its loop's state, and the parts a round works on.
// Made by New once every one of those is; run is one of Run's actors.
type cron struct {
	// What a round reads and acts on. Read-only.
	conf        *liveConfig
	hist        *history.History
	stats       *report.Stats
	up          *upstream.Link
	clients     *registry
	durable     *durable // nil without the stream log
	mem         *memory
	snaps       *snapshots.Keeper
	supervision *supervision

	// rounds counts the completed rounds; written by the monitor only,
	// read by tests that must know a round has passed.
	rounds atomic.Int64
	// quiet says that the monitor runs at quietInterval (written by the
	// monitor, cleared by wakeNow), quietFrom the stream's end it compares
	// with meanwhile (written by the monitor); wake (capacity 1) ends its
	// wait.
	quiet     atomic.Bool
	quietFrom atomic.Int64
	wake      chan struct{}
}

func newCron(conf *liveConfig, hist *history.History, stats *report.Stats, up *upstream.Link, clients *registry,
	durable *durable, mem *memory, snaps *snapshots.Keeper, supervision *supervision) *cron {
	return &cron{conf: conf, hist: hist, stats: stats, up: up, clients: clients, durable: durable,
		mem: mem, snaps: snaps, supervision: supervision, wake: make(chan struct{}, 1)}
}

// run enforces the replica output-buffer limits and repl-timeout, and
// releases retired snapshots once nobody reads them, among a round's work.
// It closes a replica's connection, which ends its goroutines; it never
// waits on a replica. One of Run's actors: it returns nil once ctx ends.
func (m *cron) run(ctx context.Context) error {
	t := time.NewTimer(monitorInterval)
	defer t.Stop()
	var since activity       // what was seen when it last moved
	var stillSince time.Time // when that was
	for {
		now, ok := m.wait(ctx, t)
		if !ok {
			return nil
		}
		m.checkReplicas(now)
		m.releaseRetired()
		m.mem.enforceMaxMemory(now)
		m.snaps.Persist()
		m.snaps.Refresh(now)
		m.mem.returnReleasedMemory(now)
		m.supervision.notifyStatus()
		m.rounds.Add(1)
		next := monitorInterval
		if a := m.activity(); !a.stillSince(since) || stillSince.IsZero() {
			since, stillSince = a, now
		} else if now.Sub(stillSince) >= quietAfter {
			next = quietInterval
		}
		m.quietFrom.Store(since.streamEnd)
		m.quiet.Store(next == quietInterval)
		t.Reset(next)
	}
}

// wait waits for the next round: t's expiry, or a wake-up while the
// monitor is quiet (wakeNow, or a payload that starts to arrive, which the
// snapshot work signals). It returns when the round starts, false once ctx
// has ended.
func (m *cron) wait(ctx context.Context, t *time.Timer) (time.Time, bool) {
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, false
		case now := <-t.C:
			return now, true
		case <-m.wake:
		case <-m.snaps.PayloadStarts():
			// Memory grows: a quiet monitor looks now; a busy one runs
			// its next round soon enough.
			if !m.quiet.CompareAndSwap(true, false) {
				continue
			}
		}
		t.Stop()
		return time.Now(), true
	}
}

// wakeIfMoved runs the monitor's next round now if it is quiet (see
// quietAfter) and quietBytes of stream came since it went quiet; it never
// blocks, and costs an atomic load while the monitor is not quiet.
func (m *cron) wakeIfMoved() {
	if m.quiet.Load() && m.hist.Stream().Offset()-m.quietFrom.Load() >= quietBytes {
		m.wakeNow()
	}
}

// wakeNow runs the monitor's next round now if it is quiet.
func (m *cron) wakeNow() {
	if m.quiet.Load() && m.quiet.CompareAndSwap(true, false) {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// activity is what the monitor compares round to round to know that
// nothing moves: the stream, a payload or fetch arriving, bytes sent to
// replicas (a sync included), connections, and the upstream link's state.
type activity struct {
	streamEnd, replOutput, payloadBytes, fetchBytes, connections int64
	upstream                                                     upstream.State
}

func (m *cron) activity() activity {
	return activity{
		streamEnd:    m.hist.Stream().Offset(),
		replOutput:   m.stats.ReplOutputBytes.Load(),
		payloadBytes: m.stats.UpstreamRDBBytes.Load(),
		fetchBytes:   m.stats.SnapshotFetchBytes.Load(),
		connections:  m.stats.ConnectionsReceived.Load(),
		upstream:     m.up.State(),
	}
}

// stillSince reports whether nothing moved from b to a: no connection and
// no change of the link's state, and fewer than quietBytes moved in all.
// The stream's end counts only forward: a new generation starts it anew,
// and is a change of state.
func (a activity) stillSince(b activity) bool {
	moved := (a.streamEnd - b.streamEnd) + (a.replOutput - b.replOutput) +
		(a.payloadBytes - b.payloadBytes) + (a.fetchBytes - b.fetchBytes)
	return a.connections == b.connections && a.upstream == b.upstream &&
		a.streamEnd >= b.streamEnd && moved >= 0 && moved < quietBytes
}

// checkReplicas applies client-output-buffer-limit replica and repl-timeout.
// A replica's output buffer is what its cursor pins (Redis's formula). The
// hard limit is raised to the backlog size, as Redis does.
func (m *cron) checkReplicas(now time.Time) {
	cfg := m.conf.config()
	lim := downstream.Limits{
		Hard:       replicaHardLimit(cfg),
		Soft:       cfg.ClientOutputBufferLimit.Replica.Soft,
		SoftPeriod: cfg.ClientOutputBufferLimit.Replica.SoftPeriod,
		Timeout:    cfg.ReplTimeout,
		Live:       m.durable.live(),
		End:        m.hist.Stream().Offset(),
	}
	for _, r := range m.clients.replicaList() {
		if r.Closed() {
			continue
		}
		if reason, err := r.OverLimit(now, lim); reason != downstream.CloseNone {
			m.stats.ReplicasDropped.Add(1)
			r.Close(reason, err)
		}
	}
}

// replicaHardLimit is client-output-buffer-limit replica's hard limit as
// it applies: raised to the backlog size, as Redis does; 0 for none.
func replicaHardLimit(cfg *config.Config) int64 {
	hard := cfg.ClientOutputBufferLimit.Replica.Hard
	if hard > 0 && hard < cfg.ReplBacklogSize {
		hard = cfg.ReplBacklogSize
	}
	return hard
}

// releaseRetired gives back the blocks of replaced snapshots nobody reads.
func (m *cron) releaseRetired() {
	// Under maxmemory, memory given up is given back, not kept as free blocks.
	m.hist.ReleaseRetired(m.conf.config().MaxMemory > 0)
}

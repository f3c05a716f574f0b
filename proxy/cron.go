package proxy

import (
	"context"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/upstream"
)

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
// payload's start wake it at once (wakeMonitor, wakeMonitorNow).
const (
	quietAfter    = time.Second
	quietInterval = time.Second
	quietBytes    = 64 << 10
)

// monitor enforces the replica output-buffer limits and repl-timeout, and
// releases retired snapshots once nobody reads them. It closes a replica's
// connection, which ends its goroutines; it never waits on a replica. One
// of Run's actors: it returns nil once ctx ends.
func (s *Server) monitor(ctx context.Context) error {
	t := time.NewTimer(monitorInterval)
	defer t.Stop()
	var since activity       // what was seen when it last moved
	var stillSince time.Time // when that was
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return nil
		case now = <-t.C:
		case <-s.monitorWake:
			now = time.Now()
			t.Stop()
		}
		s.checkReplicas(now)
		s.releaseRetired()
		s.enforceMaxMemory(now)
		s.snaps.Persist()
		s.snaps.Refresh(now)
		s.returnReleasedMemory(now)
		s.supervision.notifyStatus()
		s.monitorRounds.Add(1)
		next := monitorInterval
		if a := s.activity(); !a.stillSince(since) || stillSince.IsZero() {
			since, stillSince = a, now
		} else if now.Sub(stillSince) >= quietAfter {
			next = quietInterval
		}
		s.monitorQuietFrom.Store(since.streamEnd)
		s.monitorQuiet.Store(next == quietInterval)
		t.Reset(next)
	}
}

// wakeMonitor runs the monitor's next round now if it is quiet (see
// quietAfter) and quietBytes of stream came since it went quiet; it never
// blocks, and costs an atomic load while the monitor is not quiet.
func (s *Server) wakeMonitor() {
	if s.monitorQuiet.Load() && s.hist.Stream().Offset()-s.monitorQuietFrom.Load() >= quietBytes {
		s.wakeMonitorNow()
	}
}

// wakeMonitorNow runs the monitor's next round now if it is quiet.
func (s *Server) wakeMonitorNow() {
	if s.monitorQuiet.Load() && s.monitorQuiet.CompareAndSwap(true, false) {
		select {
		case s.monitorWake <- struct{}{}:
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

func (s *Server) activity() activity {
	return activity{
		streamEnd:    s.hist.Stream().Offset(),
		replOutput:   s.stats.ReplOutputBytes.Load(),
		payloadBytes: s.stats.UpstreamRDBBytes.Load(),
		fetchBytes:   s.stats.SnapshotFetchBytes.Load(),
		connections:  s.stats.ConnectionsReceived.Load(),
		upstream:     s.up.State(),
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
func (s *Server) checkReplicas(now time.Time) {
	cfg := s.config()
	lim := downstream.Limits{
		Hard:       replicaHardLimit(cfg),
		Soft:       cfg.ClientOutputBufferLimit.Replica.Soft,
		SoftPeriod: cfg.ClientOutputBufferLimit.Replica.SoftPeriod,
		Timeout:    cfg.ReplTimeout,
		Live:       s.logLive(),
		End:        s.hist.Stream().Offset(),
	}
	for _, r := range s.clients.replicaList() {
		if r.Closed() {
			continue
		}
		if reason, err := r.OverLimit(now, lim); reason != downstream.CloseNone {
			s.stats.ReplicasDropped.Add(1)
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
func (s *Server) releaseRetired() {
	// Under maxmemory, memory given up is given back, not kept as free blocks.
	s.hist.ReleaseRetired(s.config().MaxMemory > 0)
}

// disconnectReplicas closes every replica planned before epoch, after a
// change of the history's identity (a new stream generation or replication
// ID) that made epoch. The change is made already: no lock is held while
// they close (closing logs). A replica planned since keeps its connection,
// as it did when the change and the disconnection were one step under one
// lock.
func (s *Server) disconnectReplicas(reason downstream.CloseReason, epoch uint64) {
	for _, r := range s.clients.replicaList() {
		if r.Epoch() < epoch {
			r.Close(reason, nil)
		}
	}
}

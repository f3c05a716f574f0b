package proxy

import (
	"context"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
)

// monitorInterval is how often the monitor checks replicas (Redis's
// clientsCron and replicationCron run at 10 Hz and 1 Hz).
const monitorInterval = 100 * time.Millisecond

// monitor enforces the replica output-buffer limits and repl-timeout, and
// releases retired snapshots once nobody reads them. It closes a replica's
// connection, which ends its goroutines; it never waits on a replica.
func (s *Server) monitor(ctx context.Context) {
	t := time.NewTicker(monitorInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.checkReplicas(now)
			s.releaseRetired()
			s.enforceMaxMemory(now)
			s.persistSnapshot()
			s.refetchBeforeStale(now)
			s.returnReleasedMemory(now)
			s.notifyStatus()
			s.monitorRounds.Add(1)
		}
	}
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
			s.stats.replicasDropped.Add(1)
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

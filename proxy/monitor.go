package proxy

import (
	"context"
	"errors"
	"time"
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
		}
	}
}

// The monitor's causes for dropping a replica, for its log line.
var (
	errReplicaHardLimit  = errors.New("output buffer over the hard limit (client-output-buffer-limit replica)")
	errReplicaSoftLimit  = errors.New("output buffer over the soft limit for too long (client-output-buffer-limit replica)")
	errReplicaAckTimeout = errors.New("timeout: no REPLCONF ACK for longer than repl-timeout")
)

// checkReplicas applies client-output-buffer-limit replica and repl-timeout.
// A replica's output buffer is what its cursor pins (Redis's formula). The
// hard limit is raised to the backlog size, as Redis does.
func (s *Server) checkReplicas(now time.Time) {
	cfg := s.config()
	lim := cfg.ClientOutputBufferLimit.Replica
	backlog := cfg.ReplBacklogSize
	timeout := cfg.ReplTimeout
	replicas := s.clients.replicaList()
	hard := lim.Hard
	if hard > 0 && hard < backlog {
		hard = backlog
	}
	live, end := s.logLive(), s.hist.stream().Offset()
	for _, r := range replicas {
		if r.closed() {
			continue
		}
		var cob int64
		c := r.cursor.Load()
		if c != nil {
			cob = c.OutputBufferSize()
		}
		if live {
			// With the stream log, replicas pin at most the window: the
			// limits bound how far behind the end a replica may be.
			cob = 0
			switch {
			case c != nil:
				cob = c.Lag()
			case r.onDisk.Load():
				cob = max(end+1-r.diskOff.Load(), 0)
			}
		}
		switch {
		case hard > 0 && cob >= hard:
			s.stats.replicasDropped.Add(1)
			r.close(closeOutputHardLimit, errReplicaHardLimit)
			continue
		case lim.Soft > 0 && cob >= lim.Soft:
			if r.softSince.IsZero() {
				r.softSince = now
			} else if now.Sub(r.softSince) > lim.SoftPeriod {
				s.stats.replicasDropped.Add(1)
				r.close(closeOutputSoftLimit, errReplicaSoftLimit)
				continue
			}
		default:
			r.softSince = time.Time{}
		}
		if r.State() == replicaOnline && !r.legacy && !r.hs.rdbOnly &&
			now.Sub(time.Unix(0, r.ackTime.Load())) > timeout {
			s.stats.replicasDropped.Add(1)
			r.close(closeReplicaTimeout, errReplicaAckTimeout)
		}
	}
}

// releaseRetired gives back the blocks of replaced snapshots nobody reads.
func (s *Server) releaseRetired() {
	// Under maxmemory, memory given up is given back, not kept as free blocks.
	s.hist.releaseRetired(s.config().MaxMemory > 0)
}

// disconnectReplicas closes every replica planned before epoch, after a
// change of the history's identity (a new stream generation or replication
// ID) that made epoch. The change is made already: no lock is held while
// they close (closing logs). A replica planned since keeps its connection,
// as it did when the change and the disconnection were one step under one
// lock.
func (s *Server) disconnectReplicas(reason closeReason, epoch uint64) {
	for _, r := range s.clients.replicaList() {
		if r.epoch < epoch {
			r.close(reason, nil)
		}
	}
}

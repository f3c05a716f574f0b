package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/replbuf"
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
			s.monitorRounds.Add(1)
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
	timeout := cfg.ReplTimeout
	replicas := s.clients.replicaList()
	hard := replicaHardLimit(cfg)
	live, end := s.logLive(), s.hist.Stream().Offset()
	for _, r := range replicas {
		if r.closed() {
			continue
		}
		cob := judgedOutput(r.cursor.Load(), live, r.onDisk.Load(), r.diskOff.Load(), end)
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

// judgedOutput is what a replica's limits are held against: the memory its
// cursor c pins (Redis's formula), or, while the stream log runs, how far
// behind the stream's end it is, since replicas then pin at most the
// window. A replica reading the log (onDisk, at diskOff; no cursor) is
// judged by its lag even while the log is down: its reader then fails or
// ends, it holds no memory to be judged by, and its lag is what it would
// pin back in memory.
func judgedOutput(c *replbuf.Cursor, live, onDisk bool, diskOff, end int64) int64 {
	switch {
	case c != nil && live:
		return c.Lag()
	case c != nil:
		return c.OutputBufferSize()
	case onDisk:
		return max(end+1-diskOff, 0)
	}
	return 0
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
func (s *Server) disconnectReplicas(reason closeReason, epoch uint64) {
	for _, r := range s.clients.replicaList() {
		if r.epoch < epoch {
			r.close(reason, nil)
		}
	}
}

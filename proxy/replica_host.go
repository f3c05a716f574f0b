package proxy

import (
	"context"
	"time"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/replbuf"
)

// The server's side of a replica (downstream.Host): what a replica needs of
// the server, given through a small interface so that the replica owns its
// connection and reaches into nothing else. One replicaHost per replica,
// made at PSYNC (beginSync); both of the replica's loops call it.
type replicaHost struct {
	s *Server
	c *client // the client the replica was
	// replconf is the command table's name of REPLCONF, which CLIENT LIST
	// shows as a replica's last command.
	replconf *string
}

var _ downstream.Host = (*replicaHost)(nil)

func (h *replicaHost) ReplTimeout() time.Duration { return h.s.config().ReplTimeout }

func (h *replicaHost) SyncRateLimit() int64 { return h.s.config().ReplLinkSyncRateLimit }

func (h *replicaHost) MemoryWindow() int64 { return h.s.memoryWindow() }

func (h *replicaHost) LogLive() bool { return h.s.logLive() }

func (h *replicaHost) LogAppended() <-chan struct{} { return h.s.durable.appended.Wait() }

func (h *replicaHost) LogCorrupt(err error) {
	h.s.durable.lg.Error("stream log: corrupt record, not sent", "error", err)
}

func (h *replicaHost) Acked() { h.s.replicaAcked() }

func (h *replicaHost) Replconf() { h.c.lastCmd.Store(h.replconf) }

// Command runs a replica's command through the admin dispatcher, as it ran
// before the replica owned its connection; the reply is dropped.
func (h *replicaHost) Command(args [][]byte) {
	h.s.dispatch(h.c, args)
	h.c.out = h.c.out[:0]
}

// Ended takes r out of the registry; the replica then leaves its fetch's
// waiters in the history itself: one lock at a time. A full sync that
// failed holds back the next snapshot fetch (snapshots.Keeper.FullSyncEnded),
// so that replicas failing their full syncs over and over do not cost a fork
// each time a new snapshot is needed.
func (h *replicaHost) Ended(r *downstream.Replica) {
	if !r.SyncCompleted() && fullSyncFailure(r.Reason()) {
		h.s.snaps.FullSyncEnded(false)
	}
	h.s.clients.removeReplica(r)
}

// FullSyncDone lets the next snapshot fetch go without waiting.
func (h *replicaHost) FullSyncDone() { h.s.snaps.FullSyncEnded(true) }

// fullSyncFailure reports whether a replica closed during its full sync for
// reason failed it: not the server's own doing (a kill, a shutdown, a new
// replid or stream generation), which asks for a new sync and is no sign of
// trouble.
func fullSyncFailure(reason downstream.CloseReason) bool {
	switch reason {
	case downstream.CloseKilled, downstream.CloseServerShutdown, downstream.CloseReplIDChanged,
		downstream.CloseGenerationChanged, downstream.CloseSnapshotSent:
		return false
	}
	return true
}

// FetchFiltered is the snapshot work's (snapshots.Keeper.FetchFiltered):
// the primary's refusal comes back as the *wire.RefusedError the replica
// passes on.
func (h *replicaHost) FetchFiltered(ctx context.Context, filter string) (*replbuf.Snapshot, error) {
	return h.s.snaps.FetchFiltered(ctx, filter)
}

// replicaCounters hands a new replica the counters it adds to.
func (s *Server) replicaCounters() downstream.Counters {
	return downstream.Counters{
		OutputBytes: &s.stats.ReplOutputBytes,
		Closes:      &s.stats.ReplicaCloses,
		Dropped:     &s.stats.ReplicasDropped,
		ToDisk:      &s.stats.ReplicasToDisk,
		Delays:      &s.stats.RelayDelays,
	}
}

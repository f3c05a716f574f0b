package proxy

import "github.com/replproxy/replproxy/proxy/downstream"

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

func (h *replicaHost) LogLive() bool { return h.s.durable.live() }

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
// waiters in the history itself: one lock at a time.
func (h *replicaHost) Ended(r *downstream.Replica) { h.s.clients.removeReplica(r) }

// replicaCounters hands a new replica the counters it adds to.
func (s *Server) replicaCounters() downstream.Counters {
	return downstream.Counters{
		OutputBytes: &s.stats.ReplOutputBytes,
		Closes:      &s.stats.ReplicaCloses,
		Dropped:     &s.stats.ReplicasDropped,
		ToDisk:      &s.stats.ReplicasToDisk,
		Delays:      &s.stats.RelayDelays,
		Syncs: downstream.SyncCounters{Full: &s.stats.SyncFull, PartialOK: &s.stats.SyncPartialOK,
			PartialErr: &s.stats.SyncPartialErr, FromLog: &s.stats.LogPartialSyncs, ByReason: &s.stats.FullSyncs},
	}
}

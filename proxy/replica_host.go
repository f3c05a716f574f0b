package proxy

import "time"

// The server's side of a replica (replicaHost, downstream.go): what a
// replica needs of the server, given through a small interface so that the
// replica owns its connection and reaches into nothing else.

var _ replicaHost = (*Server)(nil)

func (s *Server) replTimeout() time.Duration { return s.config().ReplTimeout }

func (s *Server) logAppended() <-chan struct{} { return s.durable.appended.wait() }

func (s *Server) logCorrupt(err error) {
	s.durable.lg.Error("stream log: corrupt record, not sent", "error", err)
}

// replicaCommand runs a replica's command through the admin dispatcher, as
// it ran before the replica owned its connection; the reply is dropped.
func (s *Server) replicaCommand(c *client, args [][]byte) {
	s.dispatch(c, args)
	c.out = c.out[:0]
}

// replicaEnded takes r out of the registry, then out of its fetch's waiters
// in the history: one lock at a time.
func (s *Server) replicaEnded(r *replica) {
	s.clients.removeReplica(r)
	s.hist.LeaveFetch(r.fetch)
}

// replicaCounters hands a new replica the counters it adds to.
func (s *Server) replicaCounters() replicaCounters {
	return replicaCounters{
		outputBytes: &s.stats.replOutputBytes,
		closes:      &s.stats.replicaCloses,
		dropped:     &s.stats.replicasDropped,
		toDisk:      &s.stats.replicasToDisk,
	}
}

package proxy

import (
	"context"
	"time"
)

// The graceful stop (SIGTERM, SHUTDOWN): no new clients, the upstream link
// ended so that the stream's end stays put, then up to shutdown-timeout for
// every replica to be sent, and to acknowledge, the stream up to that end;
// then Run stops as on its context ending, which also cuts the wait short
// (the program's answer to a second signal).

// drainPoll is how often the graceful stop looks at the replicas' progress.
const drainPoll = 10 * time.Millisecond

// Shutdown asks Run to stop gracefully and returns at once; Run returns when
// the replicas have caught up or shutdown-timeout has passed, whichever is
// first. Ending Run's context, or Close, still stops at once, during the
// wait too. Any goroutine, any number of times; on a server not running, Run
// will stop gracefully as soon as it starts.
func (s *Server) Shutdown() {
	s.drainOnce.Do(func() { close(s.drainReq) })
}

// drain is Run's graceful stop, on the stop actor's goroutine before the
// actors are stopped (server.go, actors): it closes the listeners, ends
// the upstream link (stopLink) and waits until it has ended (linkDone),
// then waits for the replicas to catch up. It returns at the deadline, or
// when ctx ends.
func (s *Server) drain(ctx context.Context, stopLink func(), linkDone <-chan struct{}) {
	timeout := s.config().ShutdownTimeout
	s.supervision.notifyStopping()
	s.log.Info("shutting down: no new clients; waiting for the replicas to receive the stream",
		"shutdown-timeout-ms", timeout.Milliseconds())
	s.listeners.close()
	stopLink()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	linkDown := false
	for {
		if !linkDown {
			select {
			case <-linkDone:
				linkDown = true
			default:
			}
		}
		behind := s.replicasBehind()
		if linkDown && behind == 0 {
			s.log.Info("every replica has the whole stream", "offset", s.hist.Stream().Offset())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			s.log.Warn("shutdown-timeout reached: closing replicas that are behind",
				"replicas-behind", behind, "offset", s.hist.Stream().Offset())
			return
		case <-linkDone:
		case <-tick.C:
		}
	}
}

// replicasBehind counts the connected replicas that do not yet have the
// whole stream: still in a full sync, with bytes not yet sent, or (when they
// ACK: not SYNC) not yet acknowledging the stream's end. Waiting for the ACK
// rather than the last write means the bytes reached the replica, not only
// the kernel's buffer, which a close could cut short (unread ACKs turn a
// close into a reset).
func (s *Server) replicasBehind() int {
	end := s.hist.Stream().Offset()
	n := 0
	for _, r := range s.clients.replicaList() {
		cur := r.Cursor()
		switch {
		case cur == nil, cur.Lag() > 0:
			n++
		case !r.Legacy() && r.AckOffset() < end:
			n++
		}
	}
	return n
}

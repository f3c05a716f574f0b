package downstream

import "sync"

// A LogSignal is a broadcast that wakes the replicas sending from the
// stream log's end (writer.sendLog): Wait returns a channel that the next
// Notify closes. The proxy holds one, notified by the log's follower after
// each append and when the log stops following, and hands out its Wait as
// Host.LogAppended. Any goroutine; mu is a leaf.
type LogSignal struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu; nil until someone waits
}

// Wait returns a channel closed by the next Notify. Take it before looking
// at the log, so that an append in between is not missed.
func (s *LogSignal) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify wakes every waiter; it costs a lock when nobody waits.
func (s *LogSignal) Notify() {
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

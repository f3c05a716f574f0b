package proxy

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
)

// The server's life: Run starts it once, Close ends it (at once), Shutdown
// asks for the graceful stop (SIGTERM, SHUTDOWN): no new clients, the
// upstream link ended so that the stream's end stays put, then up to
// shutdown-timeout for every replica to be sent, and to acknowledge, the
// stream up to that end; then Run stops as on its context ending, which
// also cuts the wait short (the program's answer to a second signal).

// drainPoll is how often the graceful stop looks at the replicas' progress.
const drainPoll = 10 * time.Millisecond

// lifecycle is the server's life: whether Run runs or Close was called,
// the graceful stop asked for, and the closers of what New made. Made by
// New once every part is; what a drain touches is handed to it then.
type lifecycle struct {
	mu     sync.Mutex         // a leaf, never held while waiting
	closed bool               // Close was called
	cancel context.CancelFunc // ends Run; set once Run started
	done   chan struct{}      // closed when Run returns; set with cancel

	// drainReq is closed by Shutdown (once, drainOnce): Run then stops
	// gracefully (drain).
	drainReq  chan struct{}
	drainOnce sync.Once

	// made is what New made that holds a resource, each part's closer in
	// the order the parts were made: Close runs it on a server that never
	// ran. Read-only once handed.
	made undoStack

	// What a drain reads and stops: the shutdown-timeout in force, the
	// listeners it closes, the stream's end and the replicas it waits for,
	// the supervisor it tells. Read-only.
	conf        *liveConfig
	log         hclog.Logger
	listeners   *listenerSet
	hist        *history.History
	clients     *registry
	supervision *supervision
}

func newLifecycle(made undoStack, conf *liveConfig, log hclog.Logger, listeners *listenerSet,
	hist *history.History, clients *registry, supervision *supervision) *lifecycle {
	return &lifecycle{drainReq: make(chan struct{}), made: made, conf: conf, log: log,
		listeners: listeners, hist: hist, clients: clients, supervision: supervision}
}

// begin records that Run runs, with the cancel that ends it; false when
// the server was closed or has run already.
func (l *lifecycle) begin(cancel context.CancelFunc) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.cancel != nil {
		return false
	}
	l.cancel, l.done = cancel, make(chan struct{})
	return true
}

// ended records that Run has returned: Close's waits end.
func (l *lifecycle) ended() { close(l.done) }

// running returns the channel closed when Run returns, nil before Run.
func (l *lifecycle) running() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// close ends Run and waits until it has returned; on a server that never
// ran it closes what New made.
func (l *lifecycle) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
		return
	}
	l.made.run()
}

// shutdown asks for the graceful stop; any goroutine, any number of times.
func (l *lifecycle) shutdown() {
	l.drainOnce.Do(func() { close(l.drainReq) })
}

// drainRequested is closed once the graceful stop is asked for.
func (l *lifecycle) drainRequested() <-chan struct{} { return l.drainReq }

// draining reports whether the graceful stop was asked for.
func (l *lifecycle) draining() bool {
	select {
	case <-l.drainReq:
		return true
	default:
		return false
	}
}

// drain is Run's graceful stop, on the stop actor's goroutine before the
// actors are stopped (run.go, actors): it closes the listeners, ends
// the upstream link (stopLink) and waits until it has ended (linkDone),
// then waits for the replicas to catch up. It returns at the deadline, or
// when ctx ends.
func (l *lifecycle) drain(ctx context.Context, stopLink func(), linkDone <-chan struct{}) {
	timeout := l.conf.config().ShutdownTimeout
	l.supervision.notifyStopping()
	l.log.Info("shutting down: no new clients; waiting for the replicas to receive the stream",
		"shutdown-timeout-ms", timeout.Milliseconds())
	l.listeners.close()
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
		end := l.hist.Stream().Offset()
		behind := replicasBehind(l.clients.replicaList(), end)
		if linkDown && behind == 0 {
			l.log.Info("every replica has the whole stream", "offset", l.hist.Stream().Offset())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			l.log.Warn("shutdown-timeout reached: closing replicas that are behind",
				"replicas-behind", behind, "offset", l.hist.Stream().Offset())
			return
		case <-linkDone:
		case <-tick.C:
		}
	}
}

// replicasBehind counts the replicas that do not yet have the whole stream
// up to end: still in a full sync, with bytes not yet sent, or (when they
// ACK: not SYNC) not yet acknowledging end. Waiting for the ACK rather than
// the last write means the bytes reached the replica, not only the
// kernel's buffer, which a close could cut short (unread ACKs turn a close
// into a reset).
func replicasBehind(replicas []*downstream.Replica, end int64) int {
	n := 0
	for _, r := range replicas {
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

// undoStack is what has been made so far of something made in steps: the
// closer of each part that holds a resource, pushed once the part is made.
type undoStack []func()

// push records the closer of a part just made.
func (u *undoStack) push(closer func()) { *u = append(*u, closer) }

// run closes every part, the last made first. Each closer may be called
// more than once.
func (u undoStack) run() {
	for _, closer := range slices.Backward(u) {
		closer()
	}
}

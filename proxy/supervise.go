package proxy

import (
	"sync"
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/upstream"
)

// What a supervisor (systemd under `supervised systemd`) is told of the
// server's life, as redis-server 7.0 tells it: that the server serves once
// its listeners accept connections (READY=1: a replica of the proxy may
// connect; like Redis, not waiting for the primary), a one-line status
// whenever the link to the primary or the readiness changes (STATUS=), and
// that it stops, at the start of a graceful stop or of a stop at once
// (STOPPING=1).

// A Supervisor is told of the server's life (Options.Supervisor). Ready is
// called once, from Run's goroutine before its actors start (the listeners
// are open: a connection waits in their queue for the accept loops);
// Status from the monitor's goroutine after that (within a round, 100 ms),
// only when the status changed; Stopping once, after Ready, from the stop
// actor's goroutine when a graceful stop begins, else from Run's goroutine
// (run.go, actors). No lock of the server is held during a call, which
// may do I/O but should not block for long.
type Supervisor interface {
	Ready(status string)
	Status(status string)
	Stopping()
}

// supervision is what the server tells its supervisor, and what it last
// told it. Made by New; Run's goroutine calls notifyReady, the monitor
// (cron.go) notifyStatus, the stop actor or a drain notifyStopping.
type supervision struct {
	// to is Options.Supervisor; nil: none, and every method does nothing.
	to Supervisor
	// ready is the readiness rule (/readyz's, metrics_port.go) and link the
	// upstream link's state: what a status line is made of.
	ready func() (ok bool, why string)
	link  func() upstream.State
	// last is the status last sent (nil before Ready): written once by
	// Run's goroutine, then by the monitor only.
	last atomic.Pointer[string]
	// stoppingOnce sends Stopping once.
	stoppingOnce sync.Once
}

func newSupervision(to Supervisor, ready func() (bool, string), link func() upstream.State) *supervision {
	return &supervision{to: to, ready: ready, link: link}
}

// notifyReady tells the supervisor that Run serves.
func (v *supervision) notifyReady() {
	if v.to == nil {
		return
	}
	// Redis's words. The link to the primary starts after this, so its
	// state is not known yet: the monitor's next round sends it.
	st := "Ready to accept connections"
	v.to.Ready(st)
	v.last.Store(&st) // after: no Status goes before Ready
}

// notifyStatus sends the status when it changed since the last one sent:
// monitor only, and nothing before notifyReady has.
func (v *supervision) notifyStatus() {
	if v.to == nil {
		return
	}
	last := v.last.Load()
	if last == nil {
		return
	}
	st := v.status()
	if *last == st {
		return
	}
	v.last.Store(&st)
	v.to.Status(st)
}

// notifyStopping tells the supervisor that the server stops, once.
func (v *supervision) notifyStopping() {
	if v.to == nil {
		return
	}
	v.stoppingOnce.Do(v.to.Stopping)
}

// status is the readiness rule (/readyz) as one line that changes only
// when the state does: the reason /readyz gives while serving from the
// history names offsets that move with every write, so it is left out.
func (v *supervision) status() string {
	ok, why := v.ready()
	st := v.link()
	switch {
	case ok && st == upstream.StateConnected:
		return "Ready: " + why
	case ok && st == upstream.StateNone:
		return "Ready: no upstream (replicaof no one); serving returning replicas from the history"
	case ok:
		return "Ready: upstream link " + st.String() + "; serving returning replicas from the history"
	}
	return "Not ready: " + why
}

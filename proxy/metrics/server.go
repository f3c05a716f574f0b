package metrics

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ShutdownWait bounds how long Shutdown waits for scrapes in progress.
const ShutdownWait = 5 * time.Second

// The monitoring port is reachable by whoever can reach the host (the
// Kubernetes example binds it to 0.0.0.0, and probes /healthz for liveness
// with a 2 s timeout), so what a stranger can make it hold is bounded, in
// time and in descriptors, and a probe on a new connection gets in however
// the others behave:
//
//   - MaxConns connections are served at once. The listener stops
//     accepting at the cap (limitListener): connections past it wait in the
//     kernel's accept queue, where they hold no descriptor of the process,
//     until a slot frees. A scraper and two probes need three; the cap is
//     counted in the proxy's descriptor budget (proxy.ReservedFDs), so
//     however many connections arrive the RESP port, the stream log and the
//     snapshot files keep theirs. Refusing at the cap instead (accept, then
//     close) would cost a descriptor and a goroutine per attempt and tell a
//     prober nothing it could retry on.
//   - at the cap, a slot belongs to a request, not to a connection: the
//     connection that has gone longest with no request in progress (idle
//     between keep-alive requests, or still sending its headers) is closed
//     for the one waiting, once that has lasted reclaimAfter; and every
//     reply is sent with "Connection: close", so a connection whose
//     requests follow each other closely gives its slot up after one. Both
//     are needed: the first alone leaves the port to clients that ask more
//     often than reclaimAfter, the second alone to clients that ask seldom
//     or send their headers slowly. A new connection thus waits about
//     reclaimAfter, or one reply (writeTimeout at most), however the 8
//     connections ahead of it behave; below the cap connections are kept
//     alive as usual. What it cannot skip is its turn in the accept queue:
//     N connections opened just before it, and then left silent, delay it
//     by about N/MaxConns times reclaimAfter.
//   - a slot is held for a bounded time: the request's headers within
//     readHeaderTimeout, the whole request within readTimeout, the reply
//     within writeTimeout (a client that does not read /metrics does not
//     pin its slot), and an idle keep-alive connection is closed after
//     idleTimeout. A scraper that reuses its connection less often than
//     that just connects again.
//   - headers are bounded by maxHeaderBytes: the three paths take no
//     parameters.
//   - with Auth, a request whose credentials must be compared (bcrypt,
//     tens of milliseconds each, one at a time) holds its slot while it
//     waits: at most half of MaxConns do (BasicAuth's maxQueued), and the
//     others are refused 429 at once, so that a flood of wrong passwords
//     leaves the other half of the slots turning for probes and scrapers.
const (
	// MaxConns is how many monitoring connections are served at once.
	MaxConns = 8

	// reclaimAfter is how long a connection must have gone without a
	// request in progress before, at the cap, its slot goes to a new one:
	// longer than a client on a network takes to send its request once
	// connected, short beside a probe's timeout of a second or two.
	reclaimAfter = 200 * time.Millisecond

	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 10 * time.Second
	maxHeaderBytes    = 16 << 10
)

// A Server is the monitoring HTTP server. Set its exported fields, then
// Listen; Serve serves until Shutdown, Close closes the listener of a server
// that will not serve.
type Server struct {
	// Figures returns every figure /metrics shows; it is called once per
	// scrape, on the scrape's goroutine, and must not block on I/O.
	Figures func() Figures
	// Ready is /readyz's rule: ok, and a one-line reason either way.
	Ready func() (ok bool, why string)
	// ErrorLog receives net/http's own errors (a failed accept, a failed
	// TLS handshake); nil means the standard logger.
	ErrorLog *log.Logger

	// TLS, when set, makes the port serve HTTPS with it (Serve wraps the
	// listener); nil serves plain HTTP. It should offer no ALPN protocol
	// but http/1.1: the port speaks HTTP/1.1, whose connections the cap
	// counts.
	TLS *tls.Config
	// Auth, when set, is asked of every request but /healthz's (a liveness
	// probe needs no credentials, and never waits behind a check): one
	// without credentials that pass gets 401 with WWW-Authenticate: Basic
	// realm="replproxy", one whose credentials Auth was too busy to
	// compare (BasicAuth's queue full) 429 with Retry-After. nil: no
	// authentication.
	Auth *BasicAuth
	// AuthFailed, when set, is called for each request refused 401, on its
	// goroutine, with the client's address and whether it sent credentials
	// at all; never with them.
	AuthFailed func(remote string, sentCredentials bool)
	// AuthBusy, when set, is called for each request refused 429, on its
	// goroutine, with the client's address.
	AuthBusy func(remote string)
	// Headers are set on every reply (a web configuration's
	// http_server_config headers).
	Headers map[string]string
	// Labels, when set, are added to every replproxy series of /metrics
	// (not the Go runtime's and the process's, which several servers in
	// one process share): a whole-cluster copy's shard.
	Labels map[string]string

	// idle and write, when set, replace idleTimeout and writeTimeout
	// (tests). Each alone: a short read or write timeout would close a
	// slow-scheduled connection before its reply under load, which is not
	// what a test of idle connections measures.
	idle, write time.Duration

	ln  *limitListener // set by Listen, read-only after
	srv *http.Server   // set by Listen, read-only after
}

// Attach makes ln, the monitoring listener its caller opened (metrics-bind
// and metrics-port), the one Serve serves: behind the connection cap, each
// connection under the timeouts. The Server owns ln from then on (Close,
// Shutdown).
func (m *Server) Attach(ln net.Listener) {
	m.ln = newLimitListener(ln, MaxConns, reclaimAfter)
	m.srv = &http.Server{
		Handler:           m.closeWhenFull(m.Handler()),
		ConnState:         m.ln.connState,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      cmp.Or(m.write, writeTimeout),
		IdleTimeout:       cmp.Or(m.idle, idleTimeout),
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          m.ErrorLog,
		// Not nil: no HTTP/2, which Serve would otherwise offer over TLS.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
}

// closeWhenFull has h's replies close their connection while every slot is
// taken, so that a connection holds its slot for one request when others
// wait for one.
func (m *Server) closeWhenFull(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.ln.full() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// Addr returns the listener's address.
func (m *Server) Addr() net.Addr { return m.ln.Addr() }

// Serve serves the listener until Shutdown; it then returns nil, else the
// error that ended it. It runs on its caller's goroutine, and net/http
// serves each connection on one of its own, the TLS handshake included
// (within readHeaderTimeout), when TLS is set.
func (m *Server) Serve() error {
	var ln net.Listener = m.ln
	if m.TLS != nil {
		ln = tls.NewListener(m.ln, m.TLS)
	}
	if err := m.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops Serve: it closes the listener, waits up to ShutdownWait for
// the scrapes in progress, then closes what is left. It does not wait for
// Serve to return; its caller does.
func (m *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownWait)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		m.srv.Close()
	}
}

// Close closes the listener of a server that will not serve (its owner
// failed to start, or stopped before serving). It may be called more than
// once.
func (m *Server) Close() error { return m.ln.Close() }

// Handler serves /metrics (Prometheus's text format, from a registry of the
// server's own: no global registry), /healthz (200 while the process serves
// HTTP) and /readyz (200 when Ready says so, else 503; the body is its one
// line), each reply with Headers, and every path but /healthz behind Auth
// when it is set.
func (m *Server) Handler() http.Handler {
	return m.guard(m.paths())
}

// guard sets Headers on every reply, and answers a request for any path
// but /healthz without credentials Auth accepts: 401, or 429 with
// Retry-After when Auth was too busy to compare them. /healthz is matched
// as it is, before the mux cleans the path: "/healthz/" or "//healthz" ask
// for credentials.
func (m *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range m.Headers {
			w.Header().Set(k, v)
		}
		if m.Auth != nil && r.URL.Path != "/healthz" {
			user, password, sent := r.BasicAuth()
			verdict := Failed
			if sent {
				verdict = m.Auth.Check(r.RemoteAddr, user, password)
			}
			switch verdict {
			case Busy:
				if m.AuthBusy != nil {
					m.AuthBusy(r.RemoteAddr)
				}
				tooManyRequests(w)
				return
			case Failed:
				if m.AuthFailed != nil {
					m.AuthFailed(r.RemoteAddr, sent)
				}
				unauthorized(w)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// paths is the mux of the three paths.
func (m *Server) paths() http.Handler {
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWith(m.Labels, reg).MustRegister(newCollector(m.Figures))
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := m.Ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	return mux
}

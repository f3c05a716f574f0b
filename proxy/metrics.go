package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// The monitoring HTTP server (metrics-port, metrics-bind) serves
//
//   - /metrics: Prometheus's text format, from a registry of the server's
//     own (no global registry). Every replproxy_ figure is read at scrape
//     time from what INFO reads (stats, the registry, the history, the
//     upstream link's status, the memory report): there is no second set of
//     counters, and CONFIG RESETSTAT resets the counters INFO stats shows
//     here too (Prometheus treats the drop as a counter reset).
//   - /healthz: 200 while the process serves HTTP.
//   - /readyz: 200 when replicas can be served (readiness), else 503; the
//     body is one line saying why.
//
// It is opened by New (so that a bad address fails the start) and has Run's
// lifetime: Run serves it and shuts it down last, after every replica is
// closed; Close closes it on a server that never ran.

// metricsShutdownWait bounds how long Run waits for scrapes in progress.
const metricsShutdownWait = 5 * time.Second

// The monitoring port is reachable by whoever can reach the host (the
// Kubernetes example binds it to 0.0.0.0), so what a stranger can make it
// hold is bounded, in time and in descriptors:
//
//   - metricsMaxConns connections are served at once. The listener stops
//     accepting at the cap (limitListener): connections past it wait in the
//     kernel's accept queue, where they hold no descriptor of the process,
//     until a slot frees. A scraper and two probes need three; the cap is
//     counted in the descriptor budget (ReservedFDs, fdbudget.go), so
//     however many connections arrive the RESP port, the stream log and the
//     snapshot files keep theirs. Refusing at the cap instead (accept, then
//     close) would cost a descriptor and a goroutine per attempt and tell a
//     prober nothing it could retry on.
//   - a slot is held for a bounded time: the request's headers within
//     metricsReadHeaderTimeout, the whole request within metricsReadTimeout,
//     the reply within metricsWriteTimeout (a client that does not read
//     /metrics no longer pins its slot), and an idle keep-alive
//     connection is closed after metricsIdleTimeout. A scraper that reuses
//     its connection less often than that just connects again.
//   - headers are bounded by metricsMaxHeaderBytes: the three paths take
//     no parameters.
const (
	metricsMaxConns          = 8
	metricsReadHeaderTimeout = 5 * time.Second
	metricsReadTimeout       = 10 * time.Second
	metricsWriteTimeout      = 10 * time.Second
	metricsIdleTimeout       = 10 * time.Second
	metricsMaxHeaderBytes    = 16 << 10
)

// listenMetrics opens the monitoring listener when metrics-port is set.
func (s *Server) listenMetrics(cfg *config.Config) error {
	if cfg.MetricsPort == 0 {
		return nil
	}
	network, host := "tcp", cfg.MetricsBind
	switch host {
	case "*":
		network, host = "tcp4", ""
	case "::*":
		network, host = "tcp6", "::"
	}
	ln, err := net.Listen(network, net.JoinHostPort(host, strconv.Itoa(cfg.MetricsPort)))
	if err != nil {
		return fmt.Errorf("listen for metrics on %s port %d: %w", cfg.MetricsBind, cfg.MetricsPort, err)
	}
	s.metricsLn = newLimitListener(ln, metricsMaxConns)
	return nil
}

// MetricsAddr returns the monitoring server's address, or nil when
// metrics-port is 0.
func (s *Server) MetricsAddr() net.Addr {
	if s.metricsLn == nil {
		return nil
	}
	return s.metricsLn.Addr()
}

// closeMetricsListener closes the monitoring listener of a server that will
// not serve it (New failed, or Close before Run).
func (s *Server) closeMetricsListener() {
	if s.metricsLn != nil {
		s.metricsLn.Close()
	}
}

// serveMetrics starts the monitoring server on its listener and returns the
// function that stops it, waiting for scrapes in progress (up to
// metricsShutdownWait) and for the serving goroutine. With no listener it
// does nothing.
func (s *Server) serveMetrics() (stop func()) {
	if s.metricsLn == nil {
		return func() {}
	}
	srv := &http.Server{
		Handler:           s.metricsHandler(),
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      cmp.Or(s.metricsWrite, metricsWriteTimeout),
		IdleTimeout:       cmp.Or(s.metricsIdle, metricsIdleTimeout),
		MaxHeaderBytes:    metricsMaxHeaderBytes,
		ErrorLog:          s.log.StandardLogger(nil),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(s.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server failed", "error", err)
		}
	}()
	s.log.Info("metrics server listening", "address", s.metricsLn.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), metricsShutdownWait)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}
}

// metricsHandler serves /metrics, /healthz and /readyz.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newCollector(s),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := s.readiness()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(w, why)
	})
	return mux
}

// readiness is /readyz's rule. The proxy is ready when
//
//   - the upstream link is up (state connected: streaming from the
//     primary), or
//   - it is not, but the history can serve replicas that return
//     (history.servable): a sync with the primary has completed and the
//     backlog holds at least one byte, so a replica whose offset lies in it
//     continues by partial resync. The stream does not advance until the link
//     is back, and a new replica's full sync waits for it (-NOMASTERLINK).
//
// It is not ready while a graceful stop drains, nor before its first sync
// (whether or not replicaof is set), nor with an empty backlog. why is a
// one-line reason either way.
func (s *Server) readiness() (ok bool, why string) {
	select {
	case <-s.drainReq:
		return false, "shutting down"
	default:
	}
	st := s.up.State()
	if st == upstream.StateConnected {
		return true, "upstream link up"
	}
	link := "upstream link " + st.String()
	if st == upstream.StateNone {
		link = "no upstream (replicaof no one)"
	}
	ok, why = s.hist.Servable()
	if ok {
		return true, link + "; serving from history: " + why
	}
	return false, link + "; " + why
}

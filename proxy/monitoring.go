package proxy

import (
	"fmt"
	"net"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// The monitoring HTTP server (metrics-port, metrics-bind; package metrics)
// serves
//
//   - /metrics: every replproxy_ figure, read at scrape time into the same
//     report INFO is written from (reporting.go; package report renders
//     both): there is no second set of counters, and CONFIG RESETSTAT
//     resets the counters INFO stats shows here too (Prometheus treats the
//     drop as a counter reset).
//   - /healthz: 200 while the process serves HTTP.
//   - /readyz: readiness, below.
//
// It is opened by New (so that a bad address fails the start) and has Run's
// lifetime: Run serves it and shuts it down last, after every replica is
// closed; Close closes it on a server that never ran.

// listenMetrics opens the monitoring listener when metrics-port is set.
func (s *Server) listenMetrics(cfg *config.Config) error {
	if cfg.MetricsPort == 0 {
		return nil
	}
	m := &metrics.Server{
		Figures:  s.figures,
		Ready:    s.readiness,
		ErrorLog: s.log.StandardLogger(nil),
	}
	ln, err := listen.TCP(cfg.MetricsBind, cfg.MetricsPort)
	if err != nil {
		return fmt.Errorf("listen for metrics on %s port %d: %w", cfg.MetricsBind, cfg.MetricsPort, err)
	}
	m.Attach(ln)
	s.monitoring = m
	return nil
}

// figures is what a scrape of /metrics renders: one report, whole, as
// package report renders it.
func (s *Server) figures() metrics.Figures { return s.report(reportAll).Figures() }

// MetricsAddr returns the monitoring server's address, or nil when
// metrics-port is 0.
func (s *Server) MetricsAddr() net.Addr {
	if s.monitoring == nil {
		return nil
	}
	return s.monitoring.Addr()
}

// closeMetricsListener closes the monitoring listener of a server that will
// not serve it (New failed, or Close before Run).
func (s *Server) closeMetricsListener() {
	if s.monitoring != nil {
		s.monitoring.Close()
	}
}

// serveMetrics starts the monitoring server on its listener and returns the
// function that stops it, waiting for scrapes in progress (up to
// metrics.ShutdownWait) and for the serving goroutine. With no listener it
// does nothing.
func (s *Server) serveMetrics() (stop func()) {
	m := s.monitoring
	if m == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Serve(); err != nil {
			s.log.Error("metrics server failed", "error", err)
		}
	}()
	s.log.Info("metrics server listening", "address", m.Addr().String())
	return func() {
		m.Shutdown()
		<-done
	}
}

// readiness is /readyz's rule. The proxy is ready when
//
//   - the upstream link is up (state connected: streaming from the
//     primary), or
//   - it is not, but the history can serve replicas that return
//     (History.Servable): a sync with the primary has completed and the
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

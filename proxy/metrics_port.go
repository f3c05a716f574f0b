package proxy

import (
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/webconfig"
)

// The monitoring HTTP server (metrics-port, metrics-bind; package metrics)
// serves
//
//   - /metrics: every replproxy_ figure, read at scrape time into the same
//     report INFO is written from (report_read.go; package report renders
//     both): there is no second set of counters, and CONFIG RESETSTAT
//     resets the counters INFO stats shows here too (Prometheus treats the
//     drop as a counter reset).
//   - /healthz: 200 while the process serves HTTP.
//   - /readyz: readiness, below.
//
// It is opened by New (so that a bad address, or a bad metrics-web-config
// file, fails the start) and has Run's lifetime: Run serves it and shuts it
// down last, after every replica is closed; Close closes it on a server
// that never ran.
//
// Securing it (secureMetrics), both read at start only:
//
//   - metrics-tls yes: HTTPS with the proxy's own TLS material, the one
//     tls-port serves (its certificate, and tls-auth-clients' client
//     certificates), taken at each handshake from the material in force
//     (listenerTLS), so that CONFIG SET tls-* reloads it here too.
//   - metrics-web-config: a Prometheus web configuration file (package
//     webconfig). Its basic_auth_users guard every path but /healthz; its
//     tls_server_config, when present, serves HTTPS with its own files in
//     place of metrics-tls, read again when they change.
//
// A request refused 401 is counted (metrics_auth_failures) and logged at
// most once per logEvery, with the client's address, never what it sent;
// so is one refused 429 because the password checks were busy
// (metrics_auth_throttled: package metrics bounds what a flood of wrong
// passwords may hold), and net/http's own errors (a failed TLS
// handshake), which a stranger can cause at will.

// listenMetrics opens the monitoring listener when metrics-port is set,
// after reading metrics-web-config; labels are added to every replproxy
// series (Options.MetricsLabels).
func (s *Server) listenMetrics(cfg *config.Config, labels map[string]string) error {
	if cfg.MetricsPort == 0 {
		return nil
	}
	m := &metrics.Server{
		Figures:  s.figures,
		Ready:    s.readiness,
		ErrorLog: log.New(metricsErrorLog{s}, "", 0),
		Labels:   labels,
	}
	if err := s.secureMetrics(m, cfg); err != nil {
		return err
	}
	ln, err := listen.TCP(cfg.MetricsBind, cfg.MetricsPort)
	if err != nil {
		return fmt.Errorf("listen for metrics on %s port %d: %w", cfg.MetricsBind, cfg.MetricsPort, err)
	}
	m.Attach(ln)
	s.monitoring = m
	return nil
}

// secureMetrics sets m's TLS and authentication from metrics-tls and
// metrics-web-config. A web configuration that cannot be read, parsed or
// checked, or whose TLS files cannot be loaded, is an error naming
// metrics-web-config, the file and the problem.
func (s *Server) secureMetrics(m *metrics.Server, cfg *config.Config) error {
	var web *webconfig.Config
	if path := cfg.MetricsWebConfig; path != "" {
		w, err := webconfig.Load(path)
		if err != nil {
			return fmt.Errorf("metrics-web-config: %w", err)
		}
		web = w
	}
	switch {
	case web != nil && web.TLS != nil:
		if cfg.MetricsTLS {
			s.log.Warn("metrics-tls yes: the monitoring port serves the tls_server_config of metrics-web-config instead", "path", cfg.MetricsWebConfig)
		}
		m.TLS = web.TLS.ServerConfig(func(err error) {
			if ok, n := s.protect.webTLSLog.allow(time.Now(), logEvery); ok {
				s.log.Warn("metrics-web-config: TLS files not reloaded, the ones loaded before are served", "path", cfg.MetricsWebConfig, "error", err, "suppressed", n)
			}
		})
	case cfg.MetricsServesTLS():
		m.TLS = listenerTLS(&s.conf)
	}
	if web == nil {
		return nil
	}
	m.Headers = web.Headers
	if len(web.Users) > 0 {
		auth, err := metrics.NewBasicAuth(web.Users)
		if err != nil { // webconfig has checked every hash
			return fmt.Errorf("metrics-web-config: %s: basic_auth_users: %w", cfg.MetricsWebConfig, err)
		}
		m.Auth, m.AuthFailed, m.AuthBusy = auth, s.metricsAuthFailed, s.metricsAuthBusy
	}
	return nil
}

// metricsAuthFailed counts a monitoring request refused 401 and logs it at
// most once per logEvery: a stranger may send thousands.
func (s *Server) metricsAuthFailed(remote string, sentCredentials bool) {
	s.stats.MetricsAuthFailures.Add(1)
	if ok, n := s.protect.webAuthLog.allow(time.Now(), logEvery); ok {
		if sentCredentials {
			s.log.Warn("monitoring request refused: wrong user name or password", "address", remote, "suppressed", n)
		} else {
			s.log.Warn("monitoring request refused: no credentials", "address", remote, "suppressed", n)
		}
	}
}

// metricsAuthBusy counts a monitoring request refused 429 (its credentials
// not checked: as many password checks as may wait were waiting) and logs
// it at most once per logEvery: a flood is thousands a second.
func (s *Server) metricsAuthBusy(remote string) {
	s.stats.MetricsAuthThrottled.Add(1)
	if ok, n := s.protect.webBusyLog.allow(time.Now(), logEvery); ok {
		s.log.Warn("monitoring request refused: too many password checks waiting", "address", remote, "suppressed", n)
	}
}

// metricsErrorLog is the monitoring server's ErrorLog: net/http's lines (a
// failed TLS handshake, an accept error), which a stranger can cause at
// will, logged at most once per logEvery.
type metricsErrorLog struct{ s *Server }

func (w metricsErrorLog) Write(p []byte) (int, error) {
	if ok, n := w.s.protect.httpLog.allow(time.Now(), logEvery); ok {
		w.s.log.Warn("metrics server error", "error", strings.TrimSpace(string(p)), "suppressed", n)
	}
	return len(p), nil
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
	if s.life.draining() {
		return false, "shutting down"
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

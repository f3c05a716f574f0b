package tlsconf

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
)

// TestReloadNeeded: the material is read again when TLS comes into use, when
// a tls-* value changes while it is, and whenever CONFIG SET names a tls-*
// directive (rotation under the same names); never without TLS.
func TestReloadNeeded(t *testing.T) {
	plain := config.DefaultConfig()
	withTLS := plain.Clone()
	withTLS.TLSPort, withTLS.TLSCertFile, withTLS.TLSKeyFile = 6380, "a.crt", "a.key"
	rotated := withTLS.Clone()
	rotated.TLSCertFile = "b.crt"
	withMetrics := withTLS.Clone()
	withMetrics.MetricsPort, withMetrics.MetricsTLS = 9121, true
	metricsOnly := withMetrics.Clone()
	metricsOnly.TLSPort = 0
	for _, tc := range []struct {
		name       string
		prev, next *config.Config
		force      bool
		want       bool
	}{
		{"no TLS", plain, plain, true, false},
		{"TLS comes into use", plain, withTLS, false, true},
		{"unchanged", withTLS, withTLS, false, false},
		{"named by CONFIG SET", withTLS, withTLS, true, true},
		{"a file changed", withTLS, rotated, false, true},
		{"metrics-tls comes into use", withTLS, withMetrics, false, true},
		{"metrics-tls alone, named by CONFIG SET", metricsOnly, metricsOnly, true, true},
	} {
		if got := ReloadNeeded(tc.prev, tc.next, tc.force); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if !Names("tls-cert-file") || Names("port") {
		t.Error("Names: tls-* only")
	}
}

// TestLoadRefusesMissingFiles: without TLS there is no material; a
// certificate that cannot be read fails the load, naming the directive.
func TestLoadRefusesMissingFiles(t *testing.T) {
	if m, err := Load(config.DefaultConfig()); m != nil || err != nil {
		t.Fatalf("Load without TLS = %v, %v", m, err)
	}
	cfg := config.DefaultConfig()
	dir := t.TempDir()
	cfg.TLSPort, cfg.TLSCertFile, cfg.TLSKeyFile = 6380, filepath.Join(dir, "none.crt"), filepath.Join(dir, "none.key")
	if _, err := Load(cfg); err == nil || !strings.Contains(err.Error(), "tls-cert-file") {
		t.Fatalf("Load of missing files: %v", err)
	}
}

// TestLoadMetricsTLS: metrics-tls yes (with a metrics-port) alone builds the
// server config the monitoring port serves, with tls-port's certificate and
// client authentication (tls-auth-clients); tls-replication alone builds
// none, and metrics-tls without a metrics-port needs no material.
func TestLoadMetricsTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	cfg := config.DefaultConfig()
	cfg.MetricsTLS = true
	cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSCACertFile = pki.Cert, pki.Key, pki.CACert
	if m, err := Load(cfg); m != nil || err != nil {
		t.Fatalf("metrics-tls without metrics-port: %v, %v", m, err)
	}
	cfg.MetricsPort = 9121
	for _, tc := range []struct {
		auth config.TLSAuth
		want tls.ClientAuthType
	}{
		{config.TLSAuthYes, tls.RequireAndVerifyClientCert},
		{config.TLSAuthOptional, tls.VerifyClientCertIfGiven},
		{config.TLSAuthNo, tls.NoClientCert},
	} {
		cfg.TLSAuthClients = tc.auth
		m, err := Load(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if m.Server == nil || m.Client != nil || len(m.Server.Certificates) != 1 || m.Server.ClientAuth != tc.want {
			t.Fatalf("tls-auth-clients %s: material %+v", tc.auth, m)
		}
	}
	cfg.MetricsTLS, cfg.TLSReplication = false, true
	if m, err := Load(cfg); err != nil || m.Server != nil || m.Client == nil {
		t.Fatalf("tls-replication alone: %+v, %v", m, err)
	}
}

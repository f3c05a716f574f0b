package tlsconf

import (
	"path/filepath"
	"strings"
	"testing"

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

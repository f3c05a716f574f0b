package config

import (
	"crypto/tls"
	"slices"
	"testing"
)

// TestTLSVersions checks what tls-protocols hands to crypto/tls: Redis's
// default is TLSv1.2 and TLSv1.3, and a set of consecutive versions is a range.
func TestTLSVersions(t *testing.T) {
	for _, tc := range []struct {
		value  string
		lo, hi uint16
	}{
		{"", tls.VersionTLS12, tls.VersionTLS13},
		{"TLSv1.2", tls.VersionTLS12, tls.VersionTLS12},
		{"TLSv1.3", tls.VersionTLS13, tls.VersionTLS13},
		{"TLSv1.3 TLSv1.2", tls.VersionTLS12, tls.VersionTLS13},
		{"tlsv1 tlsv1.1", tls.VersionTLS10, tls.VersionTLS11},
	} {
		c := DefaultConfig()
		if err := c.Set("tls-protocols", tc.value); err != nil {
			t.Fatal(err)
		}
		if lo, hi := c.TLSVersions(); lo != tc.lo || hi != tc.hi {
			t.Errorf("tls-protocols %q: versions %x..%x, want %x..%x", tc.value, lo, hi, tc.lo, tc.hi)
		}
	}
}

// TestTLSCipherSuites checks that OpenSSL names become Go's suite IDs.
func TestTLSCipherSuites(t *testing.T) {
	c := DefaultConfig()
	if got := c.TLSCipherSuites(); got != nil {
		t.Fatalf("default suites = %v, want nil (Go's defaults)", got)
	}
	if err := c.Set("tls-ciphers", "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA"); err != nil {
		t.Fatal(err)
	}
	want := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA}
	if got := c.TLSCipherSuites(); !slices.Equal(got, want) {
		t.Fatalf("suites = %v, want %v", got, want)
	}
	// Every OpenSSL name in the table must be one Go implements.
	for name := range openSSLCiphers {
		if _, err := parseTLSCiphers(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Package tlsconf builds the TLS material a configuration names (tls-port,
// tls-replication, metrics-tls): the certificates, key and CAs read from its
// files into a server and a client tls.Config, as Redis's tlsConfigure does, and the
// rule for when a change of configuration reads them again. A Material is
// read-only once built; any goroutine may use it.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/replproxy/replproxy/proxy/config"
)

// Material is the TLS material of one configuration. Read-only once built.
type Material struct {
	// Server is for tls-port's connections, and the monitoring port's under
	// metrics-tls yes (the same certificate and the same client
	// authentication, tls-auth-clients); nil when neither is served.
	Server *tls.Config
	Client *tls.Config // for the upstream link; nil when tls-replication is no
}

// Load reads the certificates, key and CAs cfg names, as Redis's
// tlsConfigure does, and builds the server and client configs. It returns
// nil when cfg uses no TLS. cfg has been validated.
func Load(cfg *config.Config) (*Material, error) {
	if !cfg.UsesTLS() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls-cert-file %s, tls-key-file %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
	}
	clientCert := cert
	if cfg.TLSClientCertFile != "" {
		if clientCert, err = tls.LoadX509KeyPair(cfg.TLSClientCertFile, cfg.TLSClientKeyFile); err != nil {
			return nil, fmt.Errorf("tls-client-cert-file %s, tls-client-key-file %s: %w", cfg.TLSClientCertFile, cfg.TLSClientKeyFile, err)
		}
	}
	roots, err := loadCAs(cfg.TLSCACertFile, cfg.TLSCACertDir)
	if err != nil {
		return nil, err
	}
	lo, hi := cfg.TLSVersions()
	suites := cfg.TLSCipherSuites()
	st := &Material{}
	if cfg.TLSPort != 0 || cfg.MetricsServesTLS() {
		st.Server = &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    roots,
			ClientAuth:   clientAuth(cfg.TLSAuthClients),
			MinVersion:   lo,
			MaxVersion:   hi,
			CipherSuites: suites,
		}
	}
	if cfg.TLSReplication {
		st.Client = &tls.Config{
			// Redis (OpenSSL with SSL_VERIFY_PEER) checks that the primary's
			// certificate chains to the CAs, not the host name it was dialled
			// by; verifyChain does the same, so Go's name check is off.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				return verifyChain(cs.PeerCertificates, roots, x509.ExtKeyUsageServerAuth)
			},
			// Always present the certificate: a primary with tls-auth-clients
			// yes demands one, and OpenSSL sends no list of acceptable CAs
			// that Go's default selection could match.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &clientCert, nil },
			MinVersion:           lo,
			MaxVersion:           hi,
			CipherSuites:         suites,
		}
	}
	return st, nil
}

// clientAuth maps tls-auth-clients to Go's policy, as Redis maps it to
// OpenSSL's verify mode.
func clientAuth(a config.TLSAuth) tls.ClientAuthType {
	switch a {
	case config.TLSAuthNo:
		return tls.NoClientCert
	case config.TLSAuthOptional:
		return tls.VerifyClientCertIfGiven
	}
	return tls.RequireAndVerifyClientCert
}

// loadCAs reads the CA file and every PEM file of the CA directory (OpenSSL
// looks up hashed names there; reading them all trusts the same set).
func loadCAs(file, dir string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	var paths []string
	if file != "" {
		paths = append(paths, file)
	}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("tls-ca-cert-dir: %w", err)
		}
		for _, e := range entries {
			if e.Type().IsRegular() || e.Type()&os.ModeSymlink != 0 {
				paths = append(paths, filepath.Join(dir, e.Name()))
			}
		}
	}
	for _, p := range paths {
		pem, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("CA certificates: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) && p == file {
			return nil, fmt.Errorf("CA certificates: %s holds no PEM certificate", p)
		}
	}
	return pool, nil
}

// verifyChain checks that certs (leaf first) chain to roots for usage.
func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(certs) == 0 {
		return errors.New("no certificate presented")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// ReloadNeeded reports whether a change from prev to next needs the TLS
// material read again: TLS comes into use, or a tls-* value changed while
// it is. force is a CONFIG SET that named a tls-* directive: Redis-style
// certificate rotation, where the files change under the same names.
func ReloadNeeded(prev, next *config.Config, force bool) bool {
	if !next.UsesTLS() {
		return false
	}
	if force || !prev.UsesTLS() {
		return true
	}
	return prev.TLSPort != next.TLSPort || prev.TLSReplication != next.TLSReplication ||
		prev.MetricsServesTLS() != next.MetricsServesTLS() ||
		prev.TLSCertFile != next.TLSCertFile || prev.TLSKeyFile != next.TLSKeyFile ||
		prev.TLSClientCertFile != next.TLSClientCertFile || prev.TLSClientKeyFile != next.TLSClientKeyFile ||
		prev.TLSCACertFile != next.TLSCACertFile || prev.TLSCACertDir != next.TLSCACertDir ||
		prev.TLSAuthClients != next.TLSAuthClients || prev.TLSProtocols != next.TLSProtocols ||
		prev.TLSCiphers != next.TLSCiphers || prev.TLSCiphersuites != next.TLSCiphersuites
}

// Names reports whether a CONFIG SET parameter is a tls-* directive.
func Names(name string) bool { return strings.HasPrefix(name, "tls-") }

package webconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
)

// TLS is a tls_server_config: its settings, read-only once parsed, and the
// material loaded from its files, read again when they change.
type TLS struct {
	certFile, keyFile, caFile string // "" when inline (or no client CA)
	cert, key, ca             []byte // the inline PEM, when not a file
	clientAuth                tls.ClientAuthType
	allowedSANs               []string
	minVersion, maxVersion    uint16
	cipherSuites              []uint16
	curves                    []tls.CurveID

	mu struct {
		sync.Mutex
		conf   *tls.Config   // the config in force, shared by handshakes
		stamps []fs.FileInfo // what the files were when conf was read: certFile, keyFile, caFile
	}
}

// ClientAuth is client_auth_type's policy.
func (t *TLS) ClientAuth() tls.ClientAuthType { return t.clientAuth }

// ServerConfig returns the tls.Config to serve with. Each handshake takes
// the material in force, read again first when one of its files has
// changed since it was read (another file, size or modification time: a
// rotated certificate, a Kubernetes secret's new link). When that read
// fails (a certificate written before its key), the handshake is served
// with the material in force, the read is tried again at the next one, and
// reloadFailed, when set, is called with the error (it may be called at
// every handshake: its caller limits what it logs).
//
// The config offers no ALPN protocol: the port speaks HTTP/1.1.
func (t *TLS) ServerConfig(reloadFailed func(error)) *tls.Config {
	return &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			conf, err := t.current()
			if err != nil && reloadFailed != nil {
				reloadFailed(err)
			}
			return conf, nil
		},
	}
}

// current returns the config in force, after reading the files again if
// they changed; err is a failure to read them, the old config staying.
func (t *TLS) current() (*tls.Config, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.changedLocked() {
		return t.mu.conf, nil
	}
	if err := t.loadLocked(); err != nil {
		return t.mu.conf, err
	}
	return t.mu.conf, nil
}

// load reads the material for the first time (Load: a failure fails the
// start).
func (t *TLS) load() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loadLocked()
}

// files are the file names the material comes from, in stamps' order.
func (t *TLS) files() []string { return []string{t.certFile, t.keyFile, t.caFile} }

// changedLocked reports whether a file differs from when it was read, or
// cannot be looked at (then the read says why). REQUIRES: t.mu held.
func (t *TLS) changedLocked() bool {
	for i, name := range t.files() {
		if name == "" {
			continue
		}
		was := t.mu.stamps[i]
		fi, err := os.Stat(name)
		if err != nil || was == nil || !os.SameFile(fi, was) || fi.Size() != was.Size() || !fi.ModTime().Equal(was.ModTime()) {
			return true
		}
	}
	return false
}

// loadLocked reads the files and builds the config; on error nothing
// changes. The files are looked at before they are read, so that a change
// during the read is seen at the next handshake. REQUIRES: t.mu held.
func (t *TLS) loadLocked() error {
	stamps := make([]fs.FileInfo, 3)
	for i, name := range t.files() {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("%s: %w", fileKey(i), err)
		}
		stamps[i] = fi
	}
	read := func(i int, name string, inline []byte) ([]byte, error) {
		if name == "" {
			return inline, nil
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileKey(i), err)
		}
		return b, nil
	}
	certPEM, err := read(0, t.certFile, t.cert)
	if err != nil {
		return err
	}
	keyPEM, err := read(1, t.keyFile, t.key)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair's errors name no file and quote no key.
		return fmt.Errorf("%s, %s: %w", describe(0, t.certFile), describe(1, t.keyFile), err)
	}
	conf := &tls.Config{
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       t.clientAuth,
		MinVersion:       t.minVersion,
		MaxVersion:       t.maxVersion,
		CipherSuites:     t.cipherSuites,
		CurvePreferences: t.curves,
	}
	if t.caFile != "" || len(t.ca) > 0 {
		caPEM, err := read(2, t.caFile, t.ca)
		if err != nil {
			return err
		}
		if conf.ClientCAs, err = clientCAs(caPEM, describe(2, t.caFile)); err != nil {
			return err
		}
	}
	if t.allowedSANs != nil {
		sans := t.allowedSANs
		conf.VerifyConnection = func(cs tls.ConnectionState) error { return checkSANs(cs.PeerCertificates, sans) }
	}
	t.mu.conf, t.mu.stamps = conf, stamps
	return nil
}

// fileKey names the key of the i-th file.
func fileKey(i int) string { return []string{"cert_file", "key_file", "client_ca_file"}[i] }

// describe names the i-th piece of material: its key and file, or its
// inline key.
func describe(i int, name string) string {
	if name == "" {
		return []string{"cert", "key", "client_ca"}[i]
	}
	return fileKey(i) + " " + name
}

// checkSANs is client_allowed_sans: the client's certificate carries one of
// sans among its DNS names, e-mail addresses, IP addresses or URIs, as the
// toolkit checks. No certificate carries none.
func checkSANs(certs []*x509.Certificate, sans []string) error {
	if len(certs) == 0 {
		return errors.New("client_allowed_sans: no client certificate")
	}
	c := certs[0]
	have := slices.Concat(c.DNSNames, c.EmailAddresses)
	for _, ip := range c.IPAddresses {
		have = append(have, ip.String())
	}
	for _, u := range c.URIs {
		have = append(have, u.String())
	}
	for _, h := range have {
		if slices.Contains(sans, h) {
			return nil
		}
	}
	return errors.New("client_allowed_sans: the client certificate carries none of the allowed names")
}

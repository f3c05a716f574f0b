package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throw-away certificate authority for TLS tests, with its files in
// a temporary directory of the test: a CA and one leaf certificate for
// 127.0.0.1 and localhost that is valid for both server and client
// authentication, as redis-server uses one certificate for both sides.
type PKI struct {
	CACert   string // PEM file of the CA certificate
	Cert     string // PEM file of the leaf certificate
	Key      string // PEM file of the leaf's key
	dir      string
	ca       *x509.Certificate
	caKey    *ecdsa.PrivateKey
	leaf     tls.Certificate
	caSerial int64
}

// NewPKI makes a new CA and a leaf certificate signed by it.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{dir: t.TempDir()}
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA " + filepath.Base(p.dir)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("redistest: CA certificate: %v", err)
	}
	p.ca, _ = x509.ParseCertificate(der)
	p.caKey = key
	p.caSerial = 1
	p.CACert = filepath.Join(p.dir, "ca.crt")
	writePEM(t, p.CACert, "CERTIFICATE", der)
	p.Cert, p.Key = p.Issue(t, "leaf")
	leaf, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	p.leaf = leaf
	return p
}

// Issue signs a new leaf certificate for 127.0.0.1 and localhost (server and
// client authentication) and returns its certificate and key files.
func (p *PKI) Issue(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	p.caSerial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.caSerial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatalf("redistest: certificate %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: key %s: %v", name, err)
	}
	certFile = filepath.Join(p.dir, name+".crt")
	keyFile = filepath.Join(p.dir, name+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

// ClientConfig returns a client config that trusts the CA and presents the
// leaf certificate.
func (p *PKI) ClientConfig() *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{p.leaf}, ServerName: "127.0.0.1"}
}

// ServerArgs are the redis-server arguments that make it use this PKI: its
// certificate on both sides, its CA for peers, and TLS to its primary.
func (p *PKI) ServerArgs() []string {
	return []string{
		"--tls-cert-file", p.Cert, "--tls-key-file", p.Key, "--tls-ca-cert-file", p.CACert,
		"--tls-replication", "yes",
	}
}

// StartTLSServer starts redis-server like [StartServer] but serving TLS only
// (port 0, tls-port on the picked port) with pki's files, and dialling its
// primary over TLS; [Server.Addr] is the TLS address and readiness is probed
// over TLS.
func StartTLSServer(t testing.TB, pki *PKI, args ...string) *Server {
	t.Helper()
	return startServer(t, pki.ClientConfig(), nil, "", append(pki.ServerArgs(), args...))
}

// StartTLSReplicas is [StartReplicas] over TLS: n TLS-only redis-servers
// replicating addr over TLS, each with a TLS client.
func StartTLSReplicas(t testing.TB, pki *PKI, n int, addr string) ([]*Server, []*Client) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redistest: replica of %q: %v", addr, err)
	}
	servers := make([]*Server, n)
	clients := make([]*Client, n)
	for i := range n {
		servers[i] = StartTLSServer(t, pki, "--replicaof", host, port)
		clients[i] = DialTLS(t, servers[i].Addr(), pki.ClientConfig())
	}
	return servers, clients
}

// DialTLS is [Dial] over TLS with conf.
func DialTLS(t testing.TB, addr string, conf *tls.Config) *Client {
	t.Helper()
	c, err := DialOpts(t, addr, DialOptions{TLS: conf})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: key: %v", err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
}

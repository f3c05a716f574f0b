package webconfig

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// hash is a bcrypt hash (cost 4, the cheapest) of "secret".
const hash = "$2a$04$xHXhAxKGgVRm9BLAATKT3e8t63NDWm1lfKW50xC8Ggd.9gq.bZqLG"

// TestParse: what the exporter-toolkit's format says, read as it reads it;
// every refusal names the key (and the line, when the YAML tells).
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       string // a part of the error; "" for none
		check      func(t *testing.T, c *Config)
	}{
		{name: "empty", yaml: "", check: func(t *testing.T, c *Config) {
			if c.TLS != nil || len(c.Users) != 0 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "comments only", yaml: "# nothing\n", check: func(t *testing.T, c *Config) {
			if c.TLS != nil || len(c.Users) != 0 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "users", yaml: "basic_auth_users:\n  prometheus: " + hash + "\n  'ops team': '" + hash + "'\n", check: func(t *testing.T, c *Config) {
			if len(c.Users) != 2 || c.Users["prometheus"] != hash || c.Users["ops team"] != hash || c.TLS != nil {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "no users", yaml: "basic_auth_users:\n", check: func(t *testing.T, c *Config) {
			if len(c.Users) != 0 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "tls", yaml: "tls_server_config:\n  cert_file: a.crt\n  key_file: /abs/a.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n",
			check: func(t *testing.T, c *Config) {
				tt := c.TLS
				if tt == nil || tt.certFile != filepath.Join("/etc/rp", "a.crt") || tt.keyFile != "/abs/a.key" || tt.caFile != "/etc/rp/ca.crt" ||
					tt.clientAuth != tls.RequireAndVerifyClientCert || tt.minVersion != tls.VersionTLS13 || tt.maxVersion != tls.VersionTLS13 {
					t.Fatalf("%+v", tt)
				}
			}},
		{name: "tls defaults", yaml: "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n", check: func(t *testing.T, c *Config) {
			if tt := c.TLS; tt.clientAuth != tls.NoClientCert || tt.minVersion != tls.VersionTLS12 || tt.maxVersion != tls.VersionTLS13 {
				t.Fatalf("%+v", tt)
			}
		}},
		{name: "empty tls", yaml: "tls_server_config: {}\nbasic_auth_users: {}\n", check: func(t *testing.T, c *Config) {
			if c.TLS != nil {
				t.Fatalf("%+v", c.TLS)
			}
		}},
		{name: "suites and curves", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [X25519, CurveP256]\n  prefer_server_cipher_suites: false\n",
			check: func(t *testing.T, c *Config) {
				if tt := c.TLS; len(tt.cipherSuites) != 1 || tt.cipherSuites[0] != tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 || len(tt.curves) != 2 || tt.curves[0] != tls.X25519 {
					t.Fatalf("%+v", tt)
				}
			}},
		{name: "headers", yaml: "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\n",
			check: func(t *testing.T, c *Config) {
				if c.Headers["X-Frame-Options"] != "deny" || c.Headers["Strict-Transport-Security"] != "max-age=31536000" {
					t.Fatalf("%+v", c.Headers)
				}
			}},

		{name: "junk", yaml: "junk", want: "line 1: want a mapping"},
		{name: "bad yaml", yaml: "basic_auth_users:\n  a: [\n", want: "line"},
		{name: "unknown key", yaml: "basic_auth_users: {}\ntls_server_config:\n  cert_filse: a\n", want: `line 3: tls_server_config: unknown key "cert_filse"`},
		{name: "unknown top key", yaml: "web:\n  x: 1\n", want: `line 1: unknown key "web"`},
		{name: "rate_limit", yaml: "rate_limit:\n  interval: 1s\n", want: "line 1: rate_limit is not supported"},
		{name: "second document", yaml: "basic_auth_users: {}\n---\nbasic_auth_users: {}\n", want: "second YAML document"},
		{name: "duplicate key", yaml: "basic_auth_users:\n  a: " + hash + "\n  a: " + hash + "\n", want: "already defined"},
		{name: "users not a mapping", yaml: "basic_auth_users: [a, b]\n", want: "basic_auth_users: want a mapping"},
		{name: "wrong type", yaml: "tls_server_config:\n  cert_file: [a, b]\n", want: "line 2"},
		{name: "plain password", yaml: "basic_auth_users:\n  john: hunter2hunter2\n", want: `user "john": the password is not a bcrypt hash`},
		{name: "bad cost", yaml: "basic_auth_users:\n  john: $2a$99$0uOxmrwJH6oh3ooWVlCwSedA.9FjUvrWM/gg19wjGWCINLodk2.QW\n", want: `user "john"`},
		{name: "colon in user", yaml: "basic_auth_users:\n  'a:b': " + hash + "\n", want: "colon"},
		{name: "empty user", yaml: "basic_auth_users:\n  '': " + hash + "\n", want: "empty user name"},
		{name: "no cert", yaml: "tls_server_config:\n  key_file: a.key\n", want: "tls_server_config: no certificate"},
		{name: "no key", yaml: "tls_server_config:\n  cert_file: a.crt\n", want: "tls_server_config: no key"},
		{name: "only a version", yaml: "tls_server_config:\n  min_version: TLS13\n", want: "no certificate"},
		{name: "cert twice", yaml: "tls_server_config:\n  cert_file: a\n  cert: b\n  key_file: c\n", want: "cert_file and cert"},
		{name: "ca twice", yaml: "tls_server_config:\n  cert_file: a\n  key_file: c\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: d\n  client_ca: e\n", want: "client_ca_file and client_ca"},
		{name: "bad auth type", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Always\n", want: `client_auth_type "Always"`},
		{name: "ca without policy", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca\n", want: "without a client_auth_type"},
		{name: "verify without ca", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n", want: "set client_ca_file"},
		{name: "sans without policy", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n", want: "client_allowed_sans"},
		{name: "bad version", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS1.2\n", want: `min_version "TLS1.2"`},
		{name: "versions crossed", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n", want: "above max_version"},
		{name: "bad suite", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n", want: "cipher_suites"},
		{name: "bad curve", yaml: "tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [P-256]\n", want: "curve_preferences"},
		{name: "bad header", yaml: "http_server_config:\n  headers:\n    Server: replproxy\n", want: `header "Server" cannot be set`},
		{name: "bad header value", yaml: "http_server_config:\n  headers:\n    X-Frame-Options: allow\n", want: "X-Frame-Options must be one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "/etc/rp")
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, c)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q quotes the password or runs over lines", err)
			}
		})
	}
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoad: Load names the file in every error, loads the certificate, key
// and client CA it names (relative to its directory, or inline), and fails
// on material that does not load.
func TestLoad(t *testing.T) {
	pki := redistest.NewPKI(t)
	dir := t.TempDir()
	writeFile(t, dir, "web.crt", readFile(t, pki.Cert))
	writeFile(t, dir, "web.key", readFile(t, pki.Key))
	writeFile(t, dir, "ca.crt", readFile(t, pki.CACert))

	good := writeFile(t, dir, "good.yml", "tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\nbasic_auth_users:\n  p: "+hash+"\n")
	c, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := c.TLS.ServerConfig(nil).GetConfigForClient(nil)
	if err != nil || len(conf.Certificates) != 1 || conf.ClientCAs == nil || conf.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("config %+v, %v", conf, err)
	}

	indent := func(pem string) string {
		return "    " + strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n    ") + "\n"
	}
	inline := writeFile(t, dir, "inline.yml", "tls_server_config:\n  cert: |\n"+indent(readFile(t, pki.Cert))+"  key: |\n"+indent(readFile(t, pki.Key)))
	if c, err := Load(inline); err != nil || c.TLS == nil {
		t.Fatalf("inline material: %v", err)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"missing cert", "tls_server_config:\n  cert_file: none.crt\n  key_file: web.key\n", "cert_file: stat " + filepath.Join(dir, "none.crt")},
		{"key of another", "tls_server_config:\n  cert_file: web.crt\n  key_file: other.key\n", "private key does not match"},
		{"not a CA", "tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: web.key\n", "client_ca_file " + filepath.Join(dir, "web.key") + " holds no PEM certificate"},
		{"syntax", "tls_server_config:\n  cert_file: web.crt\n   key_file: web.key\n", "line 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := redistest.NewPKI(t)
			writeFile(t, dir, "other.key", readFile(t, other.Key))
			path := writeFile(t, dir, "bad.yml", tc.yaml)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s and %q", err, path, tc.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatalf("error %q quotes the key", err)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "absent.yml")); err == nil || !strings.Contains(err.Error(), "absent.yml") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestReload: a handshake after the files changed takes the new material;
// a change that does not load (a certificate without its key yet) keeps the
// old one and says why, until the files agree again.
func TestReload(t *testing.T) {
	first, second := redistest.NewPKI(t), redistest.NewPKI(t)
	dir := t.TempDir()
	install := func(which string, pki *redistest.PKI) {
		if strings.Contains(which, "crt") {
			writeFile(t, dir, "web.crt", readFile(t, pki.Cert))
		}
		if strings.Contains(which, "key") {
			writeFile(t, dir, "web.key", readFile(t, pki.Key))
		}
	}
	install("crt key", first)
	c, err := Load(writeFile(t, dir, "web.yml", "tls_server_config:\n  cert_file: web.crt\n  key_file: web.key\n"))
	if err != nil {
		t.Fatal(err)
	}
	var failed []error
	conf := c.TLS.ServerConfig(func(err error) { failed = append(failed, err) })
	serving := func() string {
		t.Helper()
		cc, err := conf.GetConfigForClient(nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(cc.Certificates[0].Certificate[0])
	}
	leaf := func(pki *redistest.PKI) string {
		cert, err := tls.LoadX509KeyPair(pki.Cert, pki.Key)
		if err != nil {
			t.Fatal(err)
		}
		return string(cert.Certificate[0])
	}
	if serving() != leaf(first) || len(failed) != 0 {
		t.Fatalf("first certificate not served (%v)", failed)
	}
	// Modification times may be coarse: make each change visible.
	bump := func() {
		later := time.Now().Add(time.Duration(len(failed)+2) * time.Second)
		for _, f := range []string{"web.crt", "web.key"} {
			os.Chtimes(filepath.Join(dir, f), later, later)
		}
	}
	install("crt", second)
	bump()
	if serving() != leaf(first) || len(failed) != 1 || !strings.Contains(failed[0].Error(), "private key does not match") {
		t.Fatalf("half-rotated files: failures %v", failed)
	}
	install("key", second)
	bump()
	if serving() != leaf(second) {
		t.Fatal("second certificate not served once its key is in place")
	}
	n := len(failed)
	if serving() != leaf(second) || len(failed) != n {
		t.Fatal("unchanged files read again, or failing")
	}
}

// FuzzParse: no input makes Parse panic, and an accepted one is whole: a
// TLS config names a certificate and a key, every user's hash is bcrypt's.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"basic_auth_users:\n  prometheus: " + hash + "\n",
		"tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
		"http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n",
		"tls_server_config: {cert: x, key: y, cipher_suites: [a], curve_preferences: [X25519]}\n",
		"a: &x [*x]\n",
		"rate_limit: {burst: 1}\n",
		"basic_auth_users: !!binary aGVsbG8=\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse([]byte(s), "/d")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error over lines: %q", err)
			}
			return
		}
		if t := c.TLS; t != nil && ((t.certFile == "" && len(t.cert) == 0) || (t.keyFile == "" && len(t.key) == 0)) {
			panic("TLS without a certificate or key")
		}
		for u := range c.Users {
			if u == "" || strings.Contains(u, ":") {
				t.Fatalf("user %q accepted", u)
			}
		}
	})
}

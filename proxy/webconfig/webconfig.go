// Package webconfig reads a Prometheus web configuration file, the format
// of the exporter-toolkit's --web.config.file that `promtool check
// web-config` checks, for the monitoring port (metrics-web-config): the
// users of HTTP basic authentication with their bcrypt hashes
// (basic_auth_users), the port's TLS settings (tls_server_config) and the
// headers added to its replies (http_server_config).
//
// # What it accepts
//
// The exporter-toolkit's keys, with its names, defaults and rules:
//
//	tls_server_config:
//	  cert_file, key_file          or cert, key (inline PEM): one of each
//	  client_auth_type             NoClientCert (default), RequestClientCert,
//	                               RequireAnyClientCert (RequireClientCert),
//	                               VerifyClientCertIfGiven, RequireAndVerifyClientCert
//	  client_ca_file               or client_ca (inline PEM)
//	  client_allowed_sans          [names]: the client certificate must carry one
//	  min_version, max_version     TLS10..TLS13 (default TLS12, TLS13)
//	  cipher_suites                Go's names (tls.CipherSuites)
//	  curve_preferences            CurveP256, CurveP384, CurveP521, X25519, X25519MLKEM768
//	  prefer_server_cipher_suites  accepted; Go ignores it
//	http_server_config:
//	  http2                        accepted; the port speaks HTTP/1.1 only
//	  headers                      Content-Security-Policy, X-Frame-Options (deny,
//	                               sameorigin), X-Content-Type-Options (nosniff),
//	                               X-XSS-Protection, Strict-Transport-Security
//	basic_auth_users:
//	  <user>: <bcrypt hash>
//
// It is stricter where the exporter-toolkit is silent or lenient, so that
// a file never protects less than it seems to: an unknown key, and
// rate_limit (the port bounds its connections itself), are errors, not
// ignored; a tls_server_config with any key set must name a certificate
// and key (the toolkit serves plain HTTP when neither is named); a policy
// that verifies client certificates needs client CAs (Go would verify
// them against the system's roots); a file and its inline form together
// are refused; a user name with a colon (which basic authentication cannot
// send) is refused. Relative file names are relative to the file's
// directory, as in the toolkit. An empty file configures nothing.
//
// Errors name the file and, when the YAML tells, the line, and never
// quote a password hash or a key (a plain password written where a hash
// belongs stays out of the log).
//
// # Reloading
//
// The file is read once (Load). The certificate, key and client CA files
// it names are read again when they change (TLS.ServerConfig): rotating
// a certificate needs no restart, as with the toolkit, which reads them at
// every handshake.
package webconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"
)

// Config is what a web configuration file asks of the monitoring port.
type Config struct {
	// Users are basic_auth_users: user name to bcrypt hash, each checked
	// by bcrypt.Cost. Empty: no authentication.
	Users map[string]string
	// Headers are http_server_config's headers, to set on every reply.
	Headers map[string]string
	// TLS is tls_server_config with its material loaded; nil when the file
	// has none (or an empty one).
	TLS *TLS
}

// Load reads and checks the web configuration file at path, and loads the
// TLS material it names, so that a bad file or certificate fails the
// start. The error names path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError: names the file
	}
	c, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.TLS != nil {
		if err := c.TLS.load(); err != nil {
			return nil, fmt.Errorf("%s: tls_server_config: %w", path, err)
		}
	}
	return c, nil
}

// Parse reads a web configuration from data, with relative file names
// taken from dir, and checks it, reading no file: the TLS material is
// loaded by Load.
func Parse(data []byte, dir string) (*Config, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return &Config{}, nil // empty: nothing configured
	case err != nil:
		return nil, yamlError(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err)
		}
		return nil, fmt.Errorf("line %d: a second YAML document: the file holds one", more.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if isNull(root) {
		return &Config{}, nil
	}
	if err := checkKeys(root, "", topKeys); err != nil {
		return nil, err
	}
	var f file
	if err := root.Decode(&f); err != nil {
		return nil, yamlError(err)
	}
	c := &Config{Users: f.Users, Headers: f.HTTP.Headers}
	if err := checkUsers(f.Users); err != nil {
		return nil, err
	}
	if err := checkHeaders(f.HTTP.Headers); err != nil {
		return nil, err
	}
	if f.TLS.set() {
		t, err := f.TLS.settings(dir)
		if err != nil {
			return nil, fmt.Errorf("tls_server_config: %w", err)
		}
		c.TLS = t
	}
	return c, nil
}

// file is the YAML's shape, as the exporter-toolkit names it.
type file struct {
	TLS   tlsFile           `yaml:"tls_server_config"`
	HTTP  httpFile          `yaml:"http_server_config"`
	Users map[string]string `yaml:"basic_auth_users"`
}

type tlsFile struct {
	Cert              string   `yaml:"cert"`
	Key               string   `yaml:"key"`
	ClientCA          string   `yaml:"client_ca"`
	CertFile          string   `yaml:"cert_file"`
	KeyFile           string   `yaml:"key_file"`
	ClientAuthType    string   `yaml:"client_auth_type"`
	ClientCAFile      string   `yaml:"client_ca_file"`
	ClientAllowedSANs []string `yaml:"client_allowed_sans"`
	MinVersion        string   `yaml:"min_version"`
	MaxVersion        string   `yaml:"max_version"`
	CipherSuites      []string `yaml:"cipher_suites"`
	CurvePreferences  []string `yaml:"curve_preferences"`
	PreferServer      bool     `yaml:"prefer_server_cipher_suites"`
}

type httpFile struct {
	HTTP2   bool              `yaml:"http2"`
	Headers map[string]string `yaml:"headers"`
}

// The keys of each mapping, and those refused with a reason.
var (
	topKeys = map[string][]string{
		"tls_server_config": {
			"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
			"client_allowed_sans", "min_version", "max_version", "cipher_suites", "curve_preferences",
			"prefer_server_cipher_suites",
		},
		"http_server_config": {"http2", "headers"},
		"basic_auth_users":   nil, // any user name
	}
	unsupported = map[string]string{
		"rate_limit": "not supported by replproxy: the monitoring port serves 8 connections at a time and bounds each in time (docs/metrics.md)",
	}
)

// checkKeys checks that m is a mapping whose keys are among keys (nil:
// any), naming the line of the first that is not; each mapping value of a
// key with a list of its own is checked against that list.
func checkKeys(m *yaml.Node, where string, keys map[string][]string) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %swant a mapping of keys", m.Line, in(where))
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		sub, ok := keys[k.Value]
		if why, no := unsupported[k.Value]; no && where == "" {
			return fmt.Errorf("line %d: %s is %s", k.Line, k.Value, why)
		}
		if !ok {
			return fmt.Errorf("line %d: %sunknown key %q", k.Line, in(where), k.Value)
		}
		if sub != nil && !isNull(v) {
			inner := make(map[string][]string, len(sub))
			for _, s := range sub {
				inner[s] = nil
			}
			if err := checkKeys(v, k.Value, inner); err != nil {
				return err
			}
		} else if sub == nil && where == "" && !isNull(v) && v.Kind != yaml.MappingNode {
			return fmt.Errorf("line %d: %s: want a mapping of keys", v.Line, k.Value)
		}
	}
	return nil
}

func in(where string) string {
	if where == "" {
		return ""
	}
	return where + ": "
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// yamlError makes the YAML library's error one line, without its prefix:
// its type errors list each problem on a line of its own.
func yamlError(err error) error {
	s := err.Error()
	s = strings.TrimPrefix(s, "yaml: unmarshal errors:\n  ")
	s = strings.TrimPrefix(s, "yaml: ")
	return errors.New(strings.ReplaceAll(s, "\n  ", "; "))
}

// checkUsers checks that every hash is a bcrypt hash (the toolkit's
// validateUsers), without quoting it: it may be a plain password.
func checkUsers(users map[string]string) error {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	slices.Sort(names)
	for _, u := range names {
		if u == "" {
			return errors.New("basic_auth_users: an empty user name")
		}
		if strings.ContainsRune(u, ':') {
			return fmt.Errorf("basic_auth_users: user %q: basic authentication cannot send a user name holding a colon", u)
		}
		if _, err := bcrypt.Cost([]byte(users[u])); err != nil {
			return fmt.Errorf("basic_auth_users: user %q: the password is not a bcrypt hash (%s): write the password's bcrypt hash, not the password", u, hashError(err))
		}
	}
	return nil
}

// hashError says what is wrong with a hash without quoting it: bcrypt's
// InvalidHashPrefixError prints the hash's first byte, a
// HashVersionTooNewError its version byte.
func hashError(err error) string {
	switch {
	case errors.Is(err, bcrypt.ErrHashTooShort):
		return "too short"
	case errors.As(err, new(bcrypt.InvalidHashPrefixError)):
		return "it does not start with $"
	case errors.As(err, new(bcrypt.HashVersionTooNewError)):
		return "an unknown bcrypt version"
	case errors.As(err, new(bcrypt.InvalidCostError)):
		return err.Error()
	}
	return "malformed"
}

// extraHeaders are the headers a file may set, with their allowed values
// (nil: any), as the toolkit's extraHTTPHeaders.
var extraHeaders = map[string][]string{
	"Strict-Transport-Security": nil,
	"X-Content-Type-Options":    {"nosniff"},
	"X-Frame-Options":           {"deny", "sameorigin"},
	"X-XSS-Protection":          nil,
	"Content-Security-Policy":   nil,
}

// headerValue is what a header value may hold: printable ASCII and blanks.
var headerValue = regexp.MustCompile(`^[\x20-\x7e\t]*$`)

func checkHeaders(h map[string]string) error {
	for k, v := range h {
		allowed, ok := extraHeaders[k]
		if !ok {
			return fmt.Errorf("http_server_config: headers: header %q cannot be set", k)
		}
		if allowed != nil && !slices.Contains(allowed, v) {
			return fmt.Errorf("http_server_config: headers: %s must be one of %q, not %q", k, allowed, v)
		}
		if !headerValue.MatchString(v) {
			return fmt.Errorf("http_server_config: headers: %s: a control character in the value", k)
		}
	}
	return nil
}

// set reports whether any key of tls_server_config is set.
func (f *tlsFile) set() bool {
	return f.Cert != "" || f.Key != "" || f.ClientCA != "" || f.CertFile != "" || f.KeyFile != "" ||
		f.ClientAuthType != "" || f.ClientCAFile != "" || f.ClientAllowedSANs != nil ||
		f.MinVersion != "" || f.MaxVersion != "" || f.CipherSuites != nil || f.CurvePreferences != nil
}

// clientAuthTypes are client_auth_type's values, as the toolkit maps them.
var clientAuthTypes = map[string]tls.ClientAuthType{
	"":                           tls.NoClientCert,
	"NoClientCert":               tls.NoClientCert,
	"RequestClientCert":          tls.RequestClientCert,
	"RequireAnyClientCert":       tls.RequireAnyClientCert,
	"RequireClientCert":          tls.RequireAnyClientCert, // the toolkit's old name
	"VerifyClientCertIfGiven":    tls.VerifyClientCertIfGiven,
	"RequireAndVerifyClientCert": tls.RequireAndVerifyClientCert,
}

var tlsVersions = map[string]uint16{
	"TLS10": tls.VersionTLS10,
	"TLS11": tls.VersionTLS11,
	"TLS12": tls.VersionTLS12,
	"TLS13": tls.VersionTLS13,
}

var curves = map[string]tls.CurveID{
	"CurveP256":      tls.CurveP256,
	"CurveP384":      tls.CurveP384,
	"CurveP521":      tls.CurveP521,
	"X25519":         tls.X25519,
	"X25519MLKEM768": tls.X25519MLKEM768,
}

// settings checks tls_server_config and returns its settings, file names
// joined to dir.
func (f *tlsFile) settings(dir string) (*TLS, error) {
	t := &TLS{
		certFile: joinDir(dir, f.CertFile), keyFile: joinDir(dir, f.KeyFile), caFile: joinDir(dir, f.ClientCAFile),
		cert: []byte(f.Cert), key: []byte(f.Key), ca: []byte(f.ClientCA),
		allowedSANs: f.ClientAllowedSANs,
		minVersion:  tls.VersionTLS12, maxVersion: tls.VersionTLS13,
	}
	switch {
	case f.CertFile == "" && f.Cert == "":
		return nil, errors.New("no certificate: set cert_file (or cert)")
	case f.KeyFile == "" && f.Key == "":
		return nil, errors.New("no key: set key_file (or key)")
	case f.CertFile != "" && f.Cert != "":
		return nil, errors.New("cert_file and cert both set: keep one")
	case f.KeyFile != "" && f.Key != "":
		return nil, errors.New("key_file and key both set: keep one")
	case f.ClientCAFile != "" && f.ClientCA != "":
		return nil, errors.New("client_ca_file and client_ca both set: keep one")
	}
	auth, ok := clientAuthTypes[f.ClientAuthType]
	if !ok {
		return nil, fmt.Errorf("client_auth_type %q: want NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert", f.ClientAuthType)
	}
	t.clientAuth = auth
	hasCA := f.ClientCAFile != "" || f.ClientCA != ""
	if hasCA && auth == tls.NoClientCert {
		return nil, errors.New("client CAs are set without a client_auth_type that asks for a certificate: set client_auth_type RequireAndVerifyClientCert")
	}
	if !hasCA && (auth == tls.VerifyClientCertIfGiven || auth == tls.RequireAndVerifyClientCert) {
		return nil, fmt.Errorf("client_auth_type %s verifies client certificates: set client_ca_file (or client_ca) to the CA they must chain to", f.ClientAuthType)
	}
	if f.ClientAllowedSANs != nil && auth == tls.NoClientCert {
		return nil, errors.New("client_allowed_sans without a client_auth_type that asks for a certificate")
	}
	for _, v := range []struct {
		name, value string
		into        *uint16
	}{{"min_version", f.MinVersion, &t.minVersion}, {"max_version", f.MaxVersion, &t.maxVersion}} {
		if v.value == "" {
			continue
		}
		n, ok := tlsVersions[v.value]
		if !ok {
			return nil, fmt.Errorf("%s %q: want TLS10, TLS11, TLS12 or TLS13", v.name, v.value)
		}
		*v.into = n
	}
	if t.minVersion > t.maxVersion {
		return nil, fmt.Errorf("min_version %s is above max_version %s", cmpOr(f.MinVersion, "TLS12"), cmpOr(f.MaxVersion, "TLS13"))
	}
	for _, name := range f.CipherSuites {
		i := slices.IndexFunc(tls.CipherSuites(), func(s *tls.CipherSuite) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("cipher_suites: %q is not a cipher suite Go deems secure (tls.CipherSuites)", name)
		}
		t.cipherSuites = append(t.cipherSuites, tls.CipherSuites()[i].ID)
	}
	for _, name := range f.CurvePreferences {
		id, ok := curves[name]
		if !ok {
			return nil, fmt.Errorf("curve_preferences: unknown curve %q", name)
		}
		t.curves = append(t.curves, id)
	}
	return t, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// joinDir makes a relative file name relative to dir, as the toolkit's
// config_util.JoinDir does.
func joinDir(dir, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// clientCAs parses the client CAs, nil when none are set.
func clientCAs(pem []byte, from string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", from)
	}
	return pool, nil
}

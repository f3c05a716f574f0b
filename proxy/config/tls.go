package config

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// TLSAuth is the value of tls-auth-clients: whether a client connecting to
// tls-port must present a certificate signed by the configured CA.
type TLSAuth string

// The tls-auth-clients values, as Redis names them.
const (
	TLSAuthNo       TLSAuth = "no"       // no certificate asked for
	TLSAuthYes      TLSAuth = "yes"      // a valid certificate is required (the default)
	TLSAuthOptional TLSAuth = "optional" // a certificate, when given, must be valid
)

var tlsAuthValues = []TLSAuth{TLSAuthNo, TLSAuthYes, TLSAuthOptional}

// tlsVersions are tls-protocols' words, lower case, in version order.
var tlsVersions = []struct {
	name    string
	version uint16
}{
	{"tlsv1", tls.VersionTLS10},
	{"tlsv1.1", tls.VersionTLS11},
	{"tlsv1.2", tls.VersionTLS12},
	{"tlsv1.3", tls.VersionTLS13},
}

// openSSLCiphers maps the OpenSSL names of the TLS 1.0-1.2 cipher suites Go
// implements and deems secure (tls.CipherSuites) to their IANA names, which
// Go uses. Read-only.
var openSSLCiphers = map[string]string{
	"ECDHE-ECDSA-AES128-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
	"ECDHE-ECDSA-AES256-SHA":        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
	"ECDHE-RSA-AES128-SHA":          "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"ECDHE-RSA-AES256-SHA":          "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-AES128-GCM-SHA256":   "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"ECDHE-RSA-AES256-GCM-SHA384":   "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"ECDHE-RSA-CHACHA20-POLY1305":   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	"ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
}

// goTLS13Suites are the TLS 1.3 suites Go's crypto/tls offers, always all of
// them: its Config has no way to restrict them.
var goTLS13Suites = []string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}

// tls13Suites are every TLS 1.3 suite name OpenSSL knows.
var tls13Suites = append(slices.Clone(goTLS13Suites), "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256")

// tlsFileDirective is a tls-* file or directory name, changeable at runtime:
// the proxy reloads the TLS material when CONFIG SET names one.
func tlsFileDirective(name string, field func(*Config) *string) directive {
	return stringDirective(name, true, field, nil)
}

// boolDirective is a yes/no directive.
func boolDirective(name string, mutable bool, field func(*Config) *bool) directive {
	return directive{
		name: name, mutable: mutable, nargs: 1,
		set: func(c *Config, args []string) error {
			switch wire.Lower(args[0]) {
			case "yes":
				*field(c) = true
			case "no":
				*field(c) = false
			default:
				return badValue(args[0], "argument must be 'yes' or 'no'")
			}
			return nil
		},
		get: func(c *Config) string { return FormatBool(*field(c)) },
	}
}

// tlsPortDirective is tls-port: 0 (off) or a port.
var tlsPortDirective = directive{
	name: "tls-port", mutable: true, nargs: 1,
	set: func(c *Config, args []string) error {
		n, err := parseIntRange(args[0], 0, 65535)
		if err != nil {
			return err
		}
		c.TLSPort = int(n)
		return nil
	},
	get: func(c *Config) string { return strconv.Itoa(c.TLSPort) },
}

// UsesTLS reports whether the configuration needs TLS material loaded: a
// tls-port to serve, or tls-replication to dial the primary with (Redis's
// applyTlsCfg rule), or a monitoring port to serve over TLS
// ([Config.MetricsServesTLS]).
func (c *Config) UsesTLS() bool { return c.TLSPort != 0 || c.TLSReplication || c.MetricsServesTLS() }

// MetricsServesTLS reports whether the monitoring server is to serve HTTPS
// with the proxy's material: metrics-tls yes with a metrics-port (with
// metrics-port 0 metrics-tls has nothing to serve, and needs nothing).
func (c *Config) MetricsServesTLS() bool { return c.MetricsTLS && c.MetricsPort != 0 }

// TLSVersions returns the lowest and highest TLS version tls-protocols
// allows; "" is Redis's default, TLSv1.2 and TLSv1.3. Validate has checked
// the value.
func (c *Config) TLSVersions() (lo, hi uint16) {
	lo, hi, err := parseTLSProtocols(c.TLSProtocols)
	if err != nil {
		return tls.VersionTLS12, tls.VersionTLS13
	}
	return lo, hi
}

// TLSCipherSuites returns the TLS 1.0-1.2 cipher suites tls-ciphers allows,
// as Go's IDs, or nil for Go's defaults when it is "". Validate has checked
// the value.
func (c *Config) TLSCipherSuites() []uint16 {
	ids, _ := parseTLSCiphers(c.TLSCiphers)
	return ids
}

// parseTLSProtocols reads tls-protocols: TLSv1, TLSv1.1, TLSv1.2, TLSv1.3
// separated by spaces, any case. Go takes a range of versions, not a set, so
// the versions named must be consecutive.
func parseTLSProtocols(s string) (lo, hi uint16, err error) {
	if s == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	var named [4]bool
	words := strings.Fields(s)
	if len(words) == 0 {
		return 0, 0, badValue(s, "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")
	}
	for _, w := range words {
		i := -1
		for j, v := range tlsVersions {
			if v.name == wire.Lower(w) {
				i = j
			}
		}
		if i < 0 {
			return 0, 0, badValue(s, "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")
		}
		named[i] = true
	}
	first, last := -1, -1
	for i, ok := range named {
		if ok {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	for i := first; i <= last; i++ {
		if !named[i] {
			return 0, 0, badValue(s, "Go's crypto/tls takes a range of versions: name consecutive ones")
		}
	}
	return tlsVersions[first].version, tlsVersions[last].version, nil
}

// splitCipherList splits an OpenSSL cipher list: names separated by ':',
// ',' or spaces.
func splitCipherList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == ',' || r == ' ' })
}

// parseTLSCiphers reads tls-ciphers, the TLS 1.2 (and older) cipher suites:
// a list of OpenSSL names (or IANA names) of suites Go implements. OpenSSL's
// cipher-string expressions (HIGH, !aNULL, @STRENGTH, ...) are refused:
// Go could not apply them as OpenSSL would. "" means Go's defaults.
func parseTLSCiphers(s string) ([]uint16, error) {
	if s == "" {
		return nil, nil
	}
	names := splitCipherList(s)
	if len(names) == 0 {
		return nil, badValue(s, "no cipher named")
	}
	var ids []uint16
	for _, name := range names {
		iana := name
		if n, ok := openSSLCiphers[name]; ok {
			iana = n
		}
		i := slices.IndexFunc(tls.CipherSuites(), func(cs *tls.CipherSuite) bool { return cs.Name == iana })
		if i < 0 || !slices.Contains(tls.CipherSuites()[i].SupportedVersions, tls.VersionTLS12) {
			return nil, badValue(name, "not a TLSv1.2 cipher Go's crypto/tls implements (OpenSSL names such as ECDHE-RSA-AES128-GCM-SHA256, separated by ':')")
		}
		ids = append(ids, tls.CipherSuites()[i].ID)
	}
	return ids, nil
}

// checkTLSCiphersuites checks tls-ciphersuites, the TLS 1.3 suites. Go's
// crypto/tls always offers all three of its TLS 1.3 suites and cannot be
// restricted, so the only values it can honour are those that allow every
// one of them; others are refused rather than silently ignored. "" means
// the defaults.
func checkTLSCiphersuites(s string) error {
	if s == "" {
		return nil
	}
	names := splitCipherList(s)
	for _, n := range names {
		if !slices.Contains(tls13Suites, n) {
			return badValue(n, "not a TLSv1.3 cipher suite")
		}
	}
	for _, n := range goTLS13Suites {
		if !slices.Contains(names, n) {
			return badValue(s, "Go's crypto/tls always offers TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and TLS_CHACHA20_POLY1305_SHA256 under TLSv1.3: list all three, or leave TLSv1.3 out of tls-protocols")
		}
	}
	return nil
}

// checkTLS is Validate's TLS rule, tlsConfigure's checks that need no file:
// when TLS is in use the certificate and key are named, and a CA is named
// when clients are authenticated or the primary is verified.
func checkTLS(c *Config) (directive string, err error) {
	if c.TLSPort != 0 && c.TLSPort == c.Port {
		return "tls-port", fmt.Errorf("%w %d: tls-port must differ from port", ErrInvalidValue, c.TLSPort)
	}
	if !slices.Contains(tlsAuthValues, c.TLSAuthClients) {
		return "tls-auth-clients", badValue(string(c.TLSAuthClients), enumReason(tlsAuthValues))
	}
	if _, _, err := parseTLSProtocols(c.TLSProtocols); err != nil {
		return "tls-protocols", err
	}
	if _, err := parseTLSCiphers(c.TLSCiphers); err != nil {
		return "tls-ciphers", err
	}
	if err := checkTLSCiphersuites(c.TLSCiphersuites); err != nil {
		return "tls-ciphersuites", err
	}
	if (c.TLSClientCertFile == "") != (c.TLSClientKeyFile == "") {
		return "tls-client-cert-file", fmt.Errorf("%w: tls-client-cert-file and tls-client-key-file go together", ErrInvalidValue)
	}
	if !c.UsesTLS() {
		return "", nil
	}
	if c.MetricsServesTLS() && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		return "metrics-tls", fmt.Errorf("%w: metrics-tls yes serves the monitoring port with tls-cert-file and tls-key-file: set both", ErrInvalidValue)
	}
	if c.TLSCertFile == "" {
		return "tls-cert-file", fmt.Errorf("%w: No tls-cert-file configured!", ErrInvalidValue)
	}
	if c.TLSKeyFile == "" {
		return "tls-key-file", fmt.Errorf("%w: No tls-key-file configured!", ErrInvalidValue)
	}
	if (c.TLSAuthClients != TLSAuthNo || c.TLSReplication) && c.TLSCACertFile == "" && c.TLSCACertDir == "" {
		return "tls-ca-cert-file", fmt.Errorf("%w: Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-replication or tls-auth-clients are enabled!", ErrInvalidValue)
	}
	return "", nil
}

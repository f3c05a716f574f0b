package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
)

// The monitoring port secured (metrics_port.go): metrics-tls, and
// metrics-web-config's basic_auth_users and tls_server_config. None of
// these tests needs Redis.

// secretHash is a bcrypt hash (cost 4, the cheapest) of "secret".
const secretHash = "$2a$04$xHXhAxKGgVRm9BLAATKT3e8t63NDWm1lfKW50xC8Ggd.9gq.bZqLG"

// scraper reads the monitoring port as Prometheus would: over HTTPS when
// tls is set, with basic authentication when user is.
type scraper struct {
	addr           string
	tls            *tls.Config
	user, password string
}

// get fetches path and returns the reply's status, headers and body, or
// the error that ended the attempt (a refused handshake).
func (sc scraper) get(path string) (int, http.Header, string, error) {
	scheme := "http"
	tr := &http.Transport{DisableKeepAlives: true}
	if sc.tls != nil {
		scheme, tr.TLSClientConfig = "https", sc.tls
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, scheme+"://"+sc.addr+path, nil)
	if err != nil {
		return 0, nil, "", err
	}
	if sc.user != "" {
		req.SetBasicAuth(sc.user, sc.password)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body), err
}

// mustGet is get that fails the test on an error, and checks the status.
func (sc scraper) mustGet(t *testing.T, path string, want int) (http.Header, string) {
	t.Helper()
	code, h, body, err := sc.get(path)
	if err != nil {
		t.Fatalf("GET %s as %q: %v", path, sc.user, err)
	}
	if code != want {
		t.Fatalf("GET %s as %q: %d %q, want %d", path, sc.user, code, body, want)
	}
	return h, body
}

// writeWebConfig writes a web configuration file into dir and returns its
// path.
func writeWebConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "web-config.yml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// copyFile copies src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// withoutCert is pki's client config presenting no certificate.
func withoutCert(pki *redistest.PKI) *tls.Config {
	c := pki.ClientConfig()
	c.Certificates = nil
	return c
}

// TestMetricsTLS: metrics-tls yes serves the monitoring port over HTTPS
// with the proxy's own certificate, under tls-auth-clients as tls-port is
// (no tls-port here: the monitoring port alone uses the material), and
// CONFIG SET tls-* reloads it for the monitoring port too.
func TestMetricsTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	p := metricsProxy(t, "--metrics-tls", "yes",
		"--tls-cert-file", pki.Cert, "--tls-key-file", pki.Key, "--tls-ca-cert-file", pki.CACert)
	addr := p.MetricsAddr().String()
	if p.TLSAddr() != nil {
		t.Fatal("a TLS listener with tls-port 0")
	}

	// tls-auth-clients yes: a scraper with a certificate of the CA reads
	// every path; one without is refused during the handshake.
	withCert := scraper{addr: addr, tls: pki.ClientConfig()}
	_, body := withCert.mustGet(t, "/metrics", http.StatusOK)
	if m := parseMetrics(t, body); m["replproxy_metrics_auth_failures_total"] != 0 {
		t.Fatalf("metrics_auth_failures_total %v", m["replproxy_metrics_auth_failures_total"])
	}
	withCert.mustGet(t, "/healthz", http.StatusOK)
	if _, _, _, err := (scraper{addr: addr, tls: withoutCert(pki)}).get("/healthz"); err == nil {
		t.Fatal("a scraper without a client certificate got in under tls-auth-clients yes")
	}
	// Plain HTTP to the HTTPS port: net/http's 400.
	if code, _, _, err := (scraper{addr: addr}).get("/healthz"); err != nil || code != http.StatusBadRequest {
		t.Fatalf("plain HTTP: %d, %v", code, err)
	}
	redistest.WaitFor(t, 5*time.Second, "the failed handshake logged", func() bool {
		return p.Log.Contains("metrics server error") && p.Log.Contains("TLS handshake error")
	})

	// CONFIG SET tls-*: another certificate, no client certificates; the
	// monitoring port's next handshake takes both.
	other := redistest.NewPKI(t)
	c := redistest.Dial(t, p.AddrString())
	c.MustDo(t, "CONFIG", "SET", "tls-cert-file", other.Cert, "tls-key-file", other.Key,
		"tls-ca-cert-file", other.CACert, "tls-auth-clients", "no")
	(scraper{addr: addr, tls: withoutCert(other)}).mustGet(t, "/readyz", http.StatusServiceUnavailable)
	if _, _, _, err := withCert.get("/healthz"); err == nil {
		t.Fatal("the old certificate still served after CONFIG SET tls-cert-file")
	}
}

// TestMetricsBasicAuth: metrics-web-config with basic_auth_users and no
// TLS section: /metrics and /readyz answer 401 (WWW-Authenticate: Basic
// realm="replproxy") without credentials and with wrong ones, 200 with the
// right ones; /healthz needs none. Each refusal is counted in INFO
// metrics_auth_failures and in /metrics, and logged without the password.
func TestMetricsBasicAuth(t *testing.T) {
	path := writeWebConfig(t, t.TempDir(), "basic_auth_users:\n  prometheus: "+secretHash+"\n")
	p := metricsProxy(t, "--metrics-web-config", path)
	addr := p.MetricsAddr().String()

	anonymous := scraper{addr: addr}
	for _, path := range []string{"/metrics", "/readyz"} {
		h, body := anonymous.mustGet(t, path, http.StatusUnauthorized)
		if got := h.Get("WWW-Authenticate"); got != `Basic realm="replproxy"` {
			t.Fatalf("%s: WWW-Authenticate %q", path, got)
		}
		if strings.Contains(body, "replproxy_") || strings.Contains(body, "upstream") {
			t.Fatalf("%s: a refusal tells %q", path, body)
		}
	}
	if _, body := anonymous.mustGet(t, "/healthz", http.StatusOK); body != "ok\n" {
		t.Fatalf("/healthz: %q", body)
	}
	(scraper{addr: addr, user: "prometheus", password: "wrong-password"}).mustGet(t, "/metrics", http.StatusUnauthorized)
	(scraper{addr: addr, user: "root", password: "secret"}).mustGet(t, "/readyz", http.StatusUnauthorized)

	right := scraper{addr: addr, user: "prometheus", password: "secret"}
	right.mustGet(t, "/readyz", http.StatusServiceUnavailable) // no upstream: not ready, but let in
	_, body := right.mustGet(t, "/metrics", http.StatusOK)
	if got := parseMetrics(t, body)["replproxy_metrics_auth_failures_total"]; got != 4 {
		t.Fatalf("replproxy_metrics_auth_failures_total %v, want 4", got)
	}
	c := redistest.Dial(t, p.AddrString())
	if n := c.InfoInt(t, "proxy", "metrics_auth_failures"); n != 4 {
		t.Fatalf("INFO metrics_auth_failures %d, want 4", n)
	}
	if !p.Log.Contains("monitoring request refused") || p.Log.Contains("wrong-password") {
		t.Fatalf("refusals not logged, or logged with the password:\n%s", p.Log.String())
	}
}

// secretHashCost10 is a bcrypt hash of "secret" at cost 10: a comparison
// takes long enough (tens of milliseconds) for concurrent requests to
// meet it.
const secretHashCost10 = "$2a$10$Sado3Bz4HG.PbP2aw19dwuydeii4qm51kEoMTqcCOSY7nrGt2bqSS"

// TestMetricsAuthThrottled: wrong passwords, 16 at a time from one
// address, until some are refused 429 (the address's share of the
// password checks' queue taken) besides the 401s: each 429 carries
// Retry-After, and is counted in INFO metrics_auth_throttled and
// replproxy_metrics_auth_throttled_total, the 401s in
// metrics_auth_failures, and logged without the password.
func TestMetricsAuthThrottled(t *testing.T) {
	path := writeWebConfig(t, t.TempDir(), "basic_auth_users:\n  prometheus: "+secretHashCost10+"\n")
	p := metricsProxy(t, "--metrics-web-config", path)
	addr := p.MetricsAddr().String()
	wrong := scraper{addr: addr, user: "prometheus", password: "wrong-password"}
	var unauthorized, tooMany atomic.Int64
	deadline := time.Now().Add(30 * time.Second)
	for tooMany.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no request refused 429 in 30s; %d refused 401", unauthorized.Load())
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				code, h, body, err := wrong.get("/metrics")
				switch {
				case err != nil:
					t.Errorf("a wrong password: %v", err)
				case code == http.StatusUnauthorized:
					unauthorized.Add(1)
				case code == http.StatusTooManyRequests && h.Get("Retry-After") == "1" && h.Get("WWW-Authenticate") == "":
					tooMany.Add(1)
				default:
					t.Errorf("a wrong password: %d %v %q", code, h, body)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	right := scraper{addr: addr, user: "prometheus", password: "secret"}
	_, body := right.mustGet(t, "/metrics", http.StatusOK)
	m := parseMetrics(t, body)
	if got, want := m["replproxy_metrics_auth_throttled_total"], float64(tooMany.Load()); got != want {
		t.Errorf("replproxy_metrics_auth_throttled_total %v, want %v", got, want)
	}
	if got, want := m["replproxy_metrics_auth_failures_total"], float64(unauthorized.Load()); got != want {
		t.Errorf("replproxy_metrics_auth_failures_total %v, want %v", got, want)
	}
	c := redistest.Dial(t, p.AddrString())
	if got := c.InfoInt(t, "proxy", "metrics_auth_throttled"); got != tooMany.Load() {
		t.Errorf("INFO metrics_auth_throttled %d, want %d", got, tooMany.Load())
	}
	if got := c.InfoInt(t, "proxy", "metrics_auth_failures"); got != unauthorized.Load() {
		t.Errorf("INFO metrics_auth_failures %d, want %d", got, unauthorized.Load())
	}
	if !p.Log.Contains("monitoring request refused: too many password checks waiting") || p.Log.Contains("wrong-password") {
		t.Fatalf("429s not logged, or logged with the password:\n%s", p.Log.String())
	}
}

// TestMetricsWebConfigTLS: a tls_server_config takes metrics-tls's place
// (with a warning), with its own certificate (file names relative to the
// web configuration's directory) and client certificate policy, together
// with basic authentication; a renewed certificate is served once its
// files change, with no restart and no CONFIG SET.
func TestMetricsWebConfigTLS(t *testing.T) {
	proxyPKI, webPKI := redistest.NewPKI(t), redistest.NewPKI(t)
	dir := t.TempDir()
	copyFile(t, webPKI.Cert, filepath.Join(dir, "metrics.crt"))
	copyFile(t, webPKI.Key, filepath.Join(dir, "metrics.key"))
	copyFile(t, webPKI.CACert, filepath.Join(dir, "ca.crt"))
	path := writeWebConfig(t, dir, "tls_server_config:\n  cert_file: metrics.crt\n  key_file: metrics.key\n"+
		"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n"+
		"basic_auth_users:\n  prometheus: "+secretHash+"\n")
	p := metricsProxy(t, "--metrics-web-config", path, "--metrics-tls", "yes", "--tls-auth-clients", "no",
		"--tls-cert-file", proxyPKI.Cert, "--tls-key-file", proxyPKI.Key)
	addr := p.MetricsAddr().String()
	if !p.Log.Contains("serves the tls_server_config of metrics-web-config instead") {
		t.Fatal("no warning that metrics-tls is overridden")
	}

	right := scraper{addr: addr, tls: webPKI.ClientConfig(), user: "prometheus", password: "secret"}
	right.mustGet(t, "/metrics", http.StatusOK)
	(scraper{addr: addr, tls: webPKI.ClientConfig()}).mustGet(t, "/metrics", http.StatusUnauthorized)
	(scraper{addr: addr, tls: webPKI.ClientConfig()}).mustGet(t, "/healthz", http.StatusOK)
	for name, sc := range map[string]scraper{
		"trusting the proxy's CA only": {addr: addr, tls: proxyPKI.ClientConfig(), user: "prometheus", password: "secret"},
		"without a client certificate": {addr: addr, tls: withoutCert(webPKI), user: "prometheus", password: "secret"},
		"below min_version":            {addr: addr, tls: func() *tls.Config { c := webPKI.ClientConfig(); c.MaxVersion = tls.VersionTLS12; return c }()},
	} {
		if _, _, _, err := sc.get("/healthz"); err == nil {
			t.Errorf("a scraper %s got in", name)
		}
	}

	// Rotation: a certificate from a new CA under the same names (the key
	// first: a certificate and key that disagree keep the old pair served).
	renewed := redistest.NewPKI(t)
	copyFile(t, renewed.Key, filepath.Join(dir, "metrics.key"))
	right.mustGet(t, "/metrics", http.StatusOK)
	redistest.WaitFor(t, 5*time.Second, "the half-renewed files reported", func() bool {
		return p.Log.Contains("TLS files not reloaded")
	})
	copyFile(t, renewed.Cert, filepath.Join(dir, "metrics.crt"))
	copyFile(t, renewed.CACert, filepath.Join(dir, "ca.crt"))
	later := time.Now().Add(2 * time.Second) // modification times may be coarse
	for _, f := range []string{"metrics.crt", "metrics.key", "ca.crt"} {
		os.Chtimes(filepath.Join(dir, f), later, later)
	}
	(scraper{addr: addr, tls: renewed.ClientConfig(), user: "prometheus", password: "secret"}).mustGet(t, "/metrics", http.StatusOK)
	if _, _, _, err := right.get("/healthz"); err == nil {
		t.Fatal("the old certificate still served after its files were replaced")
	}
}

// TestMetricsWebConfigBad: a web configuration the proxy cannot use fails
// New with an error naming metrics-web-config, the file and the problem.
func TestMetricsWebConfigBad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"unknown key", "basic_auth_users: {}\ntls_server_config:\n  cert_filse: a.crt\n", `line 3: tls_server_config: unknown key "cert_filse"`},
		{"plain password", "basic_auth_users:\n  prometheus: hunter2\n", `basic_auth_users: user "prometheus": the password is not a bcrypt hash`},
		{"missing certificate", "tls_server_config:\n  cert_file: none.crt\n  key_file: none.key\n", "tls_server_config: cert_file: stat " + filepath.Join(dir, "none.crt")},
		{"not YAML", "basic_auth_users: [\n", "line 1: did not find expected node content"},
		{"rate_limit", "rate_limit:\n  burst: 10\n", "rate_limit is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeWebConfig(t, dir, tc.text)
			err := newFails(t, "--metrics-web-config", path)
			if msg := err.Error(); !strings.HasPrefix(msg, "metrics-web-config: "+path+": ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "hunter2") {
				t.Fatalf("New: %q, want metrics-web-config, %s and %q", msg, path, tc.want)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(dir, "absent.yml")
		if err := newFails(t, "--metrics-web-config", path); !strings.Contains(err.Error(), "metrics-web-config: open "+path) {
			t.Fatalf("New: %v", err)
		}
	})
	t.Run("no metrics-port", func(t *testing.T) {
		// Without a monitoring port the file is not read.
		cfg, err := config.Parse([]string{"--port", "0", "--dir", t.TempDir(), "--metrics-web-config", filepath.Join(dir, "absent.yml")})
		if err != nil {
			t.Fatal(err)
		}
		srv, err := New(cfg, Options{})
		if err != nil {
			t.Fatalf("New without metrics-port: %v", err)
		}
		srv.Close()
	})
}

// newFails builds a proxy with a monitoring port and args, expects New to
// fail, and returns its error.
func newFails(t *testing.T, args ...string) error {
	t.Helper()
	cfg, err := config.Parse(append([]string{"--port", "0", "--bind", "127.0.0.1", "--dir", t.TempDir(),
		"--metrics-port", strconv.Itoa(redistest.FreePort(t))}, args...))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, Options{})
	if err == nil {
		srv.Close()
		return errors.New("New succeeded")
	}
	return err
}

// TestPromtoolWebConfig: the example deploy/prometheus/web-config.yml,
// with a certificate and key beside it, passes `promtool check web-config`
// and is one the proxy starts with: HTTPS, /metrics refused without
// credentials, /healthz open. deploy/prometheus/scrape-config.yml, the
// Prometheus side, passes `promtool check config`.
func TestPromtoolWebConfig(t *testing.T) {
	deploy := filepath.Join("..", "deploy", "prometheus")
	pki := redistest.NewPKI(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "web-config.yml")
	copyFile(t, filepath.Join(deploy, "web-config.yml"), path)
	copyFile(t, pki.Cert, filepath.Join(dir, "metrics.crt"))
	copyFile(t, pki.Key, filepath.Join(dir, "metrics.key"))
	if out := promtool(t, "", "check", "web-config", path); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check web-config:\n%s", out)
	}
	if out := promtool(t, "", "check", "config", filepath.Join(deploy, "scrape-config.yml")); !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check config:\n%s", out)
	}

	p := metricsProxy(t, "--metrics-web-config", path)
	sc := scraper{addr: p.MetricsAddr().String(), tls: withoutCert(pki)}
	sc.mustGet(t, "/metrics", http.StatusUnauthorized)
	sc.mustGet(t, "/healthz", http.StatusOK)
}

package metrics

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// testHash is a bcrypt hash (cost 4, the cheapest) of "secret".
const testHash = "$2a$04$xHXhAxKGgVRm9BLAATKT3e8t63NDWm1lfKW50xC8Ggd.9gq.bZqLG"

// TestBasicAuthCheck: the right password passes, a wrong one, another
// user's or an unknown user's does not; credentials that passed are
// remembered by their HMAC, not as they are; a hash bcrypt cannot read is
// refused without being quoted.
func TestBasicAuthCheck(t *testing.T) {
	a, err := NewBasicAuth(map[string]string{"prometheus": testHash, "ops": testHash})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, password string
		want           bool
	}{
		{"prometheus", "secret", true},
		{"prometheus", "secret", true}, // remembered
		{"ops", "secret", true},
		{"prometheus", "Secret", false},
		{"prometheus", "", false},
		{"nobody", "secret", false},
		{"", "secret", false},
		{"prometheus", "secret\x00", false},
	} {
		if got := a.Check(tc.user, tc.password); got != tc.want {
			t.Errorf("Check(%q, %q) = %v, want %v", tc.user, tc.password, got, tc.want)
		}
	}
	if len(a.passed) != 2 {
		t.Fatalf("%d credentials remembered, want 2", len(a.passed))
	}
	for mac := range a.passed {
		if strings.Contains(string(mac[:]), "secret") {
			t.Fatal("a password is kept as it is")
		}
	}
	if a.dummy == nil {
		t.Fatal("an unknown user was not compared with a hash")
	}

	// htpasswd writes $2y$ hashes: the same bcrypt.
	y, err := NewBasicAuth(map[string]string{"p": strings.Replace(testHash, "$2a$", "$2y$", 1)})
	if err != nil || !y.Check("p", "secret") || y.Check("p", "wrong") {
		t.Fatalf("a $2y$ hash: %v", err)
	}

	_, err = NewBasicAuth(map[string]string{"john": "hunter2"})
	if err == nil || !strings.Contains(err.Error(), `"john"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a plain password as the hash: %v", err)
	}
}

// TestBasicAuthRemembersFew: past maxCachedLogins the memory of passed
// credentials starts again, and they still pass.
func TestBasicAuthRemembersFew(t *testing.T) {
	a, err := NewBasicAuth(map[string]string{"p": testHash})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedLogins {
		a.passed[a.mac("u", strings.Repeat("x", i))] = struct{}{}
	}
	if !a.Check("p", "secret") || len(a.passed) != 1 {
		t.Fatalf("%d remembered after the cap, want 1", len(a.passed))
	}
	if !a.Check("p", "secret") {
		t.Fatal("refused once remembered again")
	}
}

// TestBasicAuthOneCompareAtATime: concurrent checks of wrong passwords
// run their bcrypt comparisons one at a time, and a remembered scraper
// does not wait behind them.
func TestBasicAuthOneCompareAtATime(t *testing.T) {
	a, err := NewBasicAuth(map[string]string{"p": testHash})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Check("p", "secret") {
		t.Fatal("refused")
	}
	a.compareMu.Lock() // a comparison under way, for as long as the test likes
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { a.Check("p", "wrong") })
	}
	done := make(chan bool)
	go func() { done <- a.Check("p", "secret") }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("remembered credentials refused")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("remembered credentials wait behind a comparison")
	}
	a.compareMu.Unlock()
	wg.Wait()
}

// getAuth serves one request of path from h, with credentials when user is
// not empty, and returns the recorded reply.
func getAuth(t *testing.T, h http.Handler, path, user, password string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestAuthGuard: with Auth set, /metrics and /readyz (and any other path,
// "/healthz/" included) answer 401 with WWW-Authenticate: Basic
// realm="replproxy" to a request without credentials that pass, and
// AuthFailed hears of each; /healthz needs none. Headers are on every
// reply, refusals included.
func TestAuthGuard(t *testing.T) {
	auth, err := NewBasicAuth(map[string]string{"prometheus": testHash})
	if err != nil {
		t.Fatal(err)
	}
	type failure struct {
		remote string
		sent   bool
	}
	var failures []failure
	h := (&Server{
		Figures:    func() Figures { return Figures{} },
		Ready:      func() (bool, string) { return true, "ready" },
		Auth:       auth,
		AuthFailed: func(remote string, sent bool) { failures = append(failures, failure{remote, sent}) },
		Headers:    map[string]string{"X-Content-Type-Options": "nosniff"},
	}).Handler()
	for _, tc := range []struct {
		path, user, password string
		want                 int
	}{
		{"/healthz", "", "", http.StatusOK},
		{"/healthz?x=1", "", "", http.StatusOK},
		{"/healthz", "prometheus", "wrong", http.StatusOK},
		{"/metrics", "", "", http.StatusUnauthorized},
		{"/readyz", "", "", http.StatusUnauthorized},
		{"/healthz/", "", "", http.StatusUnauthorized},
		{"/nothing", "", "", http.StatusUnauthorized},
		{"/metrics", "prometheus", "wrong", http.StatusUnauthorized},
		{"/readyz", "root", "secret", http.StatusUnauthorized},
		{"/metrics", "prometheus", "secret", http.StatusOK},
		{"/readyz", "prometheus", "secret", http.StatusOK},
		{"/nothing", "prometheus", "secret", http.StatusNotFound},
	} {
		rec := getAuth(t, h, tc.path, tc.user, tc.password)
		if rec.Code != tc.want {
			t.Errorf("%s as %q/%q: %d, want %d", tc.path, tc.user, tc.password, rec.Code, tc.want)
		}
		if got := rec.Header().Get("WWW-Authenticate"); (rec.Code == http.StatusUnauthorized) != (got == `Basic realm="replproxy"`) {
			t.Errorf("%s: %d with WWW-Authenticate %q", tc.path, rec.Code, got)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d without the configured header", tc.path, rec.Code)
		}
		if rec.Code == http.StatusUnauthorized && strings.Contains(rec.Body.String(), "replproxy_") {
			t.Errorf("%s: a refusal carries metrics", tc.path)
		}
	}
	want := []failure{{"192.0.2.1:1234", false}, {"192.0.2.1:1234", false}, {"192.0.2.1:1234", false}, {"192.0.2.1:1234", false},
		{"192.0.2.1:1234", true}, {"192.0.2.1:1234", true}}
	if len(failures) != len(want) {
		t.Fatalf("AuthFailed heard %v, want %v", failures, want)
	}
	for i := range want {
		if failures[i] != want[i] {
			t.Fatalf("AuthFailed heard %v, want %v", failures, want)
		}
	}
}

// TestServeTLS: with TLS set the port speaks HTTPS (HTTP/1.1: no ALPN
// protocol is agreed) and a plain HTTP request is answered 400; the
// connection cap sees its connections through the TLS layer.
func TestServeTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.Cert, pki.Key)
	if err != nil {
		t.Fatal(err)
	}
	m := serving(t, &Server{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}, ErrorLog: log.New(io.Discard, "", 0)})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(), ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + m.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" || resp.ProtoMajor != 1 {
		t.Fatalf("HTTPS /healthz: %s %d %q", resp.Proto, resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + m.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP to the HTTPS port: %d", resp.StatusCode)
	}

	// connState unwraps the TLS connection to its slot.
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	lc := &limitConn{Conn: c1, l: m.ln}
	tc := tls.Server(lc, &tls.Config{})
	m.ln.connState(tc, http.StateActive)
	if !lc.busy {
		t.Fatal("a request over TLS does not mark its slot busy")
	}
	m.ln.connState(tc, http.StateIdle)
	if lc.busy {
		t.Fatal("the end of a request over TLS does not free its slot")
	}
}

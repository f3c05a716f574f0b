package metrics

import (
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
		want           Verdict
	}{
		{"prometheus", "secret", Passed},
		{"prometheus", "secret", Passed}, // remembered
		{"ops", "secret", Passed},
		{"prometheus", "Secret", Failed},
		{"prometheus", "", Failed},
		{"nobody", "secret", Failed},
		{"", "secret", Failed},
		{"prometheus", "secret\x00", Failed},
	} {
		if got := a.Check("192.0.2.1:1234", tc.user, tc.password); got != tc.want {
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
	if err != nil || y.Check("192.0.2.1:1234", "p", "secret") != Passed || y.Check("192.0.2.1:1234", "p", "wrong") != Failed {
		t.Fatalf("a $2y$ hash: %v", err)
	}

	_, err = NewBasicAuth(map[string]string{"john": "hunter2"})
	if err == nil || !strings.Contains(err.Error(), `"john"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a plain password as the hash: %v", err)
	}
}

// countCompares makes a count the bcrypt comparisons it runs, and returns
// the count.
func countCompares(a *BasicAuth) *atomic.Int64 {
	var n atomic.Int64
	compare := a.compare
	a.compare = func(hash, password []byte) error {
		n.Add(1)
		return compare(hash, password)
	}
	return &n
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
	if a.Check("192.0.2.1:1234", "p", "secret") != Passed || len(a.passed) != 1 {
		t.Fatalf("%d remembered after the cap, want 1", len(a.passed))
	}
	if a.Check("192.0.2.1:1234", "p", "secret") != Passed {
		t.Fatal("refused once remembered again")
	}
}

// TestBasicAuthFloodKeepsRemembered: a flood of distinct wrong
// credentials, more than maxCachedLogins of them (wrong passwords of a
// user, unknown users), is refused, every one after a comparison; none is
// remembered, so the scraper's credentials, which passed before, are not
// forgotten and pass again with no comparison, and a wrong one asked again
// is compared again and refused.
func TestBasicAuthFloodKeepsRemembered(t *testing.T) {
	a, err := NewBasicAuth(map[string]string{"prometheus": testHash})
	if err != nil {
		t.Fatal(err)
	}
	compares := countCompares(a)
	if a.Check("192.0.2.1:1234", "prometheus", "secret") != Passed {
		t.Fatal("the scraper refused")
	}
	const flood = maxCachedLogins + 16
	for i := range flood {
		user, password := "prometheus", fmt.Sprintf("wrong-%d", i)
		if i%2 == 1 {
			user, password = fmt.Sprintf("stranger-%d", i), "secret"
		}
		if v := a.Check("198.51.100.7:4321", user, password); v != Failed {
			t.Fatalf("%q/%q: %v, want Failed", user, password, v)
		}
	}
	if len(a.passed) != 1 {
		t.Fatalf("%d credentials remembered after the flood, want the scraper's alone", len(a.passed))
	}
	before := compares.Load()
	if before != 1+flood {
		t.Fatalf("%d comparisons, want one per check not remembered (%d)", before, 1+flood)
	}
	if a.Check("192.0.2.1:1234", "prometheus", "secret") != Passed || compares.Load() != before {
		t.Fatal("the scraper's credentials were forgotten by the flood")
	}
	if v := a.Check("198.51.100.7:4321", "prometheus", "wrong-0"); v != Failed || compares.Load() != before+1 {
		t.Fatalf("a wrong password asked again: %v after %d comparisons, want Failed after one", v, compares.Load()-before)
	}
}

// waitQueued waits until q has n checks admitted, failing the test after a
// while.
func waitQueued(t *testing.T, q *compareQueue, n int) {
	t.Helper()
	queued := func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.queued
	}
	if !pollUntil(5*time.Second, func() bool { return queued() == n }) {
		t.Fatalf("%d checks admitted, want %d", queued(), n)
	}
}

// TestBasicAuthOneCompareAtATime: concurrent checks of wrong passwords
// run their bcrypt comparisons one at a time, at most maxQueued admitted
// to wait for them and maxQueuedPerSource of one source; the others are
// told Busy at once, and a remembered scraper does not wait behind them.
// Once the comparison is free, every admitted check is refused, and the
// queue empties.
func TestBasicAuthOneCompareAtATime(t *testing.T) {
	if maxQueued >= MaxConns || maxQueuedPerSource > maxQueued {
		t.Fatalf("maxQueued %d of MaxConns %d connections, %d per source: checks waiting could hold every connection",
			maxQueued, MaxConns, maxQueuedPerSource)
	}
	a, err := NewBasicAuth(map[string]string{"p": testHash})
	if err != nil {
		t.Fatal(err)
	}
	if a.Check("192.0.2.1:1234", "p", "secret") != Passed {
		t.Fatal("refused")
	}
	a.compareMu.Lock() // a comparison under way, for as long as the test likes
	verdicts := make(chan Verdict, maxQueued)
	var wg sync.WaitGroup
	check := func(source string) {
		wg.Go(func() { verdicts <- a.Check(source, "p", "wrong") })
	}
	// One source's share: the next of it is Busy, another's is admitted.
	for range maxQueuedPerSource {
		check("198.51.100.7:1")
	}
	waitQueued(t, &a.queue, maxQueuedPerSource)
	if v := a.Check("198.51.100.7:2", "p", "wrong"); v != Busy {
		t.Fatalf("a source's check past its share: %v, want Busy", v)
	}
	for i := maxQueuedPerSource; i < maxQueued; i++ {
		check(fmt.Sprintf("203.0.113.%d:1", i))
	}
	waitQueued(t, &a.queue, maxQueued)
	if v := a.Check("192.0.2.99:1", "p", "wrong"); v != Busy {
		t.Fatalf("a check past the queue: %v, want Busy", v)
	}
	done := make(chan Verdict)
	go func() { done <- a.Check("192.0.2.99:1", "p", "secret") }()
	select {
	case v := <-done:
		if v != Passed {
			t.Fatalf("remembered credentials: %v", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("remembered credentials wait behind a comparison")
	}
	a.compareMu.Unlock()
	wg.Wait()
	close(verdicts)
	for v := range verdicts {
		if v != Failed {
			t.Fatalf("an admitted wrong password: %v, want Failed", v)
		}
	}
	if a.queue.queued != 0 || len(a.queue.sources) != 0 {
		t.Fatalf("the queue after: %d admitted, sources %v", a.queue.queued, a.queue.sources)
	}
}

// TestVerdictString: each verdict has a name, and one out of range says
// what it is.
func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Failed: "failed", Passed: "passed", Busy: "busy", Busy + 1: "Verdict(3)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q, want %q", int(v), got, want)
		}
	}
}

// TestSourceOf: a client is counted by its IP address, by its /64 for
// IPv6.
func TestSourceOf(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.1:1234", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:1234", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:80", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::7]:81", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:1", "fe80::/64"},
		{"not an address", "not an address"},
	} {
		if got := sourceOf(tc.remote); got != tc.want {
			t.Errorf("sourceOf(%q) = %q, want %q", tc.remote, got, tc.want)
		}
	}
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
// reply, refusals included. With the comparison's queue full, credentials
// not remembered are refused 429 with Retry-After, and AuthBusy hears of
// it.
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
	var busy []string
	h := (&Server{
		Figures:    func() Figures { return Figures{} },
		Ready:      func() (bool, string) { return true, "ready" },
		Auth:       auth,
		AuthFailed: func(remote string, sent bool) { failures = append(failures, failure{remote, sent}) },
		AuthBusy:   func(remote string) { busy = append(busy, remote) },
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
	if len(busy) != 0 {
		t.Fatalf("AuthBusy heard %v with the queue empty", busy)
	}

	// The comparison's queue full: credentials not remembered get 429 with
	// Retry-After (and AuthBusy hears of it) without being compared,
	// remembered ones pass, none are needed for /healthz, and a request
	// without credentials is refused 401 as ever.
	failures = nil
	auth.queue.queued = maxQueued
	rec := getAuth(t, h, "/metrics", "prometheus", "wrong")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != retryAfter ||
		rec.Header().Get("WWW-Authenticate") != "" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("a wrong password with the queue full: %d %v", rec.Code, rec.Header())
	}
	if len(busy) != 1 || busy[0] != "192.0.2.1:1234" || len(failures) != 0 {
		t.Fatalf("AuthBusy heard %v, AuthFailed %v; want one 429 from 192.0.2.1:1234", busy, failures)
	}
	for _, tc := range []struct {
		path, user, password string
		want                 int
	}{
		{"/metrics", "prometheus", "secret", http.StatusOK},
		{"/healthz", "", "", http.StatusOK},
		{"/readyz", "", "", http.StatusUnauthorized},
	} {
		if rec := getAuth(t, h, tc.path, tc.user, tc.password); rec.Code != tc.want {
			t.Errorf("%s as %q with the queue full: %d, want %d", tc.path, tc.user, rec.Code, tc.want)
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

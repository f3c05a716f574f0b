package metrics

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Starving the port: clients that hold the monitoring port's connections
// (keep-alive clients that never go idle long enough to be closed,
// slow-loris clients that send their headers a byte a second) must not
// keep a liveness probe out. Each attacker connects again as soon as it is
// closed, as a real one would; each probe is a new connection, as the
// kubelet's are, and must be answered within probeTimeout.

// probeTimeout is the most a /healthz probe may take while the port is
// under attack (the Kubernetes example's liveness probe allows 2 s).
const probeTimeout = time.Second

// keepAliveClient sends GET /healthz every period over one keep-alive
// connection, reading each reply, and connects again whenever the server
// closes it (at the next period), until ctx ends. answered counts the replies it read.
func keepAliveClient(ctx context.Context, addr string, period time.Duration, answered *atomic.Int64) {
	req := []byte("GET /healthz HTTP/1.1\r\nHost: replproxy\r\n\r\n")
	for ctx.Err() == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		br := bufio.NewReader(c)
		for ctx.Err() == nil {
			if _, err := c.Write(req); err != nil {
				break
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			answered.Add(1)
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
			if resp.Close {
				break
			}
		}
		stop()
		c.Close()
	}
}

// slowlorisClient sends a request's headers one byte a second, never
// finishing them, and connects again whenever the server closes it, until
// ctx ends. conns counts its connections.
func slowlorisClient(ctx context.Context, addr string, conns *atomic.Int64) {
	headers := []byte("GET /healthz HTTP/1.1\r\nHost: replproxy\r\nX-Padding: " +
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	for ctx.Err() == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		conns.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		var b [1]byte
		for i := 0; ctx.Err() == nil; i = (i + 1) % len(headers) {
			if _, err := c.Write(headers[i : i+1]); err != nil {
				break
			}
			// A second between bytes, watching for the server's close.
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := c.Read(b[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
		}
		stop()
		c.Close()
	}
}

// probe GETs /healthz on a new connection and returns how long the answer
// took, failing the test unless it is 200 within probeTimeout.
func probe(t *testing.T, addr string) time.Duration {
	t.Helper()
	client := &http.Client{Timeout: probeTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get("http://" + addr + "/healthz")
	took := time.Since(start)
	if err != nil {
		t.Errorf("/healthz probe: %v after %v", err, took.Round(time.Millisecond))
		return took
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz probe: %d", resp.StatusCode)
	}
	return took
}

// attack runs n clients, each calling run until ctx ends, and returns a
// function that ends them and waits for them.
func attack(n int, run func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { run(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}

// TestHealthzUnderKeepAliveAndSlowloris: 8 keep-alive clients asking every
// second and 8 slow-loris clients, 16 attackers for MaxConns connections,
// beside three /healthz probes a second apart, each answered within
// probeTimeout.
func TestHealthzUnderKeepAliveAndSlowloris(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 5 s): probes a second apart under attack")
	}
	m := serving(t, &Server{})
	addr := m.Addr().String()
	var answered, lorisConns atomic.Int64
	stopKeepAlive := attack(MaxConns, func(ctx context.Context) { keepAliveClient(ctx, addr, time.Second, &answered) })
	defer stopKeepAlive()
	if !pollUntil(5*time.Second, func() bool { return answered.Load() >= MaxConns }) {
		t.Fatalf("the keep-alive clients got %d answers in 5s", answered.Load())
	}
	stopLoris := attack(MaxConns, func(ctx context.Context) { slowlorisClient(ctx, addr, &lorisConns) })
	defer stopLoris()
	time.Sleep(1500 * time.Millisecond) // the slow-loris clients are connected and sending
	for i := range 3 {
		took := probe(t, addr)
		t.Logf("probe %d answered in %v", i+1, took.Round(time.Millisecond))
		time.Sleep(time.Second)
	}
	t.Logf("keep-alive clients: %d answers; slow-loris clients: %d connections", answered.Load(), lorisConns.Load())
}

// TestHealthzUnderBusyKeepAlive: 8 keep-alive clients each asking every
// 50 ms hold every connection with a request always in progress or near,
// never idle for long; three /healthz probes are still answered within
// probeTimeout.
func TestHealthzUnderBusyKeepAlive(t *testing.T) {
	m := serving(t, &Server{})
	addr := m.Addr().String()
	var answered atomic.Int64
	stop := attack(MaxConns, func(ctx context.Context) { keepAliveClient(ctx, addr, 50*time.Millisecond, &answered) })
	defer stop()
	if !pollUntil(5*time.Second, func() bool { return answered.Load() >= 4*MaxConns }) {
		t.Fatalf("the keep-alive clients got %d answers in 5s", answered.Load())
	}
	for i := range 3 {
		took := probe(t, addr)
		t.Logf("probe %d answered in %v", i+1, took.Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("keep-alive clients: %d answers", answered.Load())
}

// A flood of wrong passwords (metrics-web-config's basic_auth_users,
// bcrypt of cost 10) must not starve /healthz, nor a
// scraper whose credentials have passed before. Each attacker sends its
// next request as soon as it has the reply to the last, on a new
// connection, so that floodClients requests are in flight at all times.

// cost10Hash is a bcrypt hash of "secret" at cost 10, htpasswd's and the
// documentation's: a comparison takes tens of milliseconds of a CPU, about
// 0.8 s under the race detector.
const cost10Hash = "$2a$10$Sado3Bz4HG.PbP2aw19dwuydeii4qm51kEoMTqcCOSY7nrGt2bqSS"

const (
	// floodClients is how many wrong-password requests are in flight.
	floodClients = 64
	// healthzBound and scrapeBound are what /healthz and a scrape with
	// credentials that passed before may take under the flood: the
	// bounds the port is held to, far inside a liveness probe's 2 s and a scrape's
	// timeout.
	healthzBound = 100 * time.Millisecond
	scrapeBound  = 500 * time.Millisecond
)

// floodBounds returns healthzBound and scrapeBound, or under the race
// detector probeTimeout for both. What a probe waits for under the flood
// is its turn behind the attackers' connections in the accept queue, each
// refused at once but each costing the server (and the attackers, in this
// process) an accept, a request read, a reply and a close. Under the race
// detector that costs several times more, and on a loaded 2-core machine
// one probe in five or so took 0.1 to 0.25 s, also with the bcrypt
// comparison replaced by a sleep: the bounds above measure the proxy's
// binary, not an instrumented one. probeTimeout still tells the fix from
// its absence there: without it a probe waits about 50 s (a comparison per
// connection ahead, 0.8 s each under the race detector).
func floodBounds() (healthz, scrape time.Duration) {
	if raceDetector {
		return probeTimeout, probeTimeout
	}
	return healthzBound, scrapeBound
}

// floodReplies counts the replies the attackers read.
type floodReplies struct {
	sent, unauthorized, tooMany, other atomic.Int64
	tooManyWithoutRetryAfter           atomic.Int64
}

// wrongPasswordClient GETs /metrics with a wrong password on a new
// connection, reads the reply, and starts again at once, until ctx ends.
func wrongPasswordClient(ctx context.Context, addr string, replies *floodReplies) {
	req := []byte("GET /metrics HTTP/1.1\r\nHost: replproxy\r\nConnection: close\r\n" +
		"Authorization: Basic cHJvbWV0aGV1czp3cm9uZw==\r\n\r\n") // prometheus:wrong
	for ctx.Err() == nil {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		if _, err := c.Write(req); err == nil {
			replies.sent.Add(1)
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusUnauthorized:
					replies.unauthorized.Add(1)
				case http.StatusTooManyRequests:
					replies.tooMany.Add(1)
					if resp.Header.Get("Retry-After") == "" {
						replies.tooManyWithoutRetryAfter.Add(1)
					}
				default:
					replies.other.Add(1)
				}
			}
		}
		stop()
		c.Close()
	}
}

// timedGet GETs path on a new connection, with basic authentication when
// user is set, and returns the status and how long the reply took (the
// connection included).
func timedGet(addr, path, user, password string) (int, time.Duration, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, 0, err
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// TestHealthzUnderWrongPasswordFlood: with a real cost-10 hash, 64
// wrong-password requests in flight all the time. Five rounds, a few
// hundred milliseconds apart, each of a /healthz probe answered 200 within
// healthzBound and a scrape of /metrics with the scraper's credentials
// (which passed once, before the flood) answered 200 within scrapeBound
// (both probeTimeout under the race detector: floodBounds).
// Then what the flood got: 401s, and 429s with Retry-After once the
// comparisons' queue was full; the bcrypt comparisons ran one at a time,
// and the scraper's password was compared once, before the flood.
func TestHealthzUnderWrongPasswordFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (a few seconds): a flood of bcrypt comparisons")
	}
	auth, err := NewBasicAuth(map[string]string{"prometheus": cost10Hash})
	if err != nil {
		t.Fatal(err)
	}
	var comparing, mostComparing, scraperCompares atomic.Int64
	compare := auth.compare
	auth.compare = func(hash, password []byte) error {
		n := comparing.Add(1)
		defer comparing.Add(-1)
		for m := mostComparing.Load(); n > m && !mostComparing.CompareAndSwap(m, n); m = mostComparing.Load() {
		}
		if string(password) == "secret" {
			scraperCompares.Add(1)
		}
		return compare(hash, password)
	}
	var failed, busy atomic.Int64
	m := serving(t, &Server{
		Auth:       auth,
		AuthFailed: func(string, bool) { failed.Add(1) },
		AuthBusy:   func(string) { busy.Add(1) },
		ErrorLog:   log.New(io.Discard, "", 0),
	})
	addr := m.Addr().String()
	if code, took, err := timedGet(addr, "/metrics", "prometheus", "secret"); err != nil || code != http.StatusOK {
		t.Fatalf("the scraper's first scrape: %d %v after %v", code, err, took)
	}

	healthzWithin, scrapeWithin := floodBounds()
	var replies floodReplies
	stop := attack(floodClients, func(ctx context.Context) { wrongPasswordClient(ctx, addr, &replies) })
	defer stop()
	// Under way: every attacker has a request in flight, and one was refused.
	if !pollUntil(30*time.Second, func() bool {
		return replies.sent.Load() >= floodClients && failed.Load() > 0
	}) {
		t.Fatalf("the flood did not start: %d requests sent, %d refused", replies.sent.Load(), failed.Load())
	}
	for i := range 5 {
		code, took, err := timedGet(addr, "/healthz", "", "")
		t.Logf("round %d: /healthz %d in %v (%v)", i+1, code, took.Round(time.Millisecond), err)
		if err != nil || code != http.StatusOK || took > healthzWithin {
			t.Errorf("round %d: /healthz answered %d (%v) in %v under the flood, want 200 within %v", i+1, code, err, took.Round(time.Millisecond), healthzWithin)
		}
		code, took, err = timedGet(addr, "/metrics", "prometheus", "secret")
		t.Logf("round %d: scrape %d in %v (%v)", i+1, code, took.Round(time.Millisecond), err)
		if err != nil || code != http.StatusOK || took > scrapeWithin {
			t.Errorf("round %d: a scrape with good credentials answered %d (%v) in %v under the flood, want 200 within %v", i+1, code, err, took.Round(time.Millisecond), scrapeWithin)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()

	t.Logf("the flood: %d requests, %d refused 401, %d refused 429; %d AuthFailed, %d AuthBusy",
		replies.sent.Load(), replies.unauthorized.Load(), replies.tooMany.Load(), failed.Load(), busy.Load())
	if replies.other.Load() != 0 {
		t.Errorf("%d wrong-password requests answered neither 401 nor 429", replies.other.Load())
	}
	if replies.tooMany.Load() == 0 || busy.Load() < replies.tooMany.Load() {
		t.Errorf("%d requests refused 429, AuthBusy heard %d: the comparisons' queue never filled, or was not reported",
			replies.tooMany.Load(), busy.Load())
	}
	if n := replies.tooManyWithoutRetryAfter.Load(); n != 0 {
		t.Errorf("%d replies 429 without Retry-After", n)
	}
	if n := mostComparing.Load(); n != 1 {
		t.Errorf("%d bcrypt comparisons ran at once, want 1", n)
	}
	if n := scraperCompares.Load(); n != 1 {
		t.Errorf("the scraper's password was compared %d times, want once (before the flood)", n)
	}
}

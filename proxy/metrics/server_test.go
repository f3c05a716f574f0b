package metrics

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

// serving fills in m's figures and readiness with fakes where unset,
// listens on a free port of 127.0.0.1 and serves until the test ends.
func serving(t testing.TB, m *Server) *Server {
	t.Helper()
	if m.Figures == nil {
		m.Figures = func() Figures { return Figures{} }
	}
	if m.Ready == nil {
		m.Ready = func() (bool, string) { return true, "ready" }
	}
	listen(t, m)
	done := make(chan error, 1)
	go func() { done <- m.Serve() }()
	t.Cleanup(func() {
		m.Shutdown()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return m
}

// get serves one request of path from h and returns the status and body.
func get(t testing.TB, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Code, string(body)
}

// TestHealthAndReadiness: /healthz is 200 "ok"; /readyz is Ready's answer,
// 200 or 503, with its reason as the one line of the body.
func TestHealthAndReadiness(t *testing.T) {
	ready, why := false, "upstream link connecting; no sync with the primary has completed"
	h := (&Server{
		Figures: func() Figures { return Figures{} },
		Ready:   func() (bool, string) { return ready, why },
	}).Handler()
	if code, body := get(t, h, "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != http.StatusServiceUnavailable || body != why+"\n" {
		t.Fatalf("/readyz not ready: %d %q", code, body)
	}
	ready, why = true, "upstream link up"
	if code, body := get(t, h, "/readyz"); code != http.StatusOK || body != why+"\n" {
		t.Fatalf("/readyz ready: %d %q", code, body)
	}
}

// TestServeShutdown: Serve returns nil once Shutdown is called, and the
// port is closed after.
func TestServeShutdown(t *testing.T) {
	m := &Server{Figures: func() Figures { return Figures{} }, Ready: func() (bool, string) { return true, "" }}
	listen(t, m)
	addr := m.Addr().String()
	done := make(chan error, 1)
	go func() { done <- m.Serve() }()
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m.Shutdown()
	if err := <-done; err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("still listening after Shutdown")
	}
}

// TestCloseUnserved: Close closes the listener of a server that never
// served, and may be called again.
func TestCloseUnserved(t *testing.T) {
	m := &Server{}
	listen(t, m)
	addr := m.Addr().String()
	m.Close()
	m.Close()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("listener open after Close")
	}
}

// listen attaches a listener on a free loopback port to m.
func listen(t testing.TB, m *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.Attach(ln)
}

// openFDs counts the test process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count descriptors: %v", err)
	}
	return len(ents)
}

// TestMetricsConnectionsBounded: 300 clients each GET
// /healthz over one keep-alive connection and then stay, idle. Every one is
// answered, in turns of the cap; the server never holds more than
// MaxConns of them (the rest wait in the kernel's accept queue, with
// no descriptor of the process), and it closes the idle ones (for those
// waiting, then after the idle timeout), so its
// descriptors come back to what they were while the clients are still
// there. The descriptors are the process's: the clients' own 300 are
// subtracted.
func TestMetricsConnectionsBounded(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd to count descriptors with")
	}
	m := serving(t, &Server{idle: 100 * time.Millisecond})
	addr := m.Addr().String()
	base := openFDs(t)
	const n = 300
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: replproxy\r\n\r\n")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		conns[i] = c
	}
	held := 0 // the most descriptors the server held beside the clients'
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("client %d: no answer: %v (server holding %d)", i, err, openFDs(t)-base-n)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("client %d: %d", i, resp.StatusCode)
		}
		held = max(held, openFDs(t)-base-n)
	}
	// A few descriptors come and go meanwhile (the runtime's, the test
	// framework's).
	const slack = 8
	if held > MaxConns+slack {
		t.Errorf("the monitoring server held %d descriptors for idle clients, cap %d", held, MaxConns)
	}
	now := 0
	if !pollUntil(10*time.Second, func() bool { now = openFDs(t) - base - n; return now <= slack }) {
		t.Errorf("%d descriptors still held by the monitoring server for %d idle clients after 10s", now, n)
	}
	t.Logf("300 idle monitoring clients: at most %d descriptors held by the server, %d after the idle timeout", held, now)
}

// TestMetricsWriteTimeout: a
// client that pipelines scrapes of /metrics and never reads the replies
// fills the socket buffers both ways; the server's write timeout then
// closes the connection, which the client's blocked write sees as an error
// (the server closed with requests unread: a reset).
func TestMetricsWriteTimeout(t *testing.T) {
	m := serving(t, &Server{write: 500 * time.Millisecond})
	c, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4096) // so that the replies fill it soon
	req := []byte("GET /metrics HTTP/1.1\r\nHost: replproxy\r\n\r\n")
	writeErr := make(chan error, 1)
	go func() {
		// The server reads a request only once it has written the previous
		// reply, so these writes block too once the server's do.
		for {
			if _, err := c.Write(req); err != nil {
				writeErr <- err
				return
			}
		}
	}()
	select {
	case err := <-writeErr:
		t.Logf("the server closed the connection of a client that reads nothing: %v", err)
	case <-time.After(20 * time.Second):
		c.Close()
		<-writeErr
		t.Fatal("a client that reads no reply still holds its monitoring connection after 20s")
	}
	if !pollUntil(5*time.Second, func() bool {
		return m.ln.inUse() <= 1 // the next Accept's slot only
	}) {
		t.Fatalf("%d slots taken 5s after the connection closed, want at most 1 (the next Accept's)", m.ln.inUse())
	}
}

// pollUntil calls cond until it holds or d passes, and says whether it held.
func pollUntil(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

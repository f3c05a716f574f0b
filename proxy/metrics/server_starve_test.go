package metrics

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 32's item 1: clients that hold the monitoring port's connections
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

package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// procRSS returns process pid's resident set size in bytes.
func procRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// goroutinesOf reads go_goroutines from the monitoring server at addr.
func goroutinesOf(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("go_goroutines %q", v)
			}
			return int(n)
		}
	}
	t.Fatal("no go_goroutines in /metrics")
	return 0
}

// plainBinary returns a command running replproxy with args, built without
// the race detector: under -race the test binary's own memory (the race
// detector's shadow and per-goroutine state, which it does not give back:
// 62 -> 133 MiB over these cycles, against 20 -> 22 MiB without it) would
// hide what the proxy's does. Without -race it is the test binary itself.
func plainBinary(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if !raceEnabled {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
		return cmd
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build replproxy without -race with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "replproxy")
	if out, err := exec.Command(gobin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exec.Command(bin, append(args, "--log-format", "json")...) // as TestMain's child
}

// TestConnectCyclesReturnToBaseline: 10,000
// connect/disconnect cycles of each kind of connection against the real
// binary, built without the race detector (a RESP
// client's PING; a replica's handshake and PSYNC, answered
// +CONTINUE from the backlog; a TLS client's handshake and PING; a
// monitoring GET /healthz), then its goroutines, descriptors and RSS come
// back to their baseline, taken after a warm-up of each kind: goroutines
// and descriptors within a few (the monitoring scrape that counts them,
// the runtime's), RSS within rssTolerance (what the Go runtime keeps of its
// heap).
func TestConnectCyclesReturnToBaseline(t *testing.T) {
	redistest.Require(t)
	const (
		cycles       = 10000
		workers      = 8
		slack        = 4
		rssTolerance = 16 << 20
	)
	ctx := context.Background()
	dir := t.TempDir()
	xPort, tPort, mPort := redistest.FreePort(t), redistest.FreePort(t), redistest.FreePort(t)
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()
	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2})
	defer pc.Close()
	redistest.WaitFor(t, 10*time.Second, "the primary up", func() bool { return pc.Ping(ctx).Err() == nil })
	pc.Do(ctx, "DEBUG", "POPULATE", 1000, "key", 100)

	pki := redistest.NewPKI(t)
	cert, key := pki.Cert, pki.Key
	proxyDir := filepath.Join(dir, "proxy")
	os.MkdirAll(proxyDir, 0o755)
	logfile := filepath.Join(dir, "replproxy.log")
	cmd := plainBinary(t,
		"--port", itoa(xPort), "--bind", "127.0.0.1", "--replicaof", "127.0.0.1", itoa(pPort),
		"--metrics-port", itoa(mPort), "--tls-port", itoa(tPort),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no",
		"--dir", proxyDir, "--logfile", logfile)
	checkJSONLog(t, logfile)
	redistest.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("proxy log:\n%s", b)
		}
	})
	xAddr := net.JoinHostPort("127.0.0.1", itoa(xPort))
	tAddr := net.JoinHostPort("127.0.0.1", itoa(tPort))
	mAddr := net.JoinHostPort("127.0.0.1", itoa(mPort))
	xc := redis.NewClient(&redis.Options{Addr: xAddr, Protocol: 2, PoolSize: 1})
	defer xc.Close()
	redistest.WaitFor(t, 30*time.Second, "the proxy's link up", func() bool { return infoField(xc, "master_link_status") == "up" })
	pc.Set(ctx, "cycles", "x", 0) // stream in the backlog for the replicas' PSYNC
	redistest.WaitFor(t, 10*time.Second, "the proxy at the primary's offset", func() bool {
		return infoField(xc, "master_repl_offset") == infoField(pc, "master_repl_offset")
	})
	replID, offset := infoField(xc, "master_replid"), infoInt(t, xc, "master_repl_offset")
	pid := cmd.Process.Pid
	// Sessions are resumed after the warm-up's full handshakes (the server
	// issues tickets), with X25519 alone (no post-quantum key share, whose
	// pure-Go code is slow under the race detector): a connection's life on
	// the proxy is the same, and 10,000 default handshakes on the test's
	// side under -race take minutes.
	tlsConf := &tls.Config{
		InsecureSkipVerify: true,
		ClientSessionCache: tls.NewLRUClientSessionCache(workers),
		CurvePreferences:   []tls.CurveID{tls.X25519},
	}

	// expect reads one line from rd and checks its start.
	expect := func(rd *bufio.Reader, prefix string) error {
		line, err := rd.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, prefix) {
			return fmt.Errorf("got %q, want %s...", line, prefix)
		}
		return nil
	}
	kinds := []struct {
		name  string
		cycle func() error
	}{
		{"resp", func() error {
			c, err := net.Dial("tcp", xAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("PING\r\n"))
			return expect(bufio.NewReader(c), "+PONG")
		}},
		{"replica", func() error {
			c, err := net.Dial("tcp", xAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "REPLCONF listening-port 6380\r\nREPLCONF capa eof capa psync2\r\nPSYNC %s %d\r\n", replID, offset+1)
			rd := bufio.NewReader(c)
			for _, want := range []string{"+OK", "+OK", "+CONTINUE"} {
				if err := expect(rd, want); err != nil {
					return err
				}
			}
			return nil
		}},
		{"tls", func() error {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", tAddr, tlsConf)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("PING\r\n"))
			return expect(bufio.NewReader(c), "+PONG")
		}},
		{"monitoring", func() error {
			c, err := net.Dial("tcp", mAddr)
			if err != nil {
				return err
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: replproxy\r\nConnection: close\r\n\r\n"))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/healthz %d", resp.StatusCode)
			}
			return nil
		}},
	}
	run := func(name string, n int, cycle func() error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := w; i < n; i += workers {
					if err := cycle(); err != nil {
						errs <- fmt.Errorf("%s cycle %d: %w", name, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	for _, k := range kinds {
		run(k.name, 200, k.cycle) // warm-up: pools, caches and the runtime's structures at their size
	}
	// settled waits until no connection of the warm-up or the cycles is left
	// on the proxy's side, and returns its figures then.
	settled := func(what string) (g, fds int) {
		t.Helper()
		redistest.WaitFor(t, 30*time.Second, what, func() bool {
			return infoField(xc, "connected_clients") == "1" && infoField(xc, "connected_slaves") == "0"
		})
		return goroutinesOf(t, mAddr), procFDs(t, pid)
	}
	g0, fd0 := settled("the warm-up's connections gone")
	rss0 := procRSS(t, pid)
	t.Logf("baseline: %d goroutines, %d descriptors, RSS %d MiB", g0, fd0, rss0>>20)
	for _, k := range kinds {
		n := cycles
		start := time.Now()
		run(k.name, n, k.cycle)
		took := time.Since(start)
		var g, fds int
		redistest.WaitFor(t, 30*time.Second, k.name+": goroutines and descriptors back to the baseline", func() bool {
			g, fds = settled(k.name + ": connections gone")
			return g <= g0+slack && fds <= fd0+slack
		})
		rss := procRSS(t, pid)
		t.Logf("%d %s cycles in %v: %d goroutines, %d descriptors, RSS %d MiB", n, k.name, took.Round(time.Millisecond), g, fds, rss>>20)
		if rss > rss0+rssTolerance {
			t.Errorf("%s: RSS %d MiB after %d cycles, baseline %d MiB", k.name, rss>>20, n, rss0>>20)
		}
	}
	if n := infoInt(t, xc, "sync_partial_ok"); n != cycles+200 {
		t.Errorf("sync_partial_ok %d, want %d", n, cycles+200)
	}
}

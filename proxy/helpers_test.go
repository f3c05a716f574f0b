package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/rdbcheck"
)

// testLogger sends a server's logs to t.Log, so they show up for failing tests
// (and with -v), and keeps a copy that tests can search.
type testLogger struct {
	t     testing.TB
	quiet bool // keep nothing: neither t.Log nor the copy
	mu    sync.Mutex
	b     strings.Builder
}

func (w *testLogger) Write(p []byte) (int, error) {
	if w.quiet {
		return len(p), nil
	}
	w.mu.Lock()
	w.b.Write(p)
	w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Contains reports whether the log so far contains s.
func (w *testLogger) Contains(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Contains(w.b.String(), s)
}

// Count returns how many times s occurs in the log so far.
func (w *testLogger) Count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Count(w.b.String(), s)
}

// String returns the log so far.
func (w *testLogger) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// testProxy is an in-process replproxy built for one test.
type testProxy struct {
	*Server
	Log  *testLogger
	stop func() error // stops the proxy (and waits for Run to return); once
}

// AddrString returns host:port of the proxy's listener.
func (p *testProxy) AddrString() string { return p.Server.Addr().String() }

// dial opens a TCP connection to the proxy, closed when the test ends.
func (p *testProxy) dial(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.AddrString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// proxySetup says how newTestProxy builds a proxy. The zero value is a running
// proxy on 127.0.0.1 with a free port, logging at verbose level to t.Log.
type proxySetup struct {
	// args configure the proxy in the command-line form ("--replicaof",
	// "127.0.0.1", "6379", ...), after "--port 0 --bind 127.0.0.1 --loglevel
	// verbose".
	args []string
	// opts are given to New; their Logger is replaced by the test's.
	opts Options
	// wrap, when set, wraps the first listener before Run (to count or refuse
	// accepted connections).
	wrap func(net.Listener) net.Listener
	// level, when set, is the log level instead of the configured one.
	level hclog.Level
	// quiet keeps the log only for Contains, not for t.Log, whose buffers
	// would grow the heap a test compares with the proxy's accounting.
	quiet bool
	// idle builds the server without running it: the test drives its
	// upstream or its command table by hand; only its listeners are closed at
	// the end.
	idle bool
}

// newTestProxy builds the proxy that ps describes and stops it when the test
// ends. Every test server is built here.
func newTestProxy(t testing.TB, ps proxySetup) *testProxy {
	t.Helper()
	// Each proxy gets its own dir, as two proxies must not share one (the
	// stream log locks it); args may name another.
	cfg, err := config.Parse(append([]string{"--port", "0", "--bind", "127.0.0.1", "--loglevel", "verbose",
		"--dir", t.TempDir()}, ps.args...))
	if err != nil {
		t.Fatalf("proxy config: %v", err)
	}
	level := ps.level
	if level == hclog.NoLevel {
		level = HCLogLevel(cfg.LogLevel)
	}
	lw := &testLogger{t: t, quiet: ps.quiet}
	opts := ps.opts
	opts.Logger = hclog.New(&hclog.LoggerOptions{Name: "replproxy", Level: level, Output: lw})
	srv, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &testProxy{Server: srv, Log: lw}
	if ps.idle {
		p.stop = srv.Close
		t.Cleanup(func() { p.stop() })
		return p
	}
	if ps.wrap != nil {
		srv.listeners.list[0].Ln = ps.wrap(srv.listeners.list[0].Ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	p.stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("proxy stopped with %w", err)
			}
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("proxy did not stop within 10s")
		}
	})
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// startProxy runs a proxy configured by args (see proxySetup.args).
func startProxy(t testing.TB, args ...string) *testProxy {
	t.Helper()
	return newTestProxy(t, proxySetup{args: args})
}

// startPrimary starts a real redis-server meant to be a primary: immediate
// diskless syncs unless args say otherwise.
func startPrimary(t testing.TB, args ...string) (*redistest.Server, *redistest.Client) {
	t.Helper()
	srv := redistest.StartServer(t, append([]string{"--repl-diskless-sync-delay", "0"}, args...)...)
	return srv, redistest.Dial(t, srv.Addr())
}

// replicaOf returns the --replicaof arguments naming srv.
func replicaOf(srv *redistest.Server) []string {
	host, port, _ := strings.Cut(srv.Addr(), ":")
	return []string{"--replicaof", host, port}
}

// startProxyOf runs a proxy replicating srv, configured further by args, and
// returns it with a client once its link to srv is up.
func startProxyOf(t testing.TB, srv *redistest.Server, args ...string) (*testProxy, *redistest.Client) {
	t.Helper()
	p := startProxy(t, append(replicaOf(srv), args...)...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	return p, xc
}

// waitLinkUp waits until the proxy reports its link to the primary up.
func waitLinkUp(t testing.TB, pc *redistest.Client) {
	t.Helper()
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
		return pc.Info(t, "replication")["master_link_status"] == "up"
	})
}

// waitOffsetsEqual waits until the proxy has received (and applied) every
// byte the primary produced, then returns that offset.
func waitOffsetsEqual(t testing.TB, primary, proxy *redistest.Client) int64 {
	t.Helper()
	var want int64
	redistest.WaitFor(t, 15*time.Second, "proxy offset equal to the primary's", func() bool {
		want = primary.InfoInt(t, "replication", "master_repl_offset")
		pi := proxy.Info(t, "replication")
		return pi["master_repl_offset"] == itoa(want) && pi["slave_repl_offset"] == itoa(want)
	})
	return want
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// crc64Writer sums what is written to it with replbuf.CRC64, for tests that
// compare a payload with the file it went to.
type crc64Writer struct{ crc uint64 }

func (w *crc64Writer) Write(p []byte) (int, error) {
	w.crc = rdbcheck.CRC64(w.crc, p)
	return len(p), nil
}

// servedCommands is the command table by name, with no server to run its
// commands: its names and shapes.
func servedCommands() map[string]command {
	return newCommandTable(commandEntries(nil), nil).byName
}

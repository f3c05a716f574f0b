package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/streamlog"
)

// freePort returns a TCP port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// pingAt reports whether a proxy answers PING at addr.
func pingAt(t testing.TB, addr string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	a := &adminConn{t: t, conn: conn}
	a.rd = bufio.NewReader(conn)
	return a.do("PING") == "+PONG\r\n"
}

// TestConfigSetPortBind moves the listeners at runtime: the new address
// answers, the old one is closed, connections already made stay, and a
// change that cannot listen changes nothing (Redis's replies).
func TestConfigSetPortBind(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	oldAddr := p.AddrString()

	port := freePort(t)
	if got := a.do("CONFIG", "SET", "port", strconv.Itoa(port)); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET port: %q", got)
	}
	newAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if !pingAt(t, newAddr) {
		t.Fatal("no answer on the new port")
	}
	if pingAt(t, oldAddr) {
		t.Fatal("the old port still answers")
	}
	if got := a.do("PING"); got != "+PONG\r\n" { // accepted before the change
		t.Fatalf("old connection: %q", got)
	}
	if got := a.do("CONFIG", "GET", "port"); got != "*2\r\n$4\r\nport\r\n$"+strconv.Itoa(len(strconv.Itoa(port)))+"\r\n"+strconv.Itoa(port)+"\r\n" {
		t.Fatalf("CONFIG GET port: %q", got)
	}
	if !strings.Contains(a.do("INFO", "server"), "tcp_port:"+strconv.Itoa(port)+"\r\n") {
		t.Fatal("INFO tcp_port is not the new port")
	}

	// A port in use: refused, the listener stays.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := strconv.Itoa(busy.Addr().(*net.TCPAddr).Port)
	if got := a.do("CONFIG", "SET", "port", busyPort); got != "-ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port\r\n" {
		t.Fatalf("CONFIG SET port in use: %q", got)
	}
	if !pingAt(t, newAddr) {
		t.Fatal("a failed port change closed the listener")
	}

	// bind: one more address on the same port keeps the first listener; a
	// wildcard overlapping it replaces it (closed first, as Redis does);
	// back again.
	for _, bind := range []string{"127.0.0.1 -::1", "*", "127.0.0.1"} {
		if got := a.do("CONFIG", "SET", "bind", bind); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET bind %s: %q", bind, got)
		}
		if !pingAt(t, newAddr) {
			t.Fatalf("bind %s: no answer", bind)
		}
	}
	// An address of no interface here: refused, the old ones restored.
	if got := a.do("CONFIG", "SET", "bind", "192.0.2.1"); got != "-ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.\r\n" {
		t.Fatalf("CONFIG SET bind unusable: %q", got)
	}
	if !pingAt(t, newAddr) {
		t.Fatal("a failed bind change left no listener")
	}
	if got := a.do("CONFIG", "GET", "bind"); got != "*2\r\n$4\r\nbind\r\n$9\r\n127.0.0.1\r\n" {
		t.Fatalf("CONFIG GET bind after a failure: %q", got)
	}
}

func TestConfigSetDir(t *testing.T) {
	// The stream log holds dir: with it on, dir cannot change.
	on := adminDial(t, startProxy(t))
	if got := on.do("CONFIG", "SET", "dir", t.TempDir()); !strings.Contains(got, "dir cannot change while the stream log is on") {
		t.Fatalf("CONFIG SET dir with the stream log on: %q", got)
	}

	p := startProxy(t, "--repl-log-size", "0")
	a := adminDial(t, p)
	missing := filepath.Join(t.TempDir(), "missing")
	if got := a.do("CONFIG", "SET", "dir", missing); got != "-ERR CONFIG SET failed (possibly related to argument 'dir') - No such file or directory\r\n" {
		t.Fatalf("CONFIG SET dir missing: %q", got)
	}
	dir := t.TempDir()
	if got := a.do("CONFIG", "SET", "dir", dir); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET dir: %q", got)
	}
	if got := p.config().Dir; got != dir {
		t.Fatalf("dir = %q, want %q", got, dir)
	}
}

func TestConfigRewriteCommand(t *testing.T) {
	t.Run("no config file", func(t *testing.T) {
		a := adminDial(t, startProxy(t))
		if got := a.do("CONFIG", "REWRITE"); got != "-ERR The server is running without a config file\r\n" {
			t.Fatalf("CONFIG REWRITE: %q", got)
		}
	})
	t.Run("rewrites", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "r.conf")
		if err := os.WriteFile(path, []byte("# mine\nmaxmemory 1mb\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p := newTestProxy(t, proxySetup{opts: Options{ConfigFile: path}})
		a := adminDial(t, p)
		if got := a.do("CONFIG", "SET", "maxmemory", "5mb"); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET: %q", got)
		}
		if got := a.do("CONFIG", "REWRITE"); got != "+OK\r\n" {
			t.Fatalf("CONFIG REWRITE: %q", got)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# mine\nmaxmemory 5mb\n") {
			t.Fatalf("rewritten file:\n%s", data)
		}
		if !p.Log.Contains("CONFIG REWRITE executed with success") {
			t.Fatal("no log line for the rewrite")
		}
		// The directory gone: Redis's reply, and a warning.
		if err := os.RemoveAll(filepath.Dir(path)); err != nil {
			t.Fatal(err)
		}
		if got := a.do("CONFIG", "REWRITE"); got != "-ERR Rewriting config file: No such file or directory\r\n" {
			t.Fatalf("CONFIG REWRITE failing: %q", got)
		}
		if !p.Log.Contains("CONFIG REWRITE failed") {
			t.Fatal("no log line for the failed rewrite")
		}
	})
}

// TestConfigResetStat checks CONFIG RESETSTAT zeroes what Redis 7.0's
// resetServerStats does (INFO stats) and leaves the replication state and
// the proxy's link counters alone.
func TestConfigResetStat(t *testing.T) {
	srv, pc := startPrimary(t)
	p, xc := startProxyOf(t, srv)
	pc.MustDo(t, "SET", "k", "v")
	off := waitOffsetsEqual(t, pc, xc)
	p.stats.EvictedSnapshots.Add(1) // no eviction to provoke here: its counter stands in
	st := p.Info("stats") + p.Info("replication") + p.Info("proxy")
	fields := redistest.ParseInfo(st)
	for _, f := range []string{"total_connections_received", "total_commands_processed", "total_net_input_bytes", "total_net_repl_input_bytes", "evicted_snapshots", "upstream_connects"} {
		if fields[f] == "0" || fields[f] == "" {
			t.Fatalf("%s is %q before the reset", f, fields[f])
		}
	}
	xc.MustDo(t, "CONFIG", "RESETSTAT")
	after := redistest.ParseInfo(p.Info("stats") + p.Info("replication") + p.Info("proxy"))
	for _, f := range []string{"total_connections_received", "total_net_input_bytes", "total_net_repl_input_bytes", "evicted_snapshots", "sync_full", "rejected_connections"} {
		if after[f] != "0" {
			t.Errorf("%s = %q after CONFIG RESETSTAT, want 0", f, after[f])
		}
	}
	for _, f := range []string{"master_repl_offset", "master_replid", "master_link_status", "upstream_connects", "upstream_full_syncs"} {
		if after[f] != fields[f] {
			t.Errorf("%s changed by CONFIG RESETSTAT: %q, was %q", f, after[f], fields[f])
		}
	}
	if after["master_repl_offset"] != itoa(off) {
		t.Errorf("master_repl_offset %s, want %d", after["master_repl_offset"], off)
	}
}

// runHooked runs p (built idle) with hook as its ioHook, set before Run so
// that every change sees it, and stops it when the test ends.
func runHooked(t *testing.T, p *testProxy, hook func(what string)) {
	t.Helper()
	p.changes.ioHook = hook
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// TestConfigChangeIOUnlocked (no I/O under writeMu): at every
// point where CONFIG SET, REPLICAOF or the dir lock's release does I/O
// (a listen, a close, a stat, a flock, a TLS file read, the memory limit's
// log), writeMu, which serialises the publication of the configuration, is
// free. The changes cover every kind: port, bind onto our own address (the
// fallback that closes our listeners first), tls-port, a TLS reload, dir,
// maxmemory, and failures (a port in use, a missing certificate).
func TestConfigChangeIOUnlocked(t *testing.T) {
	pki := redistest.NewPKI(t)
	p := newTestProxy(t, proxySetup{idle: true, args: append([]string{"--repl-log-size", "0", "--port", strconv.Itoa(freePort(t))}, tlsArgs(t, pki)...),
		opts: Options{OnMaxMemory: func(int64) {}}})
	var mu sync.Mutex
	seen := map[string]int{}
	var locked []string
	runHooked(t, p, func(what string) {
		free := p.changes.writeMu.TryLock()
		if free {
			p.changes.writeMu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		seen[what]++
		if !free {
			locked = append(locked, what)
		}
	})
	a := adminDial(t, p)
	if got := a.do("PING"); got != "+PONG\r\n" { // accepted before its listener moves
		t.Fatalf("PING: %q", got)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	const ok, refused = "+OK", "-ERR CONFIG SET failed"
	for _, set := range [][3]string{
		{"port", strconv.Itoa(freePort(t)), ok},
		{"bind", "*", ok},         // overlaps 127.0.0.1 on both ports: ours closed first
		{"bind", "127.0.0.1", ok}, // and back
		{"tls-port", strconv.Itoa(freePort(t)), ok},
		{"tls-cert-file", pki.Cert, ok},
		{"dir", t.TempDir(), ok},
		{"maxmemory", "10mb", ok},
		{"port", strconv.Itoa(busy.Addr().(*net.TCPAddr).Port), refused},
		{"tls-cert-file", filepath.Join(t.TempDir(), "missing.crt"), refused},
		{"port", "0", ok}, // TLS only
	} {
		if got := a.do("CONFIG", "SET", set[0], set[1]); !strings.HasPrefix(got, set[2]) {
			t.Fatalf("CONFIG SET %s %s: %q, want %s...", set[0], set[1], got, set[2])
		}
	}
	if got := a.do("REPLICAOF", "NO", "ONE"); got != "+OK\r\n" {
		t.Fatalf("REPLICAOF NO ONE: %q", got)
	}
	p.changes.releaseDir() // as Run's end does
	mu.Lock()
	defer mu.Unlock()
	for _, what := range []string{"listen", "close listeners", "read tls", "stat dir", "lock dir", "unlock dir", "memory limit", "log"} {
		if seen[what] == 0 {
			t.Errorf("no I/O point %q was reached (seen %v)", what, seen)
		}
	}
	if len(locked) > 0 {
		t.Errorf("I/O under writeMu at %q (of %v)", locked, seen)
	}
}

// TestConfigChangeSlowIOHoldsUpNoWriter: while one CONFIG SET reads its TLS
// files, another CONFIG SET is published and answered; the first then
// applies its change on top of the second's, and both are in force.
func TestConfigChangeSlowIOHoldsUpNoWriter(t *testing.T) {
	pki := redistest.NewPKI(t)
	p := newTestProxy(t, proxySetup{idle: true, args: append([]string{"--port", strconv.Itoa(freePort(t))}, tlsArgs(t, pki)...)})
	reading := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	runHooked(t, p, func(what string) {
		if what != "read tls" {
			return
		}
		once.Do(func() {
			close(reading)
			select {
			case <-release:
			case <-time.After(5 * time.Second):
				t.Error("CONFIG SET maxmemory was held up for 5s by another change's TLS file reads")
			}
		})
	})
	slow := redistest.Dial(t, p.AddrString())
	fast := redistest.Dial(t, p.AddrString())
	slowErr := make(chan error, 1)
	go func() {
		_, err := slow.Do("CONFIG", "SET", "tls-auth-clients", "optional")
		slowErr <- err
	}()
	select {
	case <-reading:
	case err := <-slowErr:
		t.Fatalf("CONFIG SET tls-auth-clients read no TLS file: %v", err)
	}
	if _, err := fast.Do("CONFIG", "SET", "maxmemory", "7mb"); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-slowErr; err != nil {
		t.Fatal(err)
	}
	cfg := p.config()
	if cfg.MaxMemory != 7<<20 || cfg.TLSAuthClients != config.TLSAuthOptional {
		t.Fatalf("maxmemory %d, tls-auth-clients %v: a change was lost", cfg.MaxMemory, cfg.TLSAuthClients)
	}
}

// distinctPorts returns n TCP ports nothing listens on right now, all
// different.
func distinctPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// TestConfigSetConcurrent: writers of different directives (and of port,
// tls-port, bind and dir, whose changes open sockets and take locks) run
// concurrently, each on its own connection; every CONFIG SET is answered
// OK, the last value of each is in force (no change lost), its effects are
// the last value's (the memory limit, the log level, the backlog size), the
// listeners are those the final configuration names and no other is left
// open, and dir's lock is held on the final dir alone. Then several writers
// set port and dir to the same new value at once: each succeeds.
func TestConfigSetConcurrent(t *testing.T) {
	pki := redistest.NewPKI(t)
	var memLimit atomic.Int64
	p := newTestProxy(t, proxySetup{args: append([]string{"--repl-log-size", "0", "--port", strconv.Itoa(freePort(t))}, tlsArgs(t, pki)...),
		opts: Options{OnMaxMemory: func(n int64) { memLimit.Store(n) }}})
	const rounds = 6
	ports := distinctPorts(t, 2*rounds)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	var plainPorts, tlsPorts, dirValues []string
	for i := range rounds {
		plainPorts = append(plainPorts, strconv.Itoa(ports[i]))
		tlsPorts = append(tlsPorts, strconv.Itoa(ports[rounds+i]))
		dirValues = append(dirValues, dirs[i%len(dirs)])
	}
	plainPorts[rounds-2] = "0" // TLS only for a while
	writers := [][]string{
		append([]string{"port"}, plainPorts...),
		append([]string{"tls-port"}, tlsPorts...),
		{"bind", "*", "127.0.0.1 -::1", "*", "127.0.0.1", "* -::1", "127.0.0.1"},
		append([]string{"dir"}, dirValues...),
		{"tls-cert-file", pki.Cert, pki.Cert, pki.Cert, pki.Cert},
		{"maxmemory", "1048576", "2097152", "3145728", "4194304", "5242880"},
		{"repl-backlog-size", "2097152", "3145728", "4194304", "5242880"},
		{"loglevel", "notice", "warning", "verbose", "notice"},
		{"maxclients", "100", "200", "300", "400"},
		{"repl-timeout", "30", "40", "50"},
	}
	// Every connection is made, and accepted (a connection still in the
	// backlog of a listener that closes is reset), first: the listeners
	// move from the first CONFIG SET on.
	conns := make([]*redistest.Client, len(writers)+1)
	for i := range conns {
		conns[i] = redistest.Dial(t, p.AddrString())
		conns[i].MustDo(t, "PING")
	}
	a, rc := conns[0], conns[len(writers)]
	var wg sync.WaitGroup
	for i, w := range writers {
		c := conns[i]
		wg.Go(func() {
			for _, v := range w[1:] {
				if _, err := c.Do("CONFIG", "SET", w[0], v); err != nil {
					t.Errorf("CONFIG SET %s %s: %v", w[0], v, err)
				}
			}
		})
	}
	wg.Go(func() {
		for _, target := range [][]any{{"127.0.0.1", 1}, {"NO", "ONE"}, {"127.0.0.1", 2}, {"NO", "ONE"}} {
			if _, err := rc.Do("REPLICAOF", target[0], target[1]); err != nil {
				t.Errorf("REPLICAOF %v: %v", target, err)
			}
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}

	for _, w := range writers {
		want := w[len(w)-1]
		if got := a.MustDo(t, "CONFIG", "GET", w[0]).Array()[1].String(); got != want {
			t.Errorf("%s is %q, want %q, the last value set", w[0], got, want)
		}
	}
	cfg := p.config()
	if cfg.MasterHost != "" {
		t.Errorf("replicaof %s %d, want none, the last REPLICAOF", cfg.MasterHost, cfg.MasterPort)
	}
	if got := memLimit.Load(); got != cfg.MaxMemory {
		t.Errorf("memory limit applied last %d, want maxmemory %d", got, cfg.MaxMemory)
	}
	if got, want := p.log.GetLevel(), HCLogLevel(cfg.LogLevel); got != want {
		t.Errorf("log level %v, want %v", got, want)
	}
	if got := p.hist.Stream().BacklogSize(); got != cfg.ReplBacklogSize {
		t.Errorf("backlog size %d, want %d", got, cfg.ReplBacklogSize)
	}
	checkListeners(t, p, ports)
	checkDirLock(t, cfg.Dir, dirs)
	if !pingAt(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port))) {
		t.Error("no answer on the final port")
	}
	if reply, err := tlsPing(net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.TLSPort)), pki.ClientConfig()); err != nil || reply != "+PONG" {
		t.Errorf("no TLS answer on the final tls-port: %q, %v", reply, err)
	}

	// The same new port and dir, asked for by several writers at once:
	// none is refused for what a sibling holds.
	same := distinctPorts(t, 1)
	dir := t.TempDir()
	for _, set := range [][]string{{"port", strconv.Itoa(same[0])}, {"dir", dir}, {"bind", "*"}} {
		for _, c := range conns[:4] {
			wg.Go(func() {
				if _, err := c.Do("CONFIG", "SET", set[0], set[1]); err != nil {
					t.Errorf("CONFIG SET %s %s alongside others setting the same: %v", set[0], set[1], err)
				}
			})
		}
		wg.Wait()
	}
	a.MustDo(t, "CONFIG", "SET", "bind", "127.0.0.1")
	checkListeners(t, p, append(ports, same...))
	checkDirLock(t, dir, append(dirs, cfg.Dir))
}

// checkListeners checks that p's listeners are those its configuration
// names, one plain and one TLS on 127.0.0.1, and that no other port of
// ports is listened on any more.
func checkListeners(t *testing.T, p *testProxy, ports []int) {
	t.Helper()
	cfg := p.config()
	var want []string
	if cfg.Port != 0 {
		want = append(want, fmt.Sprintf("plain 127.0.0.1:%d", cfg.Port))
	}
	if cfg.TLSPort != 0 {
		want = append(want, fmt.Sprintf("tls 127.0.0.1:%d", cfg.TLSPort))
	}
	var got []string
	for _, b := range p.listeners.inUse() {
		kind := "plain"
		if b.TLS {
			kind = "tls"
		}
		got = append(got, kind+" "+b.Ln.Addr().String())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("listeners %v, want %v (bind %v)", got, want, cfg.Bind)
	}
	for _, port := range ports {
		if port == cfg.Port || port == cfg.TLSPort {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Errorf("port %d, no longer configured, is still listened on: %v", port, err)
			continue
		}
		ln.Close()
	}
}

// checkDirLock checks that dir's lock is held (by the proxy) and that no
// dir of others is locked any more.
func checkDirLock(t *testing.T, dir string, others []string) {
	t.Helper()
	if l, err := streamlog.LockDir(dir); !errors.Is(err, streamlog.ErrDirLocked) {
		if l != nil {
			l.Close()
		}
		t.Errorf("the final dir's lock: %v, want held", err)
	}
	for _, o := range others {
		if o == dir {
			continue
		}
		l, err := streamlog.LockDir(o)
		if err != nil {
			t.Errorf("dir %s, no longer configured, is still locked: %v", o, err)
			continue
		}
		l.Close()
	}
}

package proxy

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
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

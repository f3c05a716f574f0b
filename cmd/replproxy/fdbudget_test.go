package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// raiseOwnFileLimit raises the test process's soft open file limit to n (or
// its hard limit), for the connections a test opens itself; it is restored
// at the end.
func raiseOwnFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	old := lim
	lim.Cur = min(n, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	if lim.Cur < n {
		t.Fatalf("the test needs %d descriptors, its hard limit is %d", n, lim.Max)
	}
}

// procFDs counts the open descriptors of process pid.
func procFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatalf("count descriptors of %d: %v", pid, err)
	}
	return len(ents)
}

// TestFDBudgetUnderSiege: the real binary under ulimit -n 256 with
// maxclients 200, a real primary, the stream log on, metrics-port and
// tls-port: 1,000 idle monitoring connections, 300
// silent TLS connections and 300 plain clients at once (150 that connect
// first and stay, 150 past the limit once the TLS handshakes fill it).
// Meanwhile PING answers within 1 s on a connected client, every new
// connection on the RESP port is answered within 1 s (PONG, or Redis's
// maxclients error: either way the process had a descriptor to accept it
// with), the stream log keeps writing and syncing, and a new real replica
// full-syncs (in the slots the TLS handshakes give back at their timeout)
// to the primary's digest.
func TestFDBudgetUnderSiege(t *testing.T) {
	redistest.Require(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("no sh to set the limit with")
	}
	raiseOwnFileLimit(t, 4096)
	ctx := context.Background()
	dir := t.TempDir()
	xPort, tPort, mPort := redistest.FreePort(t), redistest.FreePort(t), redistest.FreePort(t)
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()
	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2})
	defer pc.Close()
	redistest.WaitFor(t, 10*time.Second, "the primary up", func() bool { return pc.Ping(ctx).Err() == nil })
	if err := pc.Do(ctx, "DEBUG", "POPULATE", 20000, "key", 100).Err(); err != nil {
		t.Fatal(err)
	}

	pki := redistest.NewPKI(t)
	cert, key := pki.Cert, pki.Key
	proxyDir := filepath.Join(dir, "proxy")
	os.MkdirAll(proxyDir, 0o755)
	logfile := filepath.Join(dir, "replproxy.log")
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, os.Args[0],
		"--port", itoa(xPort), "--bind", "127.0.0.1", "--replicaof", "127.0.0.1", itoa(pPort),
		"--maxclients", "200", "--metrics-port", itoa(mPort), "--tls-port", itoa(tPort),
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no",
		"--dir", proxyDir, "--logfile", logfile)
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	checkJSONLog(t, logfile)
	redistest.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("proxy log:\n%s", b)
		}
	})
	xAddr := net.JoinHostPort("127.0.0.1", itoa(xPort))
	// One connection, kept: the client the siege must not silence.
	xc := redis.NewClient(&redis.Options{Addr: xAddr, Protocol: 2, PoolSize: 1, MaxRetries: -1})
	defer xc.Close()
	redistest.WaitFor(t, 30*time.Second, "the proxy's link up", func() bool { return infoField(xc, "master_link_status") == "up" })
	if got := infoField(xc, "maxclients"); got != "200" {
		t.Fatalf("maxclients %s under ulimit -n 256, want 200 (200 + the reserve fit)", got)
	}
	pid := cmd.Process.Pid // sh execs the proxy: the same process
	base := procFDs(t, pid)

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	dial := func(port int) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(port)), 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v (proxy holding %d descriptors)", port, err, procFDs(t, pid))
		}
		held = append(held, c)
		return c
	}
	// ping sends PING on c and returns the first line of the answer, which
	// must come within 1s.
	ping := func(c net.Conn) string {
		t.Helper()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("PING\r\n"))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to PING within 1s: %v (proxy holding %d descriptors)", err, procFDs(t, pid))
		}
		c.SetDeadline(time.Time{})
		return line
	}
	for i := range 150 {
		if got := ping(dial(xPort)); got != "+PONG\r\n" {
			t.Fatalf("plain client %d: %q", i, got)
		}
	}
	for range 1000 {
		dial(mPort).Write([]byte("GET /healthz HTTP/1.1\r\nHost: replproxy\r\n\r\n"))
	}
	for range 300 {
		dial(tPort)
	}
	// The accept loops take the connections in their own time: the TLS
	// handshakes hold the remaining 49 slots once they are all taken.
	clients := ""
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("connected_clients %s, want 200; the proxy holds %d descriptors", clients, procFDs(t, pid))
			}
		}()
		redistest.WaitFor(t, 10*time.Second, "connected_clients 200 with 150 clients and 300 TLS handshakes", func() bool {
			clients = infoField(xc, "connected_clients")
			return clients == "200"
		})
	}()
	refused := 0
	for i := range 150 {
		switch got := ping(dial(xPort)); got {
		case "-ERR max number of clients reached\r\n":
			refused++
		case "+PONG\r\n":
		default:
			t.Fatalf("plain client %d past the limit: %q", 150+i, got)
		}
	}
	peak := procFDs(t, pid)
	if peak > 200+reservedFDs {
		t.Errorf("the proxy holds %d descriptors under siege, past its budget of maxclients + %d", peak, reservedFDs)
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	err := xc.Ping(pctx).Err()
	cancel()
	if err != nil {
		t.Fatalf("PING on a connected client under siege: %v after %v", err, time.Since(start))
	}
	t.Logf("under siege: the proxy holds %d descriptors (%d before), %d of 150 late plain clients refused, PING in %v",
		peak, base, refused, time.Since(start))

	// The stream log writes and syncs what the primary sends meanwhile.
	logged := infoInt(t, xc, "repl_log_synced_offset")
	for i := range 200 {
		if err := pc.Set(ctx, "siege:"+itoa(i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	want := infoInt(t, pc, "master_repl_offset")
	redistest.WaitFor(t, 10*time.Second, "the stream log synced to the primary's offset", func() bool {
		return infoInt(t, xc, "repl_log_synced_offset") >= want
	})
	if got := infoInt(t, xc, "repl_log_errors"); got != 0 || infoField(xc, "repl_log_status") != "ok" {
		t.Fatalf("stream log under siege: status %s, %d errors (%s)", infoField(xc, "repl_log_status"), got, infoField(xc, "repl_log_last_error"))
	}
	if infoInt(t, xc, "repl_log_synced_offset") <= logged {
		t.Fatalf("the stream log did not advance from %d", logged)
	}

	// A new replica, while the siege holds: it gets a slot when the silent
	// TLS handshakes time out, and full-syncs.
	rPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(xPort)).Port()
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(rPort)), Protocol: 2})
	defer rc.Close()
	redistest.WaitFor(t, 60*time.Second, "the new replica in sync", func() bool {
		// The primary's own PINGs move its offset on: compare with it now.
		return replInfo(rc, "master_link_status") == "up" && replInfo(rc, "master_repl_offset") == replInfo(pc, "master_repl_offset")
	})
	pd, err := pc.Do(ctx, "DEBUG", "DIGEST").Text()
	if err != nil {
		t.Fatal(err)
	}
	rd, err := rc.Do(ctx, "DEBUG", "DIGEST").Text()
	if err != nil {
		t.Fatal(err)
	}
	if pd != rd {
		t.Fatalf("replica digest %s, primary %s", rd, pd)
	}
	if got := infoInt(t, xc, "sync_full"); got != 1 {
		t.Errorf("proxy sync_full %d, want 1 (the new replica)", got)
	}
	t.Logf("the new replica full-synced under siege; the proxy holds %d descriptors", procFDs(t, pid))
}

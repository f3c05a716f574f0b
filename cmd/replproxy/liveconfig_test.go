package main

import (
	"context"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// infoField returns one field of INFO (all sections), "" on error: the
// waits below poll it while the proxy restarts.
func infoField(c *redis.Client, field string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "everything").Result()
	if err != nil {
		return ""
	}
	return redistest.ParseInfo(info)[field]
}

func infoInt(t *testing.T, c *redis.Client, field string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(infoField(c, field), 10, 64)
	if err != nil {
		t.Fatalf("INFO %s: %v", field, err)
	}
	return n
}

// digestsEqual fails the test unless every replica's DEBUG DIGEST is the
// primary's.
func digestsEqual(t *testing.T, primary *redis.Client, replicas []*redis.Client) {
	t.Helper()
	digest := func(c *redis.Client) string {
		s, err := c.Do(context.Background(), "DEBUG", "DIGEST").Text()
		if err != nil {
			t.Fatalf("DEBUG DIGEST: %v", err)
		}
		return s
	}
	want := digest(primary)
	for i, rc := range replicas {
		if got := digest(rc); got != want {
			t.Errorf("replica %d digest %s, primary %s", i, got, want)
		}
	}
}

// TestLiveConfig runs the real binary between real Redis
// servers: CONFIG SET of repl-backlog-size, client-output-buffer-limit,
// maxmemory and loglevel each change what the proxy does at once, and
// CONFIG REWRITE writes a file (from one with comments, plus command-line
// overrides and tls-* values) from which the restarted binary has the same
// CONFIG GET *.
func TestLiveConfig(t *testing.T) {
	redistest.Require(t)
	ctx := context.Background()
	dir := t.TempDir()
	xPort := redistest.FreePort(t)
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()

	conf := filepath.Join(dir, "replproxy.conf")
	logfile := filepath.Join(dir, "replproxy.log")
	original := "# replproxy under test\n\n# the network\nport 6399\nbind 127.0.0.1\n\n" +
		"# limits\nmaxclients 900\nmaxclients 800\nrepl-backlog-size 16kb\n"
	if err := os.WriteFile(conf, []byte(original), 0o600); err != nil {
		t.Fatal(err)
	}
	checkJSONLog(t, logfile) // both runs append to it
	startProxy := func(args ...string) (*exec.Cmd, <-chan error) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
		return cmd, redistest.StartProcess(t, cmd)
	}
	proxyCmd, exited := startProxy(conf, "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
		"--logfile", logfile, "--dir", dir)
	replica := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(xPort))
	rPort := replica.Port()

	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2})
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(rPort)), Protocol: 2})
	xc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(xPort)), Protocol: 2})
	defer pc.Close()
	defer rc.Close()
	defer xc.Close()
	inSync := func() bool {
		return replInfo(rc, "master_link_status") == "up" &&
			replInfo(rc, "master_repl_offset") == replInfo(pc, "master_repl_offset")
	}
	redistest.WaitFor(t, 20*time.Second, "the replica in sync through the proxy", inSync)
	configSet := func(name, value string) {
		t.Helper()
		if err := xc.ConfigSet(ctx, name, value).Err(); err != nil {
			t.Fatalf("CONFIG SET %s %s: %v", name, value, err)
		}
	}
	write := func(key string, size int) {
		t.Helper()
		if err := pc.Set(ctx, key, strings.Repeat("x", size), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	// repl-backlog-size: the history a partial resync can cover follows it.
	write("a", 256<<10)
	redistest.WaitFor(t, 10*time.Second, "the write through", inSync)
	// The stream log's follower pins what it has not yet written, as a
	// replica does: the backlog is trimmed once it has.
	redistest.WaitFor(t, 10*time.Second, "repl_backlog_histlen within a 16kb backlog", func() bool {
		return infoInt(t, xc, "repl_backlog_histlen") <= 64<<10
	})
	configSet("repl-backlog-size", "8mb")
	if got := infoInt(t, xc, "repl_backlog_size"); got != 8<<20 {
		t.Fatalf("repl_backlog_size %d, want %d", got, 8<<20)
	}
	for i := range 4 {
		write("b"+itoa(i), 1<<20)
	}
	redistest.WaitFor(t, 10*time.Second, "the writes through", inSync)
	if got := infoInt(t, xc, "repl_backlog_histlen"); got < 4<<20 {
		t.Fatalf("repl_backlog_histlen %d after 4 MiB with an 8mb backlog", got)
	}

	// client-output-buffer-limit: a stalled replica outlives 64 MiB under
	// the default limit (256 MiB), and is cut once the limit is lowered
	// (1mb, raised to the 8 MiB backlog). 64 MiB is more than the sockets
	// can take in for a stopped replica: with tcp_rmem's maximum at 32 MiB
	// (as on some kernels) its receive buffer grows that far, and 32 MiB
	// then left nothing pending in the proxy to be judged by.
	replica.Pause()
	for i := range 16 {
		write("c"+itoa(i), 4<<20)
	}
	want := replInfo(pc, "master_repl_offset")
	redistest.WaitFor(t, 10*time.Second, "the proxy at the primary's offset", func() bool {
		return replInfo(xc, "master_repl_offset") == want
	})
	if got := infoInt(t, xc, "replicas_closed_output_hard_limit"); got != 0 {
		t.Fatalf("replicas_closed_output_hard_limit %d under the default limit", got)
	}
	configSet("client-output-buffer-limit", "replica 1mb 0 0")
	defer func() {
		if t.Failed() {
			info, _ := xc.Info(ctx, "everything").Result()
			t.Log(info)
		}
	}()
	redistest.WaitFor(t, 10*time.Second, "the stalled replica disconnected by the lowered limit", func() bool {
		return infoField(xc, "replicas_closed_output_hard_limit") == "1" && infoField(xc, "connected_slaves") == "0"
	})
	configSet("client-output-buffer-limit", "replica 512mb 128mb 60")
	replica.Resume()
	redistest.WaitFor(t, 20*time.Second, "the replica back in sync", inSync)

	// maxmemory below what the proxy holds: over the limit at once; back.
	configSet("maxmemory", "1")
	redistest.WaitFor(t, 5*time.Second, "mem_over_maxmemory 1", func() bool { return infoField(xc, "mem_over_maxmemory") == "1" })
	configSet("maxmemory", "1gb")
	redistest.WaitFor(t, 5*time.Second, "mem_over_maxmemory 0", func() bool { return infoField(xc, "mem_over_maxmemory") == "0" })

	// loglevel: a client's close is a debug line; a rewrite's success is a
	// notice line.
	logCount := func(s string) int {
		data, _ := os.ReadFile(logfile)
		return strings.Count(string(data), s)
	}
	pingClose := func() {
		c := redis.NewClient(&redis.Options{Addr: xc.Options().Addr, Protocol: 2})
		c.Ping(ctx)
		c.Close()
	}
	clients := infoField(xc, "connected_clients")
	pingClose()
	redistest.WaitFor(t, 5*time.Second, "the client's close seen by the proxy", func() bool { return infoField(xc, "connected_clients") == clients })
	if n := logCount("client closed"); n != 0 {
		t.Fatalf("%d debug lines at loglevel notice", n)
	}
	configSet("loglevel", "debug")
	pingClose()
	redistest.WaitFor(t, 5*time.Second, "a debug line at loglevel debug", func() bool { return logCount("client closed") > 0 })
	configSet("loglevel", "warning")
	if err := xc.ConfigRewrite(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := logCount("CONFIG REWRITE executed"); n != 0 {
		t.Fatalf("a notice line at loglevel warning")
	}
	configSet("loglevel", "notice")
	if err := xc.ConfigRewrite(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := logCount("CONFIG REWRITE executed"); n != 1 {
		t.Fatalf("%d notice lines for one rewrite at loglevel notice", n)
	}

	// CONFIG REWRITE, then a restart from the file alone.
	configSet("maxclients", "500")
	configSet("repl-timeout", "33")
	// tls-* directives are written too (no TLS in use here: no material is
	// loaded, the values are kept for when it is).
	configSet("tls-ciphers", "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256")
	configSet("tls-auth-clients", "optional")
	if err := xc.ConfigRewrite(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before2, err := xc.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	t.Logf("rewritten file:\n%s", text)
	for _, s := range []string{"# replproxy under test\n", "# the network\nport " + itoa(xPort) + "\n", "# limits\nmaxclients 500\n\nrepl-backlog-size 8mb\n",
		"# Generated by CONFIG REWRITE\n", "replicaof 127.0.0.1 " + itoa(pPort) + "\n",
		"tls-auth-clients optional\n", "tls-ciphers \"ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256\"\n"} {
		if !strings.Contains(text, s) {
			t.Errorf("rewritten file lacks %q", s)
		}
	}
	if fi, err := os.Stat(conf); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("rewritten file mode: %v %v", fi.Mode(), err)
	}
	proxyCmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the proxy exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy did not stop")
	}
	startProxy(conf)
	redistest.WaitFor(t, 10*time.Second, "the restarted proxy", func() bool { return xc.Ping(ctx).Err() == nil })
	after, err := xc.ConfigGet(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before2, after) {
		t.Fatalf("CONFIG GET * after the restart:\n got %v\nwant %v", after, before2)
	}
	redistest.WaitFor(t, 20*time.Second, "the replica in sync through the restarted proxy", inSync)
}

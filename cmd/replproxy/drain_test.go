package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// needRedis returns redis-server's path, or skips the test as the proxy's
// integration tests do: REDISTEST=skip skips, and a missing redis-server fails
// under CI=true.
func needRedis(t *testing.T) string {
	t.Helper()
	if os.Getenv("REDISTEST") == "skip" {
		t.Skip("REDISTEST=skip")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server not found in PATH and CI=true")
		}
		t.Skip("redis-server not found in PATH")
	}
	return bin
}

// freePort returns a TCP port free now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startProcess starts cmd in its own process group and returns the channel
// its exit arrives on; the group is killed when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd) <-chan error {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	return exited
}

// waitUntil polls cond every 20 ms for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// replInfo returns one field of INFO replication, "" on error.
func replInfo(c *redis.Client, field string) string { return infoField(c, field) }

// redisArgsIn returns a function giving a test redis-server's arguments:
// port, a working dir named sub under dir, no persistence, immediate
// diskless syncs, DEBUG allowed, then extra.
func redisArgsIn(dir string) func(port int, sub string, extra ...string) []string {
	return func(port int, sub string, extra ...string) []string {
		d := filepath.Join(dir, sub)
		os.MkdirAll(d, 0o755)
		return append([]string{"--port", itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", d, "--repl-diskless-sync-delay", "0", "--enable-debug-command", "yes"}, extra...)
	}
}

// TestSIGTERMDrainsReplicas runs primary → replproxy (the real main, in a
// child process) → replica; freezes the replica, writes to the primary, and
// sends the proxy SIGTERM. The proxy stops accepting but stays up while the
// replica is behind; once the replica resumes it receives the whole stream
// (its offset equals the primary's) and the proxy exits 0.
func TestSIGTERMDrainsReplicas(t *testing.T) {
	redisBin := needRedis(t)
	dir := t.TempDir()
	redisArgs := redisArgsIn(dir)
	pPort, xPort, rPort := freePort(t), freePort(t), freePort(t)
	startProcess(t, exec.Command(redisBin, redisArgs(pPort, "primary")...))
	proxyCmd := exec.Command(os.Args[0], "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
		"--shutdown-timeout", "30", "--dir", filepath.Join(dir), "--logfile", filepath.Join(dir, "replproxy.log"))
	proxyCmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	exited := startProcess(t, proxyCmd)
	replica := exec.Command(redisBin, redisArgs(rPort, "replica", "--replicaof", "127.0.0.1", itoa(xPort))...)
	startProcess(t, replica)

	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2})
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(rPort)), Protocol: 2})
	defer pc.Close()
	defer rc.Close()
	waitUntil(t, 20*time.Second, "the replica in sync through the proxy", func() bool {
		return replInfo(rc, "master_link_status") == "up" &&
			replInfo(rc, "master_repl_offset") == replInfo(pc, "master_repl_offset")
	})

	syscall.Kill(-replica.Process.Pid, syscall.SIGSTOP)
	if err := pc.Set(context.Background(), "big", strings.Repeat("x", 4<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	want := replInfo(pc, "master_repl_offset")
	xc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(xPort)), Protocol: 2, MaxRetries: -1})
	waitUntil(t, 10*time.Second, "the proxy at the primary's offset", func() bool {
		return replInfo(xc, "master_repl_offset") == want
	})
	xc.Close()

	proxyCmd.Process.Signal(syscall.SIGTERM)
	waitUntil(t, 5*time.Second, "the proxy to stop accepting", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(xPort)), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-exited:
		t.Fatalf("the proxy exited (%v) while its replica was behind", err)
	case <-time.After(300 * time.Millisecond):
	}
	syscall.Kill(-replica.Process.Pid, syscall.SIGCONT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the proxy exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy still running 20s after its replica resumed")
	}
	if got := replInfo(rc, "master_repl_offset"); got != want {
		t.Errorf("the replica's offset after the proxy stopped is %s, want the primary's %s", got, want)
	}
}

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

	"github.com/replproxy/replproxy/internal/redistest"
)

// replInfo returns one field of INFO replication, "" on error.
func replInfo(c *redis.Client, field string) string { return infoField(c, field) }

// TestSIGTERMDrainsReplicas runs primary → replproxy (the real main, in a
// child process) → replica; freezes the replica, writes to the primary, and
// sends the proxy SIGTERM. The proxy stops accepting but stays up while the
// replica is behind; once the replica resumes it receives the whole stream
// (its offset equals the primary's) and the proxy exits 0.
func TestSIGTERMDrainsReplicas(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	xPort := redistest.FreePort(t)
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()
	proxyCmd := exec.Command(os.Args[0], "--port", itoa(xPort), "--replicaof", "127.0.0.1", itoa(pPort),
		"--shutdown-timeout", "30", "--dir", filepath.Join(dir), "--logfile", filepath.Join(dir, "replproxy.log"))
	proxyCmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	checkJSONLog(t, filepath.Join(dir, "replproxy.log"))
	exited := redistest.StartProcess(t, proxyCmd)
	replica := redistest.StartServer(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", itoa(xPort))
	rPort := replica.Port()

	pc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(pPort)), Protocol: 2})
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(rPort)), Protocol: 2})
	defer pc.Close()
	defer rc.Close()
	redistest.WaitFor(t, 20*time.Second, "the replica in sync through the proxy", func() bool {
		return replInfo(rc, "master_link_status") == "up" &&
			replInfo(rc, "master_repl_offset") == replInfo(pc, "master_repl_offset")
	})

	replica.Pause()
	if err := pc.Set(context.Background(), "big", strings.Repeat("x", 4<<20), 0).Err(); err != nil {
		t.Fatal(err)
	}
	want := replInfo(pc, "master_repl_offset")
	xc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", itoa(xPort)), Protocol: 2, MaxRetries: -1})
	redistest.WaitFor(t, 10*time.Second, "the proxy at the primary's offset", func() bool {
		return replInfo(xc, "master_repl_offset") == want
	})
	xc.Close()

	proxyCmd.Process.Signal(syscall.SIGTERM)
	redistest.WaitFor(t, 5*time.Second, "the proxy to stop accepting", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(xPort)), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	// The proxy says it waits for its replica: it must then still be
	// running, with the replica still stopped and behind.
	redistest.WaitFor(t, 5*time.Second, "the proxy's log saying it waits for its replicas", func() bool {
		log, _ := os.ReadFile(filepath.Join(dir, "replproxy.log"))
		return strings.Contains(string(log), "waiting for the replicas to receive the stream")
	})
	select {
	case err := <-exited:
		t.Fatalf("the proxy exited (%v) while its replica was behind", err)
	default:
	}
	replica.Resume()
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

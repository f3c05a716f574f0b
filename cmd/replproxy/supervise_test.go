package main

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// notifySocket is a fake systemd: a unixgram socket in a temporary dir that
// collects what the proxy sends to NOTIFY_SOCKET.
func notifySocket(t *testing.T) (path string, conn *net.UnixConn) {
	t.Helper()
	// A short path: sun_path holds 108 bytes, and t.TempDir's may be long.
	dir, err := os.MkdirTemp("", "notify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path = filepath.Join(dir, "notify.sock")
	conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return path, conn
}

// nextNotify returns the next datagram, or "" when none arrives within wait.
func nextNotify(t *testing.T, conn *net.UnixConn, wait time.Duration) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return ""
		}
		t.Fatalf("notify socket: %v", err)
	}
	t.Logf("notify: %q", buf[:n])
	return string(buf[:n])
}

// ping sends PING on a new connection to addr and returns the reply line.
func ping(addr string) string {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	conn.Write([]byte("PING\r\n"))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return line
}

// startSupervised starts replproxy with supervised mode and NOTIFY_SOCKET
// socket ("" leaves it unset) and more args.
func startSupervised(t *testing.T, mode, socket string, args ...string) (addr string, cmd *exec.Cmd, exited <-chan error) {
	t.Helper()
	dir := t.TempDir()
	port := redistest.FreePort(t)
	logfile := filepath.Join(dir, "replproxy.log")
	cmd = exec.Command(os.Args[0], append([]string{"--port", itoa(port), "--supervised", mode,
		"--dir", dir, "--logfile", logfile}, args...)...)
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	if socket != "" {
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+socket)
	}
	checkJSONLog(t, logfile)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("proxy log:\n%s", b)
		}
	})
	return net.JoinHostPort("127.0.0.1", itoa(port)), cmd, redistest.StartProcess(t, cmd)
}

// stop sends SIGTERM and waits for a clean exit.
func stop(t *testing.T, cmd *exec.Cmd, exited <-chan error) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	waitCleanExit(t, exited)
}

// waitCleanExit waits for the process signalled with SIGTERM to exit with 0.
func waitCleanExit(t *testing.T, exited <-chan error) {
	t.Helper()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("replproxy exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("replproxy still running 20s after SIGTERM")
	}
}

// TestSupervisedSystemd: under supervised systemd
// (and auto, with NOTIFY_SOCKET set) the first message is READY=1, and
// when it arrives the proxy already answers; a STATUS= follows the link to
// the primary coming up; STOPPING=1 comes on SIGTERM, before the exit.
func TestSupervisedSystemd(t *testing.T) {
	redistest.Require(t)
	pPort := redistest.StartServer(t, "--repl-diskless-sync-delay", "0").Port()
	for _, mode := range []string{"systemd", "auto"} {
		t.Run(mode, func(t *testing.T) {
			socket, conn := notifySocket(t)
			addr, cmd, exited := startSupervised(t, mode, socket, "--replicaof", "127.0.0.1", itoa(pPort))
			first := nextNotify(t, conn, 20*time.Second)
			// Asked at once, on the first message: the proxy serves by then.
			if got := ping(addr); got != "+PONG\r\n" {
				t.Fatalf("PING right after %q: %q", first, got)
			}
			if !strings.HasPrefix(first, "READY=1\n") || !strings.Contains(first, "\nSTATUS=") {
				t.Fatalf("first message %q, want READY=1 with a STATUS", first)
			}
			status := first
			redistest.WaitFor(t, 20*time.Second, "a STATUS saying the link to the primary is up", func() bool {
				if strings.Contains(status, "upstream link up") {
					return true
				}
				if m := nextNotify(t, conn, time.Second); m != "" {
					if strings.Contains(m, "READY=1") || strings.Contains(m, "STOPPING=1") {
						t.Fatalf("unexpected %q while running", m)
					}
					status = m
				}
				return false
			})
			cmd.Process.Signal(syscall.SIGTERM)
			redistest.WaitFor(t, 20*time.Second, "STOPPING=1 after SIGTERM", func() bool {
				return strings.HasPrefix(nextNotify(t, conn, time.Second), "STOPPING=1")
			})
			waitCleanExit(t, exited)
		})
	}
}

// TestSupervisedNo: supervised no sends nothing to NOTIFY_SOCKET, nor does
// auto without one, nor systemd without one (which warns).
func TestSupervisedNo(t *testing.T) {
	socket, conn := notifySocket(t)
	addr, cmd, exited := startSupervised(t, "no", socket)
	redistest.WaitFor(t, 10*time.Second, "replproxy answering PING", func() bool { return ping(addr) == "+PONG\r\n" })
	stop(t, cmd, exited)
	// The process has exited: anything it sent is queued on the socket.
	if m := nextNotify(t, conn, 100*time.Millisecond); m != "" {
		t.Fatalf("supervised no sent %q", m)
	}

	for _, mode := range []string{"auto", "systemd"} {
		addr, cmd, exited := startSupervised(t, mode, "")
		redistest.WaitFor(t, 10*time.Second, "replproxy answering PING", func() bool { return ping(addr) == "+PONG\r\n" })
		stop(t, cmd, exited)
	}
}

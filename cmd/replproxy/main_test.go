package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy"
	"github.com/replproxy/replproxy/proxy/config"
)

// TestMain lets the test binary act as replproxy itself, so that the signal
// test runs the real main in a child process. Every such proxy logs JSON
// (the directive goes last, so it wins), which the tests check line by
// line against the table of log fields in docs/logs.md (checkJSONLog).
func TestMain(m *testing.M) {
	if os.Getenv("REPLPROXY_RUN_MAIN") == "1" {
		if code, done := usage(os.Args[1:], os.Stdout); done {
			os.Exit(code)
		}
		os.Exit(run(append(os.Args[1:], "--log-format", "json"), os.Stderr))
	}
	os.Exit(m.Run())
}

func TestBadConfigFailsBeforeStart(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "replproxy.conf")
	os.WriteFile(conf, []byte("port 0\n# a comment\nrepl-backlog-size 12zz\n"), 0o644)
	web := filepath.Join(dir, "web-config.yml")
	os.WriteFile(web, []byte("basic_auth_users:\n  prometheus: hunter2\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown directive", []string{"--port", "0", "--bogus", "x"}, []string{"bogus"}},
		{"bad size", []string{"--repl-backlog-size", "lots"}, []string{"repl-backlog-size"}},
		{"bad value in file", []string{conf}, []string{"repl-backlog-size", conf + ":3"}},
		{"missing file", []string{filepath.Join(dir, "nope.conf")}, []string{"nope.conf"}},
		{"replicaof without port", []string{"--replicaof", "127.0.0.1"}, []string{"replicaof"}},
		// Read by the server at start: the error names the directive, the
		// file and the problem, and not the password written as a hash.
		{"bad metrics-web-config", []string{"--port", "0", "--dir", dir, "--metrics-port", strconv.Itoa(redistest.FreePort(t)), "--metrics-web-config", web},
			[]string{"metrics-web-config", web, `user \"prometheus\": the password is not a bcrypt hash`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code == 0 {
				t.Fatalf("exit code 0 for %v", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("error output %q does not name %q", stderr.String(), w)
				}
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("error output %q quotes a password", stderr.String())
			}
		})
	}
}

// TestSignalStopsCleanly runs replproxy as a child process with a config file
// and command-line overrides, checks it answers PING, sends SIGTERM and
// expects a clean exit.
func TestSignalStopsCleanly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			conf := filepath.Join(dir, "replproxy.conf")
			logfile := filepath.Join(dir, "replproxy.log")
			os.WriteFile(conf, []byte("bind 127.0.0.1\nport 6399\nloglevel verbose\n"), 0o644)
			port := redistest.FreePort(t)
			cmd := exec.Command(os.Args[0], conf, "--port", itoa(port), "--logfile", logfile)
			cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
			cmd.Dir = dir // dir "." is where the proxy locks and logs
			checkJSONLog(t, logfile)
			done := redistest.StartProcess(t, cmd)
			var conn net.Conn
			redistest.WaitFor(t, 10*time.Second, "replproxy listening", func() bool {
				var err error
				conn, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(port)))
				return err == nil
			})
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			conn.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if line != "+PONG\r\n" {
				t.Fatalf("PING answered %q", line)
			}
			cmd.Process.Signal(sig)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("replproxy exited with %v after %v", err, sig)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("replproxy still running 10s after %v", sig)
			}
			log, _ := os.ReadFile(logfile)
			if !strings.Contains(string(log), "replproxy stopped") {
				t.Fatalf("log does not record the stop:\n%s", log)
			}
		})
	}
}

func TestJSONLogFormat(t *testing.T) {
	dir := t.TempDir()
	cfg := config.DefaultConfig()
	cfg.LogFormat = config.LogJSON
	cfg.LogFile = filepath.Join(dir, "log.json")
	log, closeLog, err := newLogger(cfg, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	log.Named("upstream").Info("link to primary up", "repl-offset", 42)
	closeLog()
	data, _ := os.ReadFile(cfg.LogFile)
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(data), &rec); err != nil {
		t.Fatalf("log line is not JSON: %q: %v", data, err)
	}
	if rec["@module"] != "replproxy.upstream" || rec["repl-offset"] != float64(42) {
		t.Fatalf("log record %v", rec)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestLowFileLimit runs replproxy under "ulimit -n 64": it must start with
// maxclients lowered to what 64 descriptors allow (64 - 48 reserved), say
// so, refuse clients beyond that with Redis's error, and keep serving.
func TestLowFileLimit(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set the limit with")
	}
	dir := t.TempDir()
	logfile := filepath.Join(dir, "replproxy.log")
	port := redistest.FreePort(t)
	cmd := exec.Command("sh", "-c", `ulimit -n 64 && exec "$0" "$@"`, os.Args[0],
		"--port", itoa(port), "--logfile", logfile, "--maxclients", "10000")
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	cmd.Dir = dir // dir "." is where the proxy locks and logs
	checkJSONLog(t, logfile)
	redistest.StartProcess(t, cmd)
	addr := net.JoinHostPort("127.0.0.1", itoa(port))
	ping := func() string {
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
	func() {
		defer func() {
			if t.Failed() {
				log, _ := os.ReadFile(logfile)
				t.Logf("replproxy's log:\n%s", log)
			}
		}()
		redistest.WaitFor(t, 10*time.Second, "replproxy answering PING under ulimit -n 64", func() bool { return ping() == "+PONG\r\n" })
	}()
	log, _ := os.ReadFile(logfile)
	if !strings.Contains(string(log), `"maxclients":10000`) || !strings.Contains(string(log), `"effective-maxclients":`+itoa(64-reservedFDs)) {
		t.Fatalf("no warning naming maxclients 10000 and %d:\n%s", 64-reservedFDs, log)
	}
	// 40 clients: the 17th and later are refused, and the proxy lives on.
	var conns []net.Conn
	refused := 0
	for range 40 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, conn)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte("PING\r\n"))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		switch line {
		case "+PONG\r\n":
		case "-ERR max number of clients reached\r\n":
			refused++
		default:
			t.Fatalf("client %d got %q", len(conns), line)
		}
	}
	// At least 24: a client of the start-up probe may not be unregistered yet.
	if want := 40 - (64 - reservedFDs); refused < want || refused > want+2 {
		t.Errorf("%d of 40 clients refused, want %d", refused, want)
	}
	for _, c := range conns {
		c.Close()
	}
	redistest.WaitFor(t, 10*time.Second, "PONG after the crowd left", func() bool { return ping() == "+PONG\r\n" })
}

// TestSecondSignalStopsAtOnce: the first signal asks for the graceful stop
// (Shutdown), which Run serves; only the second ends Run's context.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Port = 0
	cfg.Dir = t.TempDir()
	srv, err := proxy.New(cfg, proxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	stopped := make(chan struct{})
	go stopOnSignals(ctx, sigs, srv, func() { close(stopped) }, hclog.NewNullLogger())
	sigs <- syscall.SIGTERM
	// The graceful stop was asked for: Run, with no replica to wait for,
	// returns by itself, and only once stopOnSignals has acted on the
	// first signal, which must not have stopped at once.
	runDone := make(chan error, 1)
	go func() { runDone <- srv.Run(ctx) }()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run after the first signal: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop gracefully after the first signal")
	}
	select {
	case <-stopped:
		t.Fatal("the first signal stopped at once")
	default:
	}
	sigs <- syscall.SIGTERM
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the second signal did not stop at once")
	}
}

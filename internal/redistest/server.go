package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// StartTimeout bounds how long a started server may take to answer PING.
	StartTimeout = 10 * time.Second
	// StopTimeout is how long [Server.Stop] waits after SIGTERM before SIGKILL.
	StopTimeout = 5 * time.Second
	// startAttempts is how many times a start is tried when the port is taken.
	startAttempts = 5
	// logTailLines is how much of a server's log a failed test shows.
	logTailLines = 40
)

// errAddrInUse reports that redis-server could not bind its port.
var errAddrInUse = errors.New("redistest: address already in use")

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago: it listens on
// port 0 and closes the listener.
//
// NB: another process may take the port between FreePort and its use. [StartServer]
// mitigates this by picking a new port and retrying when redis-server reports "Address
// already in use", and by checking that the server answering on the port is its own.
// Tests that bind the port themselves (a proxy listener) should do the same.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Server is a redis-server process owned by a test. It is not safe for concurrent use;
// its methods fail the test that started it (t.Fatal), so call them from that test's
// goroutine.
type Server struct {
	t        testing.TB
	bin      string
	dir      string
	logPath  string
	port     int
	args     []string    // extra arguments given to StartServer
	conf     string      // config file given first on the command line; "" for none
	password string      // from --requirepass, used by the readiness probe
	tls      *tls.Config // TLS only (StartTLSServer): how the probe connects; nil for plain
	ns       Namespace   // the network namespace it runs in (StartServerIn); nil for the test's own
	host     string      // the address it binds and is dialed at (StartServerIn); "" for 127.0.0.1
	proc     *process    // the running process; nil after Stop or Kill
}

// Namespace is a network namespace a server runs in ([StartServerIn]), as
// internal/netns.Namespace provides it: a command run inside it, and a dial from
// inside it (a server in another namespace is not reachable from the test's own).
type Namespace interface {
	Command(name string, args ...string) *exec.Cmd
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// process is one run of redis-server; [Server.Restart] makes a new one.
type process struct {
	cmd    *exec.Cmd
	out    *os.File      // stdout and stderr; closed by waitLoop
	done   chan struct{} // closed by waitLoop once the process has exited
	err    error         // exit status; written by waitLoop before done is closed
	paused bool          // SIGSTOP sent and no SIGCONT since
}

// waitLoop reaps the process and records how it exited.
func (p *process) waitLoop() {
	p.err = p.cmd.Wait()
	p.out.Close()
	close(p.done)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the process group of p (redis-server and its forked
// children). ESRCH, an already empty group, is not an error.
func (p *process) signalGroup(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// StartServer starts redis-server on a free port of 127.0.0.1 with no persistence,
// DEBUG enabled, its dir and log file in t.TempDir(), plus args (for example
// "--repl-diskless-sync", "no" or "--requirepass", "x"), and waits until it answers PING.
//
// The server is stopped when the test ends (resumed first if paused). If the test
// failed, the last 40 lines of the server's log are logged.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	return startServer(t, nil, nil, "", args)
}

// StartServerIn is [StartServer] for a server inside network namespace ns (`ip
// netns exec`), listening on host, an address of that namespace, instead of
// 127.0.0.1: the two regions of a WAN test. The same lifecycle applies (its own
// process group, stopped at the end of the test); its probe dials from inside ns,
// and so must the test: [DialIn].
func StartServerIn(t testing.TB, ns Namespace, host string, args ...string) *Server {
	t.Helper()
	return startServer(t, nil, ns, host, args)
}

// StartServerBinary is [StartServer] with bin, another server that takes
// redis-server's arguments (valkey-server), in redis-server's place. The
// caller finds bin (and skips when it is missing); under -short, as [Require], it skips.
func StartServerBinary(t testing.TB, bin string, args ...string) *Server {
	t.Helper()
	requireBinaries(t)
	return startServerBin(t, bin, nil, nil, "", args)
}

// startServer is StartServer, serving TLS only with tlsConf as the probe's
// client config when it is not nil, inside ns on host when ns is not nil ("" is
// 127.0.0.1).
func startServer(t testing.TB, tlsConf *tls.Config, ns Namespace, host string, args []string) *Server {
	t.Helper()
	bin, _ := Require(t)
	return startServerBin(t, bin, tlsConf, ns, host, args)
}

// startServerBin is startServer with the program to run.
func startServerBin(t testing.TB, bin string, tlsConf *tls.Config, ns Namespace, host string, args []string) *Server {
	t.Helper()
	dir := t.TempDir() // before t.Cleanup below, so it is removed after the log is shown
	s := &Server{
		t:       t,
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "redis.log"),
		args:    args,
		tls:     tlsConf,
		ns:      ns,
		host:    host,
	}
	for i, a := range args {
		if a == "--requirepass" && i+1 < len(args) {
			s.password = args[i+1]
		}
	}
	t.Cleanup(s.cleanup)
	startOnFreePort(t, "redis-server", &s.port, s.start)
	return s
}

// startOnFreePort picks a free port into *port and calls start, again on
// another port when the one picked was taken before the process bound it
// (another test's server got there first), up to startAttempts times.
func startOnFreePort(t testing.TB, what string, port *int, start func() error) {
	t.Helper()
	startOnPickedPort(t, what, FreePort, port, start)
}

// startOnPickedPort is startOnFreePort with the port picked by pick: a
// cluster node needs a second free port beside its own ([ClusterBusOffset]).
func startOnPickedPort(t testing.TB, what string, pick func(testing.TB) int, port *int, start func() error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		*port = pick(t)
		err := start()
		if err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			t.Fatalf("redistest: start %s on port %d: %v", what, *port, err)
		}
		t.Logf("redistest: port %d taken before %s bound it; retrying on another port", *port, what)
	}
}

// Addr returns "127.0.0.1:port", or host:port for [StartServerIn].
func (s *Server) Addr() string { return net.JoinHostPort(s.bindHost(), strconv.Itoa(s.port)) }

// bindHost returns the address the server binds.
func (s *Server) bindHost() string {
	if s.host == "" {
		return "127.0.0.1"
	}
	return s.host
}

// Namespace returns the network namespace the server runs in, or nil for the
// test's own.
func (s *Server) Namespace() Namespace { return s.ns }

// Port returns the server's TCP port. It stays the same across [Server.Restart].
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (its --dir), which lasts for the test.
func (s *Server) Dir() string { return s.dir }

// LogPath returns the server's log file. Restarts append to the same file.
func (s *Server) LogPath() string { return s.logPath }

// Pid returns the pid of the running process, or 0 after [Server.Stop] or [Server.Kill].
func (s *Server) Pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Stop shuts the server down with SIGTERM, resuming it first if paused, and waits for
// it to exit; after [StopTimeout] it sends SIGKILL. Stop on a stopped server does nothing.
func (s *Server) Stop() {
	s.t.Helper()
	if p := s.proc; p != nil {
		s.proc = nil
		s.stop(p)
	}
}

// Kill sends SIGKILL to the server and its children and waits for it to exit, like a
// crash. Kill on a stopped server does nothing.
func (s *Server) Kill() {
	s.t.Helper()
	if p := s.proc; p != nil {
		s.proc = nil
		s.kill(p)
	}
}

// Pause freezes the server and its children with SIGSTOP: connections stay open and
// the kernel still accepts new ones, but nothing is answered. On Linux it returns once
// the process is stopped.
func (s *Server) Pause() {
	s.t.Helper()
	p := s.mustRunning("Pause")
	if err := p.signalGroup(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("redistest: pause %s: %v", s.Addr(), err)
	}
	p.paused = true
	s.waitState(p, func(state byte) bool { return state == 'T' || state == 0 })
}

// Resume continues a server frozen by [Server.Pause] with SIGCONT.
func (s *Server) Resume() {
	s.t.Helper()
	p := s.mustRunning("Resume")
	if err := p.signalGroup(syscall.SIGCONT); err != nil {
		s.t.Fatalf("redistest: resume %s: %v", s.Addr(), err)
	}
	p.paused = false
	s.waitState(p, func(state byte) bool { return state != 'T' })
}

// Restart stops the server (if running) and starts a new process with the same port,
// dir and arguments. The dataset is not kept (no persistence), and a restarted primary
// has a new replication ID.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	for attempt := 1; ; attempt++ {
		err := s.start()
		if err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) || attempt == startAttempts {
			s.t.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
		}
		s.t.Logf("redistest: port %d still in use; retrying restart", s.port)
		time.Sleep(100 * time.Millisecond)
	}
}

// commandArgs returns the redis-server command line.
func (s *Server) commandArgs() []string {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	if s.tls != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port))
	} else {
		args = append(args, "--port", strconv.Itoa(s.port))
	}
	args = append(args,
		"--bind", s.bindHost(),
		"--save", "",
		"--appendonly", "no",
		"--enable-debug-command", "yes",
		"--dir", s.dir,
		"--logfile", s.logPath,
		"--daemonize", "no",
	)
	if s.ns != nil {
		// Off 127.0.0.1 and without a password, protected mode would refuse
		// every client, the other region's included.
		args = append(args, "--protected-mode", "no")
	}
	return append(args, s.args...)
}

// start runs a new process and waits until it is ready. On failure no process is left.
func (s *Server) start() error {
	logStart := fileSize(s.logPath)
	outPath := filepath.Join(s.dir, "redis.stdout")
	outStart := fileSize(outPath)
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.commandArgs()...)
	if s.ns != nil {
		cmd = s.ns.Command(s.bin, s.commandArgs()...)
	}
	cmd.Dir = s.dir
	// An *os.File, not a pipe: Wait then returns when redis-server exits, even if a
	// forked child still holds the descriptors.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return err
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go p.waitLoop()
	if err := s.waitReady(p); err != nil {
		s.kill(p)
		// Also when waitReady gave up first: another server on the port may have
		// rejected the probe (NOAUTH) before ours logged the bind error and exited.
		if strings.Contains(readFrom(s.logPath, logStart), "Address already in use") {
			return errAddrInUse
		}
		if output := readFrom(out.Name(), outStart); output != "" {
			// Command-line errors go to stderr, not the log file.
			return fmt.Errorf("%w; output:\n%s", err, tail(output, logTailLines))
		}
		return err
	}
	s.proc = p
	s.t.Logf("redistest: started redis-server pid=%d addr=%s dir=%s args=%q", cmd.Process.Pid, s.Addr(), s.dir, s.args)
	return nil
}

// waitReady polls until the server answers PING, or fails when it exits first or
// [StartTimeout] passes. -LOADING means not ready yet.
func (s *Server) waitReady(p *process) error {
	deadline := time.Now().Add(StartTimeout)
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("redis-server exited before it was ready: %v", p.err)
		default:
		}
		ready, err := s.probe(p.cmd.Process.Pid)
		if ready {
			return nil
		}
		var re *ReplyError
		if errors.As(err, &re) && re.Prefix() != "LOADING" {
			return err // wrong password, or a server that is not ours rejecting us
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", StartTimeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// probe reports whether the server on s.port answers PING and is process pid, not some
// other server that took the port first.
func (s *Server) probe(pid int) (bool, error) {
	c, err := dial(s.Addr(), DialOptions{Password: s.password, Timeout: time.Second, TLS: s.tls, Dial: s.dialer()})
	if err != nil {
		return false, err
	}
	defer c.Close()
	if _, err := c.Do("PING"); err != nil {
		return false, err
	}
	info, err := c.info("server")
	if err != nil {
		return false, err
	}
	if got := info["process_id"]; got != strconv.Itoa(pid) {
		return false, fmt.Errorf("port %d answered by process_id %s, not %d", s.port, got, pid)
	}
	return true, nil
}

// dialer returns how to reach the server: from inside its namespace, or nil
// for the default dialer.
func (s *Server) dialer() func(ctx context.Context, network, address string) (net.Conn, error) {
	if s.ns == nil {
		return nil
	}
	return s.ns.DialContext
}

// stop sends SIGTERM (after SIGCONT if paused) and waits, with SIGKILL after StopTimeout.
func (s *Server) stop(p *process) {
	s.t.Helper()
	if p.exited() {
		s.t.Logf("redistest: redis-server pid=%d addr=%s had already exited: %v", p.cmd.Process.Pid, s.Addr(), p.err)
		return
	}
	if p.paused {
		// A stopped process would not act on SIGTERM until the timeout's SIGKILL.
		p.signalGroup(syscall.SIGCONT)
		p.paused = false
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(StopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		s.t.Logf("redistest: redis-server pid=%d did not exit %v after SIGTERM; sending SIGKILL", p.cmd.Process.Pid, StopTimeout)
		s.kill(p)
	}
}

// kill sends SIGKILL to the process group and waits for redis-server to exit.
func (s *Server) kill(p *process) {
	s.t.Helper()
	if err := p.signalGroup(syscall.SIGKILL); err != nil {
		s.t.Errorf("redistest: kill redis-server pid=%d: %v", p.cmd.Process.Pid, err)
	}
	<-p.done
}

// cleanup is registered by StartServer: it stops the server and, if the test failed,
// shows the end of the log.
func (s *Server) cleanup() {
	s.t.Helper()
	if p := s.proc; p != nil {
		s.proc = nil
		s.stop(p)
	}
	if s.t.Failed() {
		s.t.Logf("redistest: last %d lines of %s (%s):\n%s", logTailLines, s.logPath, s.Addr(),
			tail(readFrom(s.logPath, 0), logTailLines))
	}
}

func (s *Server) mustRunning(op string) *process {
	s.t.Helper()
	if s.proc == nil {
		s.t.Fatalf("redistest: %s on stopped server %s", op, s.Addr())
	}
	return s.proc
}

// waitState polls the state of p's process (Linux only) until ok, for up to a second.
func (s *Server) waitState(p *process, ok func(state byte) bool) {
	s.t.Helper()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if ok(processState(p.cmd.Process.Pid)) || p.exited() {
			return
		}
	}
	s.t.Fatalf("redistest: redis-server pid=%d did not change state after a signal", p.cmd.Process.Pid)
}

// fileSize returns the size of path, or 0 if it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the contents of path from offset on, or "" if it cannot be read.
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	return string(b[offset:])
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "")
}

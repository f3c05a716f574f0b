package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// StartTimeout bounds how long a started process may take to answer PING.
	StartTimeout = 10 * time.Second
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	StopTimeout = 5 * time.Second
	// logTail is how many bytes of a process's log an error quotes.
	logTail = 1500
)

// Cluster owns the processes of one run and their temp dir.
type Cluster struct {
	dir       string   // temp root; each process gets dir/<name>
	proxyBin  string   // replproxy binary
	proxyArgs []string // given to every proxy before StartProxy's own args
	procs     []*Process
	used      map[int]bool // ports handed out
	tlsArgs   []string     // set by EnableTLS: every process's TLS arguments
}

// New creates a cluster in a new temp dir. proxyBin is the replproxy binary
// StartProxy runs, and proxyArgs arguments every proxy gets before its own.
func New(proxyBin string, proxyArgs ...string) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "replproxy-bench-")
	if err != nil {
		return nil, err
	}
	return &Cluster{dir: dir, proxyBin: proxyBin, proxyArgs: proxyArgs, used: map[int]bool{}}, nil
}

// Close stops every process still running and removes the temp dir. It
// returns the first error.
func (c *Cluster) Close() error {
	var first error
	for _, p := range c.procs {
		if err := p.Stop(); err != nil && first == nil {
			first = err
		}
	}
	if err := os.RemoveAll(c.dir); err != nil && first == nil {
		first = err
	}
	return first
}

// Place is where a process runs: the address it binds (and its replicas
// and the harness dial), how its command is started, and how the harness
// dials it. The zero Place is loopback in the harness's own network
// namespace; a Place inside another namespace (the regions section) starts
// its command there (`ip netns exec`) and dials from inside it.
type Place struct {
	Host    string                                      // the address to bind and dial; "" is 127.0.0.1
	Command func(name string, args ...string) *exec.Cmd // nil is exec.Command
	// Dial connects the harness to an address of this place; nil dials
	// from the harness's own namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (pl Place) host() string { return cmp.Or(pl.Host, "127.0.0.1") }

// protected is protected-mode no off loopback: with protected mode on and
// no password, Redis 7.0 (and replproxy, as it) refuses every client that
// is not on a loopback address, a replica from the other region included.
func (pl Place) protected() []string {
	if pl.host() == "127.0.0.1" {
		return nil
	}
	return []string{"--protected-mode", "no"}
}

func (pl Place) command(name string, args ...string) *exec.Cmd {
	if pl.Command == nil {
		return exec.Command(name, args...)
	}
	return pl.Command(name, args...)
}

// StartRedis starts redis-server with the harness's fixed settings (no
// persistence, DEBUG enabled, 127.0.0.1) followed by args, and waits until it
// answers PING.
func (c *Cluster) StartRedis(ctx context.Context, name string, args ...string) (*Process, error) {
	return c.StartRedisAt(ctx, Place{}, name, args...)
}

// StartRedisAt is StartRedis at pl, bound to pl's address.
func (c *Cluster) StartRedisAt(ctx context.Context, pl Place, name string, args ...string) (*Process, error) {
	return c.start(ctx, pl, name, redisCommand(pl, args))
}

// StartRedisMany starts one redis-server per name, each as StartRedis
// would, all at once, and waits until every one answers PING: one after
// another, a hundred of them take many seconds, each waiting for its own
// PING. It returns them in the order of names, and the first error; Close
// stops those that started either way.
func (c *Cluster) StartRedisMany(ctx context.Context, names []string, args ...string) ([]*Process, error) {
	procs := make([]*Process, len(names))
	for i, name := range names {
		var err error
		if procs[i], err = c.prepare(Place{}, name, redisCommand(Place{}, args)); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.launch(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return procs, nil
}

// redisCommand is the command line of a redis-server at pl: the
// harness's fixed settings, then args.
func redisCommand(pl Place, args []string) func(p *Process) *exec.Cmd {
	return func(p *Process) *exec.Cmd {
		a := []string{
			"--port", strconv.Itoa(p.Port), "--bind", pl.host(), "--save", "", "--appendonly", "no",
			"--enable-debug-command", "yes", "--daemonize", "no", "--dir", p.dir,
			"--logfile", filepath.Join(p.dir, "server.log"),
		}
		return pl.command("redis-server", slices.Concat(a, pl.protected(), p.tlsArgs(), args)...)
	}
}

// StartProxy starts replproxy as a replica of upstream (its TLS port after
// EnableTLS), followed by args, and waits until it answers PING.
func (c *Cluster) StartProxy(ctx context.Context, name string, upstream *Process, args ...string) (*Process, error) {
	return c.StartProxyAt(ctx, Place{}, name, upstream, args...)
}

// StartProxyAt is StartProxy at pl, bound to pl's address; it dials
// upstream's address.
func (c *Cluster) StartProxyAt(ctx context.Context, pl Place, name string, upstream *Process, args ...string) (*Process, error) {
	return c.start(ctx, pl, name, func(p *Process) *exec.Cmd {
		a := []string{
			"--port", strconv.Itoa(p.Port), "--bind", pl.host(),
			"--replicaof", upstream.Host(), strconv.Itoa(upstream.ReplPort()), "--dir", p.dir,
			"--logfile", filepath.Join(p.dir, "server.log"),
		}
		return pl.command(c.proxyBin, slices.Concat(a, pl.protected(), p.tlsArgs(), c.proxyArgs, args)...)
	})
}

// StartForwarder starts bin with args, then "-forward <listen>=<upstream>"
// for its port and, after EnableTLS, its TLS port: a relay that copies
// bytes between each connection to it and one it makes to upstream's port
// (or TLS port), and back. It answers PING through upstream, like the
// server behind it, and replicas of it dial its ReplPort.
func (c *Cluster) StartForwarder(ctx context.Context, name, bin string, upstream *Process, args ...string) (*Process, error) {
	return c.start(ctx, Place{}, name, func(p *Process) *exec.Cmd {
		a := slices.Concat(args, []string{"-forward", p.Addr() + "=" + upstream.Addr()})
		if p.TLSPort != 0 {
			a = append(a, "-forward", net.JoinHostPort(p.Host(), strconv.Itoa(p.TLSPort))+"="+net.JoinHostPort(upstream.Host(), strconv.Itoa(upstream.TLSPort)))
		}
		return exec.Command(bin, a...)
	})
}

func (c *Cluster) start(ctx context.Context, pl Place, name string, command func(p *Process) *exec.Cmd) (*Process, error) {
	p, err := c.prepare(pl, name, command)
	if err != nil {
		return nil, err
	}
	return p, p.launch(ctx)
}

// prepare makes a process's dir, ports and client, and adds it to the
// cluster, not yet started.
func (c *Cluster) prepare(pl Place, name string, command func(p *Process) *exec.Cmd) (*Process, error) {
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := c.freePort()
	if err != nil {
		return nil, err
	}
	p := &Process{Name: name, Port: port, dir: dir, command: command, place: pl}
	if c.tlsArgs != nil {
		if p.TLSPort, err = c.freePort(); err != nil {
			return nil, err
		}
		p.tls = c.tlsArgs
	}
	p.client = redis.NewClient(&redis.Options{
		Addr: net.JoinHostPort(pl.host(), strconv.Itoa(port)), Protocol: 2, Dialer: pl.Dial,
		DisableIdentity: true, MaxRetries: -1, ReadTimeout: 30 * time.Second,
	})
	c.procs = append(c.procs, p)
	return p, nil
}

// freePort returns a port nobody listened on a moment ago and that this
// cluster has not handed out before.
func (c *Cluster) freePort() (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("cluster: free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !c.used[port] {
			c.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("cluster: no free port")
}

// Process is one server of the cluster. Restart runs it again on the same
// ports, in the same dir, with the same arguments.
type Process struct {
	Name    string
	Port    int // plain port: the harness's commands, and replication without TLS
	TLSPort int // TLS port, 0 unless the cluster has EnableTLS
	dir     string
	place   Place
	tls     []string // TLS arguments; nil without TLS
	command func(p *Process) *exec.Cmd
	client  *redis.Client
	cmd     *exec.Cmd     // the running process; nil when stopped
	done    chan struct{} // closed when cmd has exited
}

// Host is the address p binds and its replicas dial.
func (p *Process) Host() string { return p.place.host() }

// Place is where p runs.
func (p *Process) Place() Place { return p.place }

// Addr is p's plain host:port.
func (p *Process) Addr() string { return net.JoinHostPort(p.Host(), strconv.Itoa(p.Port)) }

// ReplPort is the port a replica of p dials: TLSPort under TLS, else Port.
func (p *Process) ReplPort() int {
	if p.TLSPort != 0 {
		return p.TLSPort
	}
	return p.Port
}

// tlsArgs are p's TLS listening and certificate arguments, none without TLS.
func (p *Process) tlsArgs() []string {
	if p.tls == nil {
		return nil
	}
	return append([]string{"--tls-port", strconv.Itoa(p.TLSPort)}, p.tls...)
}

func (p *Process) launch(ctx context.Context) error {
	cmd := p.command(p)
	out, err := os.OpenFile(filepath.Join(p.dir, "output.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("cluster: start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		out.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done

	deadline := time.Now().Add(StartTimeout)
	for {
		if p.client.Ping(ctx).Val() == "PONG" {
			return nil
		}
		select {
		case <-done:
			return p.errorf("exited at startup")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return p.errorf("does not answer PING after %v", StartTimeout)
		}
	}
}

// PID is the process id of the running process, 0 when stopped.
func (p *Process) PID() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Dir is the process's own directory (its --dir), on the file system of
// the cluster's temp dir.
func (p *Process) Dir() string { return p.dir }

// Client is a go-redis client of the process.
func (p *Process) Client() *redis.Client { return p.client }

// Kill sends SIGKILL and waits until the process has exited.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Restart starts the process again after Stop or Kill, on the same port with
// the same arguments.
func (p *Process) Restart(ctx context.Context) error {
	if p.cmd != nil {
		return fmt.Errorf("cluster: restart %s: still running", p.Name)
	}
	return p.launch(ctx)
}

// Stop sends SIGTERM, waits up to StopTimeout, then sends SIGKILL. It is a
// no-op on a stopped process.
func (p *Process) Stop() error {
	defer p.client.Close()
	if p.cmd == nil {
		return nil
	}
	p.cmd.Process.Signal(sigterm)
	select {
	case <-p.done:
		p.cmd = nil
		return nil
	case <-time.After(StopTimeout):
	}
	p.Kill()
	return fmt.Errorf("cluster: %s did not stop on SIGTERM within %v", p.Name, StopTimeout)
}

// errorf is an error about p that quotes the end of its logs.
func (p *Process) errorf(format string, args ...any) error {
	var tail strings.Builder
	for _, f := range []string{"server.log", "output.log"} {
		b, _ := os.ReadFile(filepath.Join(p.dir, f))
		if len(b) > logTail {
			b = b[len(b)-logTail:]
		}
		if len(b) > 0 {
			fmt.Fprintf(&tail, "\n--- end of %s's %s:\n%s", p.Name, f, b)
		}
	}
	return fmt.Errorf("cluster: %s (port %d) %s%s", p.Name, p.Port, fmt.Sprintf(format, args...), tail.String())
}

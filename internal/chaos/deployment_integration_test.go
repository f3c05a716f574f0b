package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/cachedata"
	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

// node is one server of the deployment, by name: a redis-server or a proxy.
type node struct {
	name string
	ns   netns.Namespace
	addr string
}

// deployment is the whole system under test. Its fields are set up once by
// newDeployment; the servers and proxies are restarted only by the test's
// goroutine (the nemesis).
type deployment struct {
	t    *testing.T
	hist *History
	pair *netns.Pair
	bin  string // the proxy, built with -race
	dir  string

	pki *redistest.PKI // the proxies' certificates: each its own, rotated by CertRotate
	// fsDir is the small file system (a tmpfs of fsSize) that holds proxy
	// A's dir and the filler of a DiskFull.
	fsDir string
	// sourceA is proxy A's own address in region A, which it also listens
	// on and dials the primary from (bind-source-addr): a LinkCut cuts the
	// flows between it and the primary's port.
	sourceA string
	// rotations counts CertRotates, to name each new certificate.
	rotations int
	// baseline is each proxy's goroutines and descriptors once the
	// deployment first converged, which every heal must come back to.
	baseline map[string]Resources

	servers   map[string]*redistest.Server // redis-1 (the first primary), redis-2 (its replica), a1..a3, b1..b3
	home      map[string]string            // each replica's own upstream: a node's name
	sentinels []*redistest.Server
	proxies   map[string]*proxyProc // proxy-a, standby, proxy-b
	nodes     []node                // every server and proxy, in a fixed order
	byAddr    map[string]string     // address → name
}

func newDeployment(t *testing.T, hist *History) *deployment {
	t.Helper()
	d := &deployment{
		t: t, hist: hist,
		pair:    netns.NewPair(t, netns.Options{RateBitsPerSec: wanRate}),
		bin:     buildProxy(t),
		dir:     t.TempDir(),
		pki:     redistest.NewPKI(t),
		servers: map[string]*redistest.Server{},
		home:    map[string]string{},
		proxies: map[string]*proxyProc{},
		byAddr:  map[string]string{},
	}
	a, b := d.pair.A, d.pair.B
	// Every redis-server keeps a backlog that covers a failover and a
	// restart of the proxies at writeRate, and pings its replicas every
	// second, so that a quiet link looks alive to a proxy's repl-timeout.
	redisArgs := []string{"--repl-diskless-sync-delay", "0", "--repl-backlog-size", "64mb", "--repl-ping-replica-period", "1"}
	primary := redistest.StartServerIn(t, a, d.pair.AddrA, redisArgs...)
	d.addServer("redis-1", a, primary, "")
	host, port, _ := net.SplitHostPort(primary.Addr())
	d.addServer("redis-2", a, redistest.StartServerIn(t, a, d.pair.AddrA, append(slices.Clone(redisArgs), "--replicaof", host, port)...), "redis-1")
	for range 3 {
		conf := []string{
			fmt.Sprintf("sentinel monitor %s %s %s 2", masterName, host, port),
			// 5 s, not Sentinel's 30: failovers within the run's pace,
			// yet well past the 2 s a primary's DEBUG DIGEST blocks it
			// for once the dataset has grown (converge).
			fmt.Sprintf("sentinel down-after-milliseconds %s 5000", masterName),
			fmt.Sprintf("sentinel failover-timeout %s 10000", masterName),
			// Proxy A listens on a second address too; a Sentinel that
			// reaches it there would announce itself from that address,
			// where no Sentinel listens.
			"sentinel announce-ip " + d.pair.AddrA,
		}
		d.sentinels = append(d.sentinels, redistest.StartSentinelIn(t, a, d.pair.AddrA, conf))
	}

	d.fsDir = mountSmallFS(t, filepath.Join(d.dir, "proxy-a-fs"))
	d.sourceA = strings.TrimSuffix(d.pair.AddrA, ".1") + ".5"
	if err := a.AddLocalAddr(d.sourceA); err != nil {
		t.Fatal(err)
	}
	// Proxy A's stream log fits its small file system, with room for its
	// snapshots. The primary (and so Sentinel) sees it at sourceA, where it
	// listens too.
	d.addProxy("proxy-a", a, d.pair.AddrA, proxyOpts{
		dir:      filepath.Join(d.fsDir, "dir"),
		extra:    []string{"--repl-log-size", "128mb", "--bind-source-addr", d.sourceA},
		alsoBind: d.sourceA,
	}, func() []string { return d.replicaofPrimary(t) })
	_, aPort0, _ := net.SplitHostPort(d.proxies["proxy-a"].addr)
	d.byAddr[net.JoinHostPort(d.sourceA, aPort0)] = "proxy-a"
	d.addProxy("standby", a, d.pair.AddrA, proxyOpts{}, func() []string { return d.replicaofPrimary(t) })
	aHost, aPort, _ := net.SplitHostPort(d.proxies["proxy-a"].addr)
	_, aTLSPort, _ := net.SplitHostPort(d.proxies["proxy-a"].tlsAddr)
	// Proxy B replicates proxy A across the WAN over TLS (each presents its
	// own certificate, and proxy A asks for one) and zstd.
	d.addProxy("proxy-b", b, d.pair.AddrB, proxyOpts{}, func() []string {
		return []string{"--replicaof", aHost, aTLSPort, "--tls-replication", "yes", "--repl-link-compression", "zstd"}
	})
	for i := range 3 {
		d.addServer(fmt.Sprintf("a%d", i+1), a, redistest.StartServerIn(t, a, d.pair.AddrA, append(slices.Clone(redisArgs), "--replicaof", aHost, aPort)...), "proxy-a")
	}
	bHost, bPort, _ := net.SplitHostPort(d.proxies["proxy-b"].addr)
	for i := range 3 {
		// The replicas in B outlast the longest WAN cut (30 s) on their
		// connection to proxy B, which relays no PING meanwhile.
		args := append(slices.Clone(redisArgs), "--replicaof", bHost, bPort, "--repl-timeout", "120")
		d.addServer(fmt.Sprintf("b%d", i+1), b, redistest.StartServerIn(t, b, d.pair.AddrB, args...), "proxy-b")
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range d.proxies {
				for _, path := range []string{p.logfile, p.stderr} {
					if b, err := os.ReadFile(path); err == nil {
						t.Logf("%s:\n%s", path, tailOf(b, 8<<10))
					}
				}
			}
		}
	})
	return d
}

func (d *deployment) addServer(name string, ns netns.Namespace, s *redistest.Server, home string) {
	d.servers[name] = s
	d.home[name] = home
	d.nodes = append(d.nodes, node{name: name, ns: ns, addr: s.Addr()})
	d.byAddr[s.Addr()] = name
}

// proxyOpts are what sets one proxy apart from the others.
type proxyOpts struct {
	dir      string   // its dir; "" for one of its own in the run's folder
	extra    []string // directives of its own
	alsoBind string   // a second address to listen on; "" for none
}

// addProxy starts a proxy named name in ns, listening on host; upstream
// gives its --replicaof and link directives at each start.
func (d *deployment) addProxy(name string, ns netns.Namespace, host string, opts proxyOpts, upstream func() []string) {
	dir := opts.dir
	if dir == "" {
		dir = filepath.Join(d.dir, name)
	}
	p := &proxyProc{
		name: name, ns: ns, bin: d.bin, upstream: upstream, extra: opts.extra, alsoBind: opts.alsoBind,
		port:    redistest.FreePort(d.t),
		dir:     dir,
		logfile: filepath.Join(d.dir, name+".log"),
		stderr:  filepath.Join(d.dir, name+".stderr"),
		caFile:  d.pki.CACert,
	}
	p.certFile, p.keyFile = d.pki.Issue(d.t, name)
	p.addr = net.JoinHostPort(host, strconv.Itoa(p.port))
	p.tlsAddr = net.JoinHostPort(host, strconv.Itoa(redistest.FreePort(d.t)))
	p.metricsAddr = net.JoinHostPort(host, strconv.Itoa(redistest.FreePort(d.t)))
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		d.t.Fatal(err)
	}
	p.start(d.t)
	d.proxies[name] = p
	d.nodes = append(d.nodes, node{name: name, ns: ns, addr: p.addr})
	d.byAddr[p.addr] = name
}

// buildProxy builds cmd/replproxy with -race into a temporary folder: the
// proxies of the deployment are the real binary, race-enabled.
func buildProxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "replproxy")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "build", "-race", "-o", bin, "../../cmd/replproxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the proxy: %v\n%s", err, out)
	}
	return bin
}

// node returns the node named name.
func (d *deployment) node(name string) node {
	for _, n := range d.nodes {
		if n.name == name {
			return n
		}
	}
	d.t.Fatalf("no node %s", name)
	return node{}
}

// primary asks the Sentinels which server is the primary and returns its
// name; "" when none answers.
func (d *deployment) primary() string {
	for _, s := range d.sentinels {
		c, err := dialNode(node{ns: d.pair.A, addr: s.Addr()})
		if err != nil {
			continue
		}
		v, err := c.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName)
		c.Close()
		if err != nil || len(v.Array()) != 2 {
			continue
		}
		addr := net.JoinHostPort(v.Array()[0].String(), v.Array()[1].String())
		if name, ok := d.byAddr[addr]; ok {
			return name
		}
	}
	return ""
}

// replicaofPrimary is the proxies' --replicaof: the primary as the
// Sentinels name it now.
func (d *deployment) replicaofPrimary(t *testing.T) []string {
	name := d.primary()
	if name == "" {
		t.Fatal("no Sentinel names the primary")
	}
	host, port, _ := net.SplitHostPort(d.node(name).addr)
	return []string{"--replicaof", host, port}
}

// replicaNames is every redis-server but the primary.
func (d *deployment) replicaNames(t *testing.T) []string {
	p := d.primary()
	var names []string
	for _, n := range d.nodes {
		if _, ok := d.servers[n.name]; ok && n.name != p {
			names = append(names, n.name)
		}
	}
	return names
}

// dialNode connects to n from its namespace, with a short timeout so that
// a stopped process costs a sample, not the run.
func dialNode(n node) (*redistest.Client, error) {
	return redistest.Connect(n.addr, redistest.DialOptions{Dial: n.ns.DialContext, Timeout: 3 * time.Second})
}

// info reads INFO section from n on a connection of its own.
func info(n node, section string) (map[string]string, error) {
	c, err := dialNode(n)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.Do("INFO", section)
	if err != nil {
		return nil, fmt.Errorf("info %s of %s: %w", section, n.name, err)
	}
	return redistest.ParseInfo(v.String()), nil
}

// do sends one command to n on a connection of its own.
func do(n node, args ...any) error {
	c, err := dialNode(n)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Do(args...); err != nil {
		return fmt.Errorf("%v on %s: %w", args, n.name, err)
	}
	return nil
}

// proxyProc is one proxy process of the real binary, restarted on the same
// dir, ports, certificate and log; its stderr (where the race detector and a
// panic write) is appended to a file of its own. Its fields are owned by the
// test's goroutine.
type proxyProc struct {
	name, bin       string
	ns              netns.Namespace
	port            int
	addr            string // the plain port, which replicas and clients use
	tlsAddr         string // the TLS port, which proxy B's link uses
	metricsAddr     string // /metrics
	dir             string
	logfile, stderr string
	certFile        string // its certificate and key now: a CertRotate replaces them
	keyFile, caFile string
	extra           []string
	alsoBind        string          // a second address to listen on, "" for none
	upstream        func() []string // its --replicaof and link directives, asked at each start
	cmd             *exec.Cmd       // the running process
	exited          <-chan error
}

// proxyMaxMemory is every proxy's maxmemory, which the memory checker holds
// it to (under evict-snapshots).
const proxyMaxMemory = 256 << 20

func (p *proxyProc) start(t *testing.T) {
	t.Helper()
	host, _, _ := net.SplitHostPort(p.addr)
	_, tlsPort, _ := net.SplitHostPort(p.tlsAddr)
	_, metricsPort, _ := net.SplitHostPort(p.metricsAddr)
	args := []string{"--bind", host}
	if p.alsoBind != "" {
		args = append(args, p.alsoBind)
	}
	args = append(args, "--port", strconv.Itoa(p.port), "--protected-mode", "no",
		"--dir", p.dir, "--logfile", p.logfile, "--repl-timeout", strconv.Itoa(int(replTimeout/time.Second)),
		"--tls-port", tlsPort, "--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-ca-cert-file", p.caFile,
		"--metrics-port", metricsPort, "--metrics-bind", host,
		"--maxmemory", strconv.Itoa(proxyMaxMemory), "--maxmemory-policy", "evict-snapshots")
	args = append(append(args, p.extra...), p.upstream()...)
	errf, err := os.OpenFile(p.stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close() // the child holds its own copy
	cmd := p.ns.Command(p.bin, args...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = errf, errf
	p.exited = redistest.StartProcess(t, cmd)
	p.cmd = cmd
	ok := redistest.Poll(30*time.Second, func() bool {
		c, err := p.ns.Dial("tcp", p.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if !ok {
		t.Fatalf("%s not listening on %s within 30 s of its start", p.name, p.addr)
	}
}

func (p *proxyProc) kill(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30 s after SIGKILL", p.name)
	}
}

func (p *proxyProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// loader is the steady write load: cachedata's commands to whichever
// server the Sentinels name the primary, a WAIT every waitEvery chunks, a
// FLUSHALL every flushEvery of load.
type loader struct {
	d      *deployment
	paused atomic.Bool // set by the nemesis while it waits for convergence
	chunks int         // chunks written so far; owned by run's goroutine
}

func (l *loader) pause() { l.paused.Store(true) }

func (l *loader) resume() { l.paused.Store(false) }

// run writes until ctx ends, reconnecting to the primary the Sentinels
// name whenever the connection fails or the primary changes.
func (l *loader) run(ctx context.Context) {
	gen := cachedata.New(36)
	for ctx.Err() == nil {
		name := l.d.primary()
		if name == "" {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		n := l.d.node(name)
		conn, err := n.ns.DialContext(ctx, "tcp", n.addr)
		if err != nil {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		l.write(ctx, conn, gen, name)
		conn.Close()
	}
}

// write writes to conn, the primary name, until a write fails, ctx ends or
// the Sentinels name another primary; a second goroutine drains replies.
func (l *loader) write(ctx context.Context, conn net.Conn, gen *cachedata.Gen, name string) {
	var drain sync.WaitGroup
	drain.Go(func() { io.Copy(io.Discard, conn) })
	defer drain.Wait()
	defer conn.Close()
	tick := time.NewTicker(writeTick)
	defer tick.Stop()
	wait := []byte("*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n")
	flushAll := []byte("*1\r\n$8\r\nFLUSHALL\r\n")
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if i%20 == 0 && l.d.primary() != name {
			return
		}
		if l.paused.Load() {
			continue
		}
		chunk := gen.FillRESP(writeRate / int(time.Second/writeTick))
		if i%waitEvery == 0 {
			chunk = append(chunk, wait...)
		}
		l.chunks++
		if l.chunks%int(flushEvery/writeTick) == 0 {
			chunk = append(chunk, flushAll...)
		}
		conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write(chunk); err != nil {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

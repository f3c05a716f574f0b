package deploy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

const (
	// replTimeout is the proxies' repl-timeout: short, so that a stopped or
	// cut link is given up and redialed within seconds (the WAN test's 10 s,
	// which a loaded machine with -race proxies needs).
	replTimeout = 10 * time.Second
	// proxyMaxMemory is every proxy's maxmemory, which the memory checker
	// holds it to (under evict-snapshots).
	proxyMaxMemory = 256 << 20
)

// proxyOpts are what sets one proxy apart from the others.
type proxyOpts struct {
	dir      string   // its dir; "" for one of its own in the run's folder
	extra    []string // directives of its own
	alsoBind string   // a second address to listen on; "" for none
}

// proxyPorts are one proxy's three ports.
type proxyPorts struct {
	plain, tls, metrics int
}

// addProxy starts a proxy named name in ns, listening on host on ports
// free a moment ago; upstream gives its --replicaof and link directives at
// each start.
func (d *Deployment) addProxy(name string, ns netns.Namespace, host string, opts proxyOpts, upstream func() []string) {
	ports := proxyPorts{plain: redistest.FreePort(d.t), tls: redistest.FreePort(d.t), metrics: redistest.FreePort(d.t)}
	p := d.layOut(name, ns, host, ports, opts, upstream)
	p.certFile, p.keyFile = d.pki.Issue(d.t, name)
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		d.t.Fatal(err)
	}
	p.start(d.t)
	d.proxies[name] = p
	d.register(name, ns, p.addr)
}

// layOut is proxy name, not started and without a certificate: its
// addresses (host and ports), its dir (opts.dir, or one named for it in
// the run's folder), and its log and stderr, named for it in the run's
// folder.
func (d *Deployment) layOut(name string, ns netns.Namespace, host string, ports proxyPorts, opts proxyOpts, upstream func() []string) *proxyProc {
	dir := opts.dir
	if dir == "" {
		dir = filepath.Join(d.dir, name)
	}
	return &proxyProc{
		name: name, ns: ns, bin: d.bin, upstream: upstream, extra: opts.extra, alsoBind: opts.alsoBind,
		port:        ports.plain,
		addr:        net.JoinHostPort(host, strconv.Itoa(ports.plain)),
		tlsAddr:     net.JoinHostPort(host, strconv.Itoa(ports.tls)),
		metricsAddr: net.JoinHostPort(host, strconv.Itoa(ports.metrics)),
		dir:         dir,
		logfile:     filepath.Join(d.dir, name+".log"),
		stderr:      filepath.Join(d.dir, name+".stderr"),
		caFile:      d.pki.CACert,
	}
}

// buildProxy builds cmd/replproxy with -race into a temporary folder: the
// proxies of the deployment are the real binary, race-enabled.
func buildProxy(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "replproxy")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(gobin, "build", "-race", "-o", bin, "github.com/replproxy/replproxy/cmd/replproxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the proxy: %v\n%s", err, out)
	}
	return bin
}

// proxyProc is one proxy process of the real binary, restarted on the same
// dir, ports, certificate and log; its stderr (where the race detector and a
// panic write) is appended to a file of its own. Its fields are set up by
// New and owned afterwards by the nemesis's goroutine; the sampler reads
// none of them.
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

// args is p's command line at a start: the directives every proxy of the
// deployment has, then its own, then its upstream's as asked now.
func (p *proxyProc) args() []string {
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
	return append(append(args, p.extra...), p.upstream()...)
}

// start starts p and waits until it listens on its plain port.
func (p *proxyProc) start(t testing.TB) {
	t.Helper()
	args := p.args()
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

func (p *proxyProc) kill(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30 s after SIGKILL", p.name)
	}
}

func (p *proxyProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// resources reads p's goroutines and open descriptors from its /metrics.
func (p *proxyProc) resources() (chaos.Resources, error) {
	client := http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DialContext: p.ns.DialContext, DisableKeepAlives: true},
	}
	resp, err := client.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return chaos.Resources{}, fmt.Errorf("%s /metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	r, err := parseResources(resp.Body)
	if err != nil {
		return chaos.Resources{}, fmt.Errorf("%s /metrics: %w", p.name, err)
	}
	return r, nil
}

// parseResources reads go_goroutines and process_open_fds from a
// Prometheus text exposition.
func parseResources(body io.Reader) (chaos.Resources, error) {
	var r chaos.Resources
	var goroutines, fds bool
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			r.Goroutines, goroutines = int(n), true
		case "process_open_fds":
			r.FDs, fds = int(n), true
		}
	}
	if err := sc.Err(); err != nil {
		return chaos.Resources{}, err
	}
	if !goroutines || !fds {
		return chaos.Resources{}, errors.New("no go_goroutines or no process_open_fds")
	}
	return r, nil
}

package deploy

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

const (
	// wanRate is the WAN's bandwidth each way, in bits per second.
	wanRate = 100e6
	// masterName is the name the Sentinels monitor the primary under.
	masterName = "chaos"
)

// node is one server of the deployment, by name: a redis-server or a proxy.
type node struct {
	name string
	ns   netns.Namespace
	addr string
}

// Deployment is the whole system under test: two regions, a primary with
// its replica, three Sentinels, proxy A, its standby and proxy B, and
// three replicas behind each of proxy A and proxy B. Its fields are set
// up once by [New]; afterwards the servers and proxies are stopped,
// restarted and moved only by the goroutine that calls [Deployment.Run]
// (the nemesis's), and the maps and nodes are only read. Everything it
// starts is stopped by the cleanups of the test that created it.
type Deployment struct {
	t    testing.TB
	hist *chaos.History
	pair *netns.Pair
	bin  string // the proxy, built with -race
	dir  string

	pki *redistest.PKI // the proxies' certificates: each its own, rotated by CertRotate
	// fsDir is the small file system (a tmpfs of smallFSSize) that holds
	// proxy A's dir and the filler of a DiskFull.
	fsDir string
	// sourceA is proxy A's own address in region A, which it also listens
	// on and dials the primary from (bind-source-addr): a LinkCut cuts the
	// flows between it and the primary's port.
	sourceA string
	// rotations counts CertRotates, to name each new certificate.
	rotations int
	// baseline is each proxy's goroutines and descriptors once the
	// deployment first converged, which every heal must come back to.
	baseline map[string]chaos.Resources

	servers   map[string]*redistest.Server // redis-1 (the first primary), redis-2 (its replica), a1..a3, b1..b3
	home      map[string]string            // each replica's own upstream: a node's name
	sentinels []*redistest.Server
	proxies   map[string]*proxyProc // proxy-a, standby, proxy-b
	nodes     []node                // every server and proxy, in a fixed order
	byAddr    map[string]string     // address → name
}

// New builds and starts the deployment for t, recording into hist: the
// proxy's binary built with -race, the regions, every server and proxy.
// It fails t if any of it cannot start.
func New(t testing.TB, hist *chaos.History) *Deployment {
	t.Helper()
	d := &Deployment{
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
	var err error
	if d.sourceA, err = hostAt(d.pair.AddrA, sourceHost); err != nil {
		t.Fatal(err)
	}
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
	}, d.replicaofPrimary)
	_, aPort0, _ := net.SplitHostPort(d.proxies["proxy-a"].addr)
	d.byAddr[net.JoinHostPort(d.sourceA, aPort0)] = "proxy-a"
	d.addProxy("standby", a, d.pair.AddrA, proxyOpts{}, d.replicaofPrimary)
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

// sourceHost is the last byte of proxy A's own address in region A, the
// address it dials the primary from: no other process of the region uses
// it.
const sourceHost = 5

// hostAt is the IPv4 address of addr's /24 whose last byte is host: a
// second address of the region addr is in.
func hostAt(addr string, host byte) (string, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return "", fmt.Errorf("a second address beside %q: %w", addr, err)
	}
	if !ip.Is4() {
		return "", fmt.Errorf("a second address beside %s: not IPv4", addr)
	}
	b := ip.As4()
	b[3] = host
	return netip.AddrFrom4(b).String(), nil
}

// addServer adds the redis-server s, named name, in ns; home is the node
// it replicates when the deployment is whole ("" for the first primary).
func (d *Deployment) addServer(name string, ns netns.Namespace, s *redistest.Server, home string) {
	d.servers[name] = s
	d.home[name] = home
	d.register(name, ns, s.Addr())
}

// register adds a node to the deployment's list, in the order of its
// start, and to the index by address.
func (d *Deployment) register(name string, ns netns.Namespace, addr string) {
	d.nodes = append(d.nodes, node{name: name, ns: ns, addr: addr})
	d.byAddr[addr] = name
}

// node returns the node named name, and fails the test if there is none:
// only the nemesis's goroutine, which runs the test, calls it.
func (d *Deployment) node(name string) node {
	n, ok := d.lookup(name)
	if !ok {
		d.t.Fatalf("no node %s", name)
	}
	return n
}

// lookup returns the node named name, if there is one; any goroutine may
// call it.
func (d *Deployment) lookup(name string) (node, bool) {
	for _, n := range d.nodes {
		if n.name == name {
			return n, true
		}
	}
	return node{}, false
}

// primary asks the Sentinels which server is the primary and returns its
// name; "" when none answers.
func (d *Deployment) primary() string {
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
func (d *Deployment) replicaofPrimary() []string {
	name := d.primary()
	if name == "" {
		d.t.Fatal("no Sentinel names the primary")
	}
	host, port, _ := net.SplitHostPort(d.node(name).addr)
	return []string{"--replicaof", host, port}
}

// replicaNames is every redis-server but the primary, as the Sentinels
// name it now.
func (d *Deployment) replicaNames() []string { return d.serversBut(d.primary()) }

// serversBut is every redis-server but primary, in the order of their
// start.
func (d *Deployment) serversBut(primary string) []string {
	var names []string
	for _, n := range d.nodes {
		if _, ok := d.servers[n.name]; ok && n.name != primary {
			names = append(names, n.name)
		}
	}
	return names
}

// waitSentinelsKnow waits until every Sentinel lists the proxies of the
// primary and its redis-server replica as replicas of primary, up and
// connected: Sentinel learns replicas from the primary's INFO every 10 s,
// and moves at a failover only those it knows, as an operator would check
// before taking a primary down. It waits at most 30 s, and notes it in the
// history if that was not enough (the failover's cost then shows why).
func (d *Deployment) waitSentinelsKnow(f chaos.Fault, primary string) {
	want := []string{"proxy-a", "standby"}
	for name := range d.servers {
		if strings.HasPrefix(name, "redis-") && name != primary {
			want = append(want, name)
		}
	}
	var missing []string
	ok := pollEvery(30*time.Second, 250*time.Millisecond, func() bool {
		missing = nil
		for _, s := range d.sentinels {
			c, err := dialNode(node{ns: d.pair.A, addr: s.Addr()})
			if err != nil {
				missing = append(missing, s.Addr()+": "+err.Error())
				continue
			}
			v, err := c.Do("SENTINEL", "REPLICAS", masterName)
			c.Close()
			if err != nil {
				missing = append(missing, s.Addr()+": "+err.Error())
				continue
			}
			var replicas [][]string
			for _, r := range v.Array() {
				var kv []string
				for _, x := range r.Array() {
					kv = append(kv, x.String())
				}
				replicas = append(replicas, kv)
			}
			known := d.knownReplicas(replicas)
			for _, w := range want {
				if !known[w] {
					missing = append(missing, s.Addr()+" lacks "+w)
				}
			}
		}
		return len(missing) == 0
	})
	if !ok {
		d.hist.Record(chaos.Event{Action: chaos.ActNote, Kind: f.Kind, Detail: "Sentinels still incomplete after 30 s: " + strings.Join(missing, "; ")})
	}
}

// knownReplicas names the replicas of a SENTINEL REPLICAS reply (each a
// flat list of field names and values) that the Sentinel sees up and
// connected, by the deployment's names; a replica at an address of none of
// its nodes is left out.
func (d *Deployment) knownReplicas(replicas [][]string) map[string]bool {
	known := map[string]bool{}
	for _, kv := range replicas {
		fields := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			fields[kv[i]] = kv[i+1]
		}
		if strings.Contains(fields["flags"], "down") || strings.Contains(fields["flags"], "disconnected") {
			continue
		}
		if name, ok := d.byAddr[net.JoinHostPort(fields["ip"], fields["port"])]; ok {
			known[name] = true
		}
	}
	return known
}

// waitProxiesFollow waits until Sentinel has moved the proxies of the
// primary (proxy A, the standby) to the new primary, as it moves every
// replica it knows of; the old primary is restarted only then, since a
// proxy still dialing it would reach an empty server of another history.
// A proxy that does not follow within the failover timeout is a violation.
func (d *Deployment) waitProxiesFollow(f chaos.Fault) {
	p := d.primary()
	_, port, _ := net.SplitHostPort(d.node(p).addr)
	for _, name := range []string{"proxy-a", "standby"} {
		var was string
		ok := redistest.Poll(30*time.Second, func() bool {
			m, err := info(d.node(name), "replication")
			if err != nil {
				return false
			}
			was = m["master_host"] + ":" + m["master_port"]
			return m["master_port"] == port
		})
		if !ok {
			d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckConverge,
				Detail: fmt.Sprintf("%s still replicates %s 30 s after Sentinel promoted %s", name, was, p)})
			continue
		}
		d.hist.Record(chaos.Event{Action: chaos.ActNote, Kind: f.Kind, Target: name, Detail: "moved by Sentinel to " + p})
	}
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

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

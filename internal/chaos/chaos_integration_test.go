package chaos

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
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

// The run's flags. With none, TestChaos is the 90-second run with a fixed
// seed that `make test` keeps working; `make chaos` sets all three. Seed 41
// is the default because its first 90 s hold every kind of this slice,
// proxy A's kill (and the moves to the standby and back) included.
var (
	flagDuration = flag.Duration("chaos.duration", 90*time.Second, "how long the nemesis keeps picking faults")
	flagSeed     = flag.Uint64("chaos.seed", 41, "the nemesis's seed")
	flagReport   = flag.String("chaos.report", "", "where to write the Markdown report (default: the test's log only)")
)

const (
	// wanRate is the WAN's bandwidth each way, as the issue asks.
	wanRate = 100e6
	// replTimeout is the proxies' repl-timeout: short, so that a stopped or
	// cut link is given up and redialed within seconds (the WAN test's 10 s,
	// which a loaded machine with -race proxies needs).
	replTimeout = 10 * time.Second
	// convergeBound is how long every replica has, once writes pause after
	// a heal, to reach the primary's DEBUG DIGEST.
	convergeBound = 60 * time.Second
	// writeRate is the load's bytes of commands per second, in a chunk
	// every writeTick; every waitEvery-th chunk ends with a WAIT.
	writeRate = 128 << 10
	writeTick = 50 * time.Millisecond
	waitEvery = 10
	// masterName is the name the Sentinels monitor the primary under.
	masterName = "chaos"
)

// notBuilt is what issue 36 asks that this slice does not do; the report
// lists it so that it never claims more than it ran.
var notBuilt = []string{
	"overlapping faults (this slice applies one fault at a time: fault, heal, converge)",
	"a proxy restarted with its dir wiped; the primary's link to proxy A cut alone; proxy A's dir filled; a storm of 1,000 idle connections; a certificate rotation",
	"TLS on the link between the proxies (it is zstd-compressed, plain TCP)",
	"checkers of proxy memory against its limits, and of goroutines and descriptors back to their baseline after each heal",
}

// TestChaos builds the deployment, runs the load and the nemesis for
// -chaos.duration, and writes the report; every violation fails the test.
func TestChaos(t *testing.T) {
	redistest.Require(t)
	netns.Require(t)
	if testing.Short() {
		t.Skip("the chaos run takes minutes")
	}
	seed, duration := *flagSeed, *flagDuration
	t.Logf("chaos: seed %d, duration %v", seed, duration)
	hist := &History{}
	d := newDeployment(t, hist)

	ctx, cancel := context.WithCancel(t.Context())
	var bg sync.WaitGroup
	defer func() {
		cancel()
		bg.Wait()
	}()
	load := &loader{d: d}
	bg.Go(func() { load.run(ctx) })
	offsets := &OffsetTracker{}
	bg.Go(func() { d.sample(ctx, offsets) })

	start := time.Now()
	if _, ok := d.converge(t, load, start); !ok {
		t.Fatalf("the deployment did not converge within %v of its start", convergeBound)
	}
	hist.Record(Event{Action: ActNote, Kind: NoFault, Detail: "deployment up and converged"})

	nem := NewNemesis(seed, replTimeout, []string{"proxy-a", "proxy-b"}, nil)
	gaps := rand.New(rand.NewPCG(seed, 1))
	var outcomes []Outcome
	for time.Since(start) < duration && ctx.Err() == nil {
		nem.Replicas = d.replicaNames(t)
		f := nem.Next()
		outcomes = append(outcomes, d.apply(t, f, load, offsets))
		// A few seconds of writes between two faults: load, not a wait
		// for a condition.
		hold(t, time.Duration(1+gaps.IntN(3))*time.Second)
	}
	cancel()
	bg.Wait()
	for _, p := range d.proxies {
		for _, path := range []string{p.logfile, p.stderr} {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("read %s: %v", path, err)
				continue
			}
			hist.Violate(ScanLog(time.Now(), filepath.Base(path), b)...)
		}
	}

	run := Run{
		Seed:       seed,
		Start:      start,
		Duration:   time.Since(start),
		Command:    fmt.Sprintf("make chaos SEED=%d DURATION=%v", seed, duration),
		Outcomes:   outcomes,
		Events:     hist.Events(),
		Violations: hist.Violations(),
		NotBuilt:   notBuilt,
	}
	var report bytes.Buffer
	if err := WriteReport(&report, run); err != nil {
		t.Fatal(err)
	}
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, report.Bytes(), 0o644); err != nil {
			t.Fatalf("write the report: %v", err)
		}
	}
	t.Logf("report:\n%s", report.Bytes())
	for _, v := range run.Violations {
		t.Errorf("violation at +%v (seed %d): %s: %s", v.At.Sub(start).Round(time.Millisecond), seed, v.Checker, v.Detail)
	}
}

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
			fmt.Sprintf("sentinel down-after-milliseconds %s 2000", masterName),
			fmt.Sprintf("sentinel failover-timeout %s 10000", masterName),
		}
		d.sentinels = append(d.sentinels, redistest.StartSentinelIn(t, a, d.pair.AddrA, conf))
	}

	d.addProxy("proxy-a", a, d.pair.AddrA, func() []string { return d.replicaofPrimary(t) })
	d.addProxy("standby", a, d.pair.AddrA, func() []string { return d.replicaofPrimary(t) })
	aHost, aPort, _ := net.SplitHostPort(d.proxies["proxy-a"].addr)
	d.addProxy("proxy-b", b, d.pair.AddrB, func() []string {
		return []string{"--replicaof", aHost, aPort, "--repl-link-compression", "zstd"}
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

func (d *deployment) addProxy(name string, ns netns.Namespace, host string, upstream func() []string) {
	p := &proxyProc{
		name: name, ns: ns, bin: d.bin, upstream: upstream,
		port:    redistest.FreePort(d.t),
		dir:     filepath.Join(d.dir, name),
		logfile: filepath.Join(d.dir, name+".log"),
		stderr:  filepath.Join(d.dir, name+".stderr"),
	}
	p.addr = net.JoinHostPort(host, strconv.Itoa(p.port))
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

// sample reads every node's replid and offset each second into offsets
// (checker 3) until ctx ends.
func (d *deployment) sample(ctx context.Context, offsets *OffsetTracker) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, n := range d.nodes {
			epoch := offsets.Epoch(n.name)
			m, err := info(n, "replication")
			if err != nil {
				continue // down, stopped or restarting: no sample
			}
			off, _ := strconv.ParseInt(m["master_repl_offset"], 10, 64)
			s := NodeState{Name: n.name, ReplID: m["master_replid"], Offset: off, Epoch: epoch}
			if v := offsets.Observe(time.Now(), s); v != nil {
				d.hist.Violate(*v)
			}
		}
	}
}

// converge pauses the load and waits until every replica has the primary's
// DEBUG DIGEST (checker 1), then checks every node's replid against the
// primary's (checker 2), and resumes the load. It returns how long that
// took from since, and false (recorded as a violation) if the bound passed.
func (d *deployment) converge(t *testing.T, load *loader, since time.Time) (time.Duration, bool) {
	load.pause()
	defer load.resume()
	var behind []string
	var primary string
	ok := pollEvery(convergeBound, 250*time.Millisecond, func() bool {
		primary = d.primary()
		if primary == "" {
			behind = []string{"no Sentinel names the primary"}
			return false
		}
		want, err := digest(d.node(primary))
		if err != nil {
			behind = []string{err.Error()}
			return false
		}
		var states []NodeState
		for name := range d.servers {
			if name == primary {
				continue
			}
			n := d.node(name)
			m, err := info(n, "replication")
			if err != nil {
				states = append(states, NodeState{Name: name})
				continue
			}
			dg, _ := digest(n)
			states = append(states, NodeState{Name: name, Digest: dg, LinkUp: m["master_link_status"] == "up"})
		}
		var ok bool
		ok, behind = Converged(want, states)
		return ok
	})
	took := time.Since(since)
	if ok {
		d.checkReplIDs(primary)
		return took, true
	}
	slices.Sort(behind)
	d.hist.Violate(Violation{At: time.Now(), Checker: CheckConverge,
		Detail: fmt.Sprintf("not at the primary's digest %v after the heal: %s", convergeBound, strings.Join(behind, "; "))})
	return took, false
}

// pollEvery is redistest.Poll at a gentler interval, for a condition that
// reads every node of the deployment: on two loaded cores, reading a dozen
// servers every 25 ms would be load of its own.
func pollEvery(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// checkReplIDs is checker 2 over every node but the primary p.
func (d *deployment) checkReplIDs(p string) {
	pm, err := info(d.node(p), "replication")
	if err != nil {
		d.hist.Violate(Violation{At: time.Now(), Checker: CheckReplID, Detail: err.Error()})
		return
	}
	var states []NodeState
	for _, n := range d.nodes {
		if n.name == p {
			continue
		}
		m, err := info(n, "replication")
		if err != nil {
			d.hist.Violate(Violation{At: time.Now(), Checker: CheckReplID, Detail: err.Error()})
			continue
		}
		states = append(states, NodeState{Name: n.name, ReplID: m["master_replid"]})
	}
	d.hist.Violate(CheckReplIDs(time.Now(), pm["master_replid"], pm["master_replid2"], states)...)
}

func digest(n node) (string, error) {
	c, err := dialNode(n)
	if err != nil {
		return "", err
	}
	defer c.Close()
	v, err := c.Do("DEBUG", "DIGEST")
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", n.name, err)
	}
	return v.String(), nil
}

// fullSyncs reads the full syncs served so far by the primary's tier and
// the proxies', node by node. Every node is up at a fault's start and after
// its convergence, so a node that does not answer within 10 s is left out
// and named in the second result, rather than counted from zero.
func (d *deployment) fullSyncs(t *testing.T) (map[string]int64, []string) {
	counts := map[string]int64{}
	var missing []string
	for _, name := range []string{"redis-1", "redis-2", "proxy-a", "standby", "proxy-b"} {
		redistest.Poll(10*time.Second, func() bool {
			m, err := info(d.node(name), "stats")
			if err != nil {
				return false
			}
			n, err := strconv.ParseInt(m["sync_full"], 10, 64)
			if err != nil {
				return false
			}
			counts[name] = n
			return true
		})
		if _, ok := counts[name]; !ok {
			missing = append(missing, name)
		}
	}
	return counts, missing
}

// caused is the cost of a fault from the counters before and after it,
// over the nodes read both times, and each node's share for the history.
func caused(before, after map[string]int64) (Cost, string) {
	var c Cost
	var shares []string
	for _, name := range []string{"redis-1", "redis-2", "proxy-a", "standby", "proxy-b"} {
		b, okB := before[name]
		a, okA := after[name]
		if !okB || !okA {
			continue
		}
		delta := int(SyncDelta(b, a))
		if strings.HasPrefix(name, "redis-") {
			c.Primary += delta
		} else {
			c.Proxies += delta
		}
		shares = append(shares, fmt.Sprintf("%s %d→%d", name, b, a))
	}
	return c, strings.Join(shares, ", ")
}

// apply applies f, holds it, heals it, waits for convergence and checks its
// cost; every step goes to the history.
func (d *deployment) apply(t *testing.T, f Fault, load *loader, offsets *OffsetTracker) Outcome {
	before, missingBefore := d.fullSyncs(t)
	at := time.Now()
	rec := func(a Action, target, detail string) {
		d.hist.Record(Event{Action: a, Kind: f.Kind, Target: target, Detail: detail})
	}
	switch f.Kind {
	case ProxyKill:
		p := d.proxies[f.Target]
		p.kill(t)
		rec(ActFault, f.Target, "SIGKILL")
		if f.Target == "proxy-a" {
			d.moveReplicas(t, f, "proxy-a", "standby")
		}
		hold(t, f.Hold)
		p.start(t)
		rec(ActHeal, f.Target, "restarted on the same dir")
		if f.Target == "proxy-a" {
			d.waitCaughtUp(t, "proxy-a", "standby")
			d.moveReplicas(t, f, "standby", "proxy-a")
		}
	case ProxyStop:
		p := d.proxies[f.Target]
		p.signal(t, syscall.SIGSTOP)
		rec(ActFault, f.Target, fmt.Sprintf("SIGSTOP for %v", f.Hold))
		hold(t, f.Hold)
		p.signal(t, syscall.SIGCONT)
		rec(ActHeal, f.Target, "SIGCONT")
	case ReplicaKill:
		s := d.servers[f.Target]
		s.Kill()
		offsets.Forget(f.Target)
		rec(ActFault, f.Target, "SIGKILL")
		hold(t, f.Hold)
		s.Restart()
		d.rejoin(t, f)
	case WANCut:
		if err := d.pair.Cut(); err != nil {
			t.Fatal(err)
		}
		rec(ActFault, "", fmt.Sprintf("cut for %v", f.Hold))
		hold(t, f.Hold)
		if err := d.pair.Restore(); err != nil {
			t.Fatal(err)
		}
		rec(ActHeal, "", "restored")
	case PrimaryKill:
		old := d.primary()
		f.Target = old
		d.waitSentinelsKnow(t, f, old)
		d.servers[old].Kill()
		offsets.Forget(old)
		rec(ActFault, old, "SIGKILL of the primary")
		failedOver := redistest.Poll(30*time.Second, func() bool {
			p := d.primary()
			return p != "" && p != old
		})
		if !failedOver {
			d.hist.Violate(Violation{At: time.Now(), Checker: CheckConverge,
				Detail: fmt.Sprintf("no failover within 30 s of the kill of the primary %s", old)})
		} else {
			rec(ActNote, d.primary(), "promoted by Sentinel")
			d.waitProxiesFollow(t, f)
		}
		hold(t, f.Hold)
		d.servers[old].Restart()
		d.rejoin(t, f)
	case ConfigSet:
		n := d.node(f.Target)
		c, err := dialNode(n)
		if err != nil {
			t.Fatal(err)
		}
		v, err := c.Do("CONFIG", "GET", f.Setting)
		c.Close()
		if err != nil || len(v.Array()) != 2 {
			t.Fatalf("CONFIG GET %s on %s: %v %v", f.Setting, f.Target, v, err)
		}
		was := v.Array()[1].String()
		if err := do(n, "CONFIG", "SET", f.Setting, f.Value); err != nil {
			t.Fatal(err)
		}
		rec(ActFault, f.Target, fmt.Sprintf("CONFIG SET %s %q (was %q)", f.Setting, f.Value, was))
		hold(t, f.Hold)
		if err := do(n, "CONFIG", "SET", f.Setting, was); err != nil {
			t.Fatal(err)
		}
		rec(ActHeal, f.Target, fmt.Sprintf("CONFIG SET %s %q", f.Setting, was))
	}
	healed := time.Now()
	took, ok := d.converge(t, load, healed)
	rec(ActNote, "", fmt.Sprintf("converged in %v: %v", took.Round(time.Millisecond), ok))
	want := Expected(f.Kind, f.Kind == ReplicaKill && !strings.HasPrefix(f.Target, "redis-"))
	after, missingAfter := d.fullSyncs(t)
	got, shares := caused(before, after)
	if missing := slices.Concat(missingBefore, missingAfter); len(missing) > 0 {
		rec(ActNote, "", fmt.Sprintf("sync_full unread on %v: left out of the cost", missing))
	}
	rec(ActNote, "", "sync_full "+shares)
	d.hist.Violate(CheckCost(time.Now(), f, want, got)...)
	return Outcome{Fault: f, At: at, Converge: took, Converged: ok, Want: want, Got: got}
}

// waitSentinelsKnow waits until every Sentinel lists the proxies of the
// primary and its redis-server replica as replicas of primary, up and
// connected: Sentinel learns replicas from the primary's INFO every 10 s,
// and moves at a failover only those it knows, as an operator would check
// before taking a primary down. It waits at most 30 s, and notes it in the
// history if that was not enough (the failover's cost then shows why).
func (d *deployment) waitSentinelsKnow(t *testing.T, f Fault, primary string) {
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
			known := map[string]bool{}
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
			for _, r := range v.Array() {
				fields := map[string]string{}
				kv := r.Array()
				for i := 0; i+1 < len(kv); i += 2 {
					fields[kv[i].String()] = kv[i+1].String()
				}
				if !strings.Contains(fields["flags"], "down") && !strings.Contains(fields["flags"], "disconnected") {
					known[d.byAddr[net.JoinHostPort(fields["ip"], fields["port"])]] = true
				}
			}
			for _, w := range want {
				if !known[w] {
					missing = append(missing, s.Addr()+" lacks "+w)
				}
			}
		}
		return len(missing) == 0
	})
	if !ok {
		d.hist.Record(Event{Action: ActNote, Kind: f.Kind, Detail: "Sentinels still incomplete after 30 s: " + strings.Join(missing, "; ")})
	}
}

// waitProxiesFollow waits until Sentinel has moved the proxies of the
// primary (proxy A, the standby) to the new primary, as it moves every
// replica it knows of; the old primary is restarted only then, since a
// proxy still dialing it would reach an empty server of another history.
// A proxy that does not follow within the failover timeout is a violation.
func (d *deployment) waitProxiesFollow(t *testing.T, f Fault) {
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
			d.hist.Violate(Violation{At: time.Now(), Checker: CheckConverge,
				Detail: fmt.Sprintf("%s still replicates %s 30 s after Sentinel promoted %s", name, was, p)})
			continue
		}
		d.hist.Record(Event{Action: ActNote, Kind: f.Kind, Target: name, Detail: "moved by Sentinel to " + p})
	}
}

// rejoin points a restarted redis-server at its upstream, as an
// orchestrator would: its home, or for redis-1 and redis-2 the primary
// the Sentinels name now (a restarted redis-server forgets its REPLICAOF).
func (d *deployment) rejoin(t *testing.T, f Fault) {
	up := d.home[f.Target]
	if strings.HasPrefix(f.Target, "redis-") {
		up = d.primary()
	}
	host, port, _ := net.SplitHostPort(d.node(up).addr)
	if err := do(d.node(f.Target), "REPLICAOF", host, port); err != nil {
		t.Fatal(err)
	}
	d.hist.Record(Event{Action: ActHeal, Kind: f.Kind, Target: f.Target, Detail: "restarted, REPLICAOF " + up})
}

// moveReplicas points the replicas whose home is proxy A at to, as an
// orchestrator would when from dies or comes back.
func (d *deployment) moveReplicas(t *testing.T, f Fault, from, to string) {
	host, port, _ := net.SplitHostPort(d.node(to).addr)
	for _, name := range []string{"a1", "a2", "a3"} {
		if err := do(d.node(name), "REPLICAOF", host, port); err != nil {
			t.Fatal(err)
		}
	}
	d.hist.Record(Event{Action: ActMove, Kind: f.Kind, Target: "a1,a2,a3", Detail: from + " → " + to})
}

// waitCaughtUp waits until proxy name's offset reaches other's, so that the
// replicas moved back to it find their offset in its history, as an
// orchestrator would wait before moving them.
func (d *deployment) waitCaughtUp(t *testing.T, name, other string) {
	ok := redistest.Poll(convergeBound, func() bool {
		m, err := info(d.node(name), "replication")
		if err != nil || m["master_link_status"] != "up" {
			return false
		}
		o, err := info(d.node(other), "replication")
		if err != nil {
			return false
		}
		mine, _ := strconv.ParseInt(m["master_repl_offset"], 10, 64)
		theirs, _ := strconv.ParseInt(o["master_repl_offset"], 10, 64)
		return mine >= theirs
	})
	if !ok {
		d.hist.Violate(Violation{At: time.Now(), Checker: CheckConverge,
			Detail: fmt.Sprintf("%s did not reach %s's offset within %v of its restart", name, other, convergeBound)})
	}
}

// hold waits out a fault's duration: the outage itself, not a
// synchronisation.
func hold(t *testing.T, d time.Duration) {
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
}

// proxyProc is one proxy process of the real binary, restarted on the same
// dir, port and log; its stderr (where the race detector and a panic
// write) is appended to a file of its own.
type proxyProc struct {
	name, bin       string
	ns              netns.Namespace
	port            int
	addr            string
	dir             string
	logfile, stderr string
	upstream        func() []string // its --replicaof and link directives, asked at each start
	cmd             *exec.Cmd       // the running process; owned by the test's goroutine
	exited          <-chan error
}

func (p *proxyProc) start(t *testing.T) {
	t.Helper()
	host, _, _ := net.SplitHostPort(p.addr)
	args := append([]string{"--bind", host, "--port", strconv.Itoa(p.port), "--protected-mode", "no",
		"--dir", p.dir, "--logfile", p.logfile, "--repl-timeout", strconv.Itoa(int(replTimeout / time.Second))},
		p.upstream()...)
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
// server the Sentinels name the primary, a WAIT every waitEvery chunks.
type loader struct {
	d      *deployment
	paused atomic.Bool // set by the nemesis while it waits for convergence
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

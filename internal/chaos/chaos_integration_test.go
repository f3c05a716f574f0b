package chaos

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

package deploy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/redistest"
)

// The nemesis's side of the run: each kind of fault applied to the
// deployment, held and healed, with the moves an orchestrator would make
// meanwhile; then what it cost.

// stormConns is how many idle connections a [chaos.ConnStorm] opens.
const stormConns = 1000

// apply applies f, holds it, heals it, waits for convergence and checks its
// cost and the proxies' resources; every step goes to the history. A hold
// ends early when ctx ends.
func (d *Deployment) apply(ctx context.Context, f chaos.Fault, load *loader, offsets *chaos.OffsetTracker) chaos.Outcome {
	before, missingBefore := d.fullSyncs()
	at := time.Now()
	f = d.inject(ctx, f, offsets)
	took, ok := d.converge(load, time.Now())
	d.rec(f, chaos.ActNote, "", fmt.Sprintf("converged in %v: %v", took.Round(time.Millisecond), ok))
	want := f.Total()
	after, missingAfter := d.fullSyncs()
	got, shares := caused(before, after)
	if missing := slices.Concat(missingBefore, missingAfter); len(missing) > 0 {
		d.rec(f, chaos.ActNote, "", fmt.Sprintf("sync_full unread on %v: left out of the cost", missing))
	}
	d.rec(f, chaos.ActNote, "", "sync_full "+shares)
	d.hist.Violate(chaos.CheckCost(time.Now(), f, want, got)...)
	d.checkBaselines(f)
	return chaos.Outcome{Fault: f, At: at, Converge: took, Converged: ok, Want: want, Got: got}
}

// rec records one step of f in the history.
func (d *Deployment) rec(f chaos.Fault, a chaos.Action, target, detail string) {
	d.hist.Record(chaos.Event{Action: a, Kind: f.Kind, Target: target, Detail: detail})
}

// inject applies f, holds it and heals it, and returns it with its target
// filled in where the deployment chose it (the primary a [chaos.PrimaryKill] kills).
func (d *Deployment) inject(ctx context.Context, f chaos.Fault, offsets *chaos.OffsetTracker) chaos.Fault {
	f, heal := d.start(f, offsets)
	if f.Inner == nil {
		hold(ctx, f.Hold)
		heal()
		return f
	}
	lead, rest := nestedHolds(f.Hold, f.Inner.Hold)
	hold(ctx, lead)
	in, healInner := d.start(*f.Inner, offsets)
	f.Inner = &in
	hold(ctx, in.Hold)
	healInner()
	hold(ctx, rest)
	heal()
	return f
}

// nestedHolds is how long a fault held for outer holds alone before a
// fault held for inner starts inside it (half its hold, at most 2 s), and
// after that one's heal before its own (the rest of its hold, at least
// 1 s): the inner fault is always healed first.
func nestedHolds(outer, inner time.Duration) (lead, rest time.Duration) {
	lead = min(outer/2, 2*time.Second)
	return lead, max(outer-lead-inner, time.Second)
}

// start applies f and returns it (its target filled in where the
// deployment chose it) with its heal.
func (d *Deployment) start(f chaos.Fault, offsets *chaos.OffsetTracker) (chaos.Fault, func()) {
	switch f.Kind {
	case chaos.ProxyKill:
		return f, d.proxyKill(f)
	case chaos.ProxyStop:
		p := d.proxies[f.Target]
		p.signal(d.t, syscall.SIGSTOP)
		d.rec(f, chaos.ActFault, f.Target, fmt.Sprintf("SIGSTOP for %v", f.Hold))
		return f, func() {
			p.signal(d.t, syscall.SIGCONT)
			d.rec(f, chaos.ActHeal, f.Target, "SIGCONT")
		}
	case chaos.ReplicaKill:
		s := d.servers[f.Target]
		s.Kill()
		offsets.Forget(f.Target)
		d.rec(f, chaos.ActFault, f.Target, "SIGKILL")
		return f, func() {
			s.Restart()
			d.rejoin(f)
		}
	case chaos.WANCut:
		if err := d.pair.Cut(); err != nil {
			d.t.Fatal(err)
		}
		d.rec(f, chaos.ActFault, "", fmt.Sprintf("cut for %v", f.Hold))
		return f, func() {
			if err := d.pair.Restore(); err != nil {
				d.t.Fatal(err)
			}
			d.rec(f, chaos.ActHeal, "", "restored")
		}
	case chaos.PrimaryKill:
		return d.primaryKill(f, offsets)
	case chaos.ConfigSet:
		return f, d.configSet(f)
	case chaos.ProxyWipe:
		return f, d.proxyWipe(f, offsets)
	case chaos.DiskFull:
		return f, d.diskFull(f)
	case chaos.ConnStorm:
		return f, d.connStorm(f)
	case chaos.CertRotate:
		return f, d.certRotate(f)
	case chaos.LinkCut:
		return f, d.linkCut(f)
	}
	d.t.Fatalf("no fault of kind %v", f.Kind)
	return f, nil
}

// proxyKill kills a proxy, to be restarted on the same dir. Proxy A's
// replicas go to the standby meanwhile; proxy B's wait for it, since no
// other proxy is in their region.
func (d *Deployment) proxyKill(f chaos.Fault) (heal func()) {
	p := d.proxies[f.Target]
	p.kill(d.t)
	d.rec(f, chaos.ActFault, f.Target, "SIGKILL")
	aReplicas := []string{"a1", "a2", "a3"}
	if f.Target == "proxy-a" {
		d.moveReplicas(f, aReplicas, "proxy-a", "standby")
	}
	return func() {
		p.start(d.t)
		d.rec(f, chaos.ActHeal, f.Target, "restarted on the same dir")
		if f.Target == "proxy-a" {
			d.waitCaughtUp("proxy-a", "standby")
			d.moveReplicas(f, aReplicas, "standby", "proxy-a")
		}
	}
}

// proxyWipe kills a proxy and empties its dir, to be restarted there: a
// proxy replaced by a new machine. Everything behind it is moved meanwhile,
// as an orchestrator would (proxy A's replicas and proxy B to the standby,
// proxy B's replicas across the WAN to proxy A), and back once it has
// caught up.
func (d *Deployment) proxyWipe(f chaos.Fault, offsets *chaos.OffsetTracker) (heal func()) {
	p := d.proxies[f.Target]
	moved, stand := wipeMoves(f.Target)
	p.kill(d.t)
	if err := emptyDir(p.dir); err != nil {
		d.t.Fatal(err)
	}
	// A new incarnation: it starts from its upstream's snapshot, which may
	// be older than where it was.
	offsets.Forget(f.Target)
	d.rec(f, chaos.ActFault, f.Target, "SIGKILL, dir emptied")
	d.moveReplicas(f, moved, f.Target, stand)
	return func() {
		p.start(d.t)
		d.rec(f, chaos.ActHeal, f.Target, "restarted on the empty dir")
		d.waitCaughtUp(f.Target, stand)
		// The replicas moved away may be behind where the restarted proxy's
		// new history starts (a WAN cut inside kept proxy B from the
		// standby): an orchestrator moves a replica back once it has caught
		// up where it is, or it would need a full sync.
		for _, r := range moved {
			d.waitCaughtUp(r, stand)
		}
		d.moveReplicas(f, moved, stand, f.Target)
	}
}

// wipeMoves is what is moved away from a wiped proxy, and where to: proxy
// A's replicas and proxy B to the standby, proxy B's replicas across the
// WAN to proxy A.
func wipeMoves(target string) (moved []string, stand string) {
	if target == "proxy-b" {
		return []string{"b1", "b2", "b3"}, "proxy-a"
	}
	return []string{"a1", "a2", "a3", "proxy-b"}, "standby"
}

// primaryKill kills the primary and waits for Sentinel to promote its
// replica and move the proxies; its heal restarts the old primary as a
// replica of the new one. The fault it returns names the old primary.
func (d *Deployment) primaryKill(f chaos.Fault, offsets *chaos.OffsetTracker) (chaos.Fault, func()) {
	old := d.primary()
	f.Target = old
	d.waitSentinelsKnow(f, old)
	d.servers[old].Kill()
	offsets.Forget(old)
	d.rec(f, chaos.ActFault, old, "SIGKILL of the primary")
	failedOver := redistest.Poll(30*time.Second, func() bool {
		p := d.primary()
		return p != "" && p != old
	})
	if !failedOver {
		d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckConverge,
			Detail: fmt.Sprintf("no failover within 30 s of the kill of the primary %s", old)})
	} else {
		d.rec(f, chaos.ActNote, d.primary(), "promoted by Sentinel")
		d.waitProxiesFollow(f)
	}
	return f, func() {
		d.servers[old].Restart()
		d.rejoin(f)
	}
}

// configSet sets a limit on a proxy under load; its heal sets it back.
func (d *Deployment) configSet(f chaos.Fault) (heal func()) {
	n := d.node(f.Target)
	c, err := dialNode(n)
	if err != nil {
		d.t.Fatal(err)
	}
	v, err := c.Do("CONFIG", "GET", f.Setting)
	c.Close()
	if err != nil || len(v.Array()) != 2 {
		d.t.Fatalf("CONFIG GET %s on %s: %v %v", f.Setting, f.Target, v, err)
	}
	was := v.Array()[1].String()
	if err := do(n, "CONFIG", "SET", f.Setting, f.Value); err != nil {
		d.t.Fatal(err)
	}
	d.rec(f, chaos.ActFault, f.Target, fmt.Sprintf("CONFIG SET %s %q (was %q)", f.Setting, f.Value, was))
	return func() {
		if err := do(n, "CONFIG", "SET", f.Setting, was); err != nil {
			d.t.Fatal(err)
		}
		d.rec(f, chaos.ActHeal, f.Target, fmt.Sprintf("CONFIG SET %s %q", f.Setting, was))
	}
}

// diskFull fills the file system under proxy A's dir with a filler file;
// its heal removes it.
func (d *Deployment) diskFull(f chaos.Fault) (heal func()) {
	filler := filepath.Join(d.fsDir, "filler")
	size, err := fillFS(d.fsDir, filler)
	if err != nil {
		d.t.Fatal(err)
	}
	d.rec(f, chaos.ActFault, f.Target, fmt.Sprintf("file system full (a %d MiB filler) for %v", size>>20, f.Hold))
	return func() {
		if err := os.Remove(filler); err != nil {
			d.t.Fatal(err)
		}
		d.rec(f, chaos.ActHeal, f.Target, "filler removed")
	}
}

// connStorm opens stormConns idle connections to a proxy from its own
// region; its heal closes them.
func (d *Deployment) connStorm(f chaos.Fault) (heal func()) {
	n := d.node(f.Target)
	var conns []net.Conn
	var dialErr error
	for range stormConns {
		c, err := n.ns.Dial("tcp", n.addr)
		if err != nil {
			dialErr = err
			break
		}
		conns = append(conns, c)
	}
	detail := fmt.Sprintf("%d idle connections for %v", len(conns), f.Hold)
	if dialErr != nil {
		detail += fmt.Sprintf(" (the next refused: %v)", dialErr)
	}
	d.rec(f, chaos.ActFault, f.Target, detail)
	return func() {
		for _, c := range conns {
			c.Close()
		}
		d.rec(f, chaos.ActHeal, f.Target, "closed")
	}
}

// certRotate gives a proxy a new certificate and key from the same CA, as
// a rotation job would (new files, then CONFIG SET); its heal checks that
// new handshakes get it (checker 8) while the links it had carry on (which
// convergence checks).
func (d *Deployment) certRotate(f chaos.Fault) (heal func()) {
	p := d.proxies[f.Target]
	d.rotations++
	cert, key := d.pki.Issue(d.t, fmt.Sprintf("%s-%d", f.Target, d.rotations))
	want, err := serialOf(cert)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := do(d.node(f.Target), "CONFIG", "SET", "tls-cert-file", cert, "tls-key-file", key); err != nil {
		d.t.Fatal(err)
	}
	p.certFile, p.keyFile = cert, key
	d.rec(f, chaos.ActFault, f.Target, "certificate rotated to serial "+want)
	return func() {
		got, err := d.servedSerial(p)
		if err != nil {
			got = err.Error()
		}
		if v := chaos.CheckServedCert(time.Now(), f.Target, want, got); v != nil {
			d.hist.Violate(*v)
		}
		d.rec(f, chaos.ActHeal, f.Target, "a new handshake got serial "+got)
	}
}

// linkCut black-holes the link between proxy A's own address and the
// primary's port; its heal restores it. Proxy A's replicas and proxy B
// stay where they are: the proxy serves them what it has, and the primary's
// backlog the rest once the link is back.
func (d *Deployment) linkCut(f chaos.Fault) (heal func()) {
	primary := d.primary()
	_, port, _ := net.SplitHostPort(d.node(primary).addr)
	p, _ := strconv.Atoi(port)
	if err := d.pair.A.CutFlow(d.sourceA, d.pair.AddrA, p); err != nil {
		d.t.Fatal(err)
	}
	d.rec(f, chaos.ActFault, f.Target, fmt.Sprintf("link from %s to the primary %s cut for %v", d.sourceA, primary, f.Hold))
	return func() {
		if err := d.pair.A.RestoreFlows(); err != nil {
			d.t.Fatal(err)
		}
		d.rec(f, chaos.ActHeal, f.Target, "restored")
	}
}

// servedSerial is the serial of the certificate p's TLS port presents to a
// new handshake, as decimal text.
func (d *Deployment) servedSerial(p *proxyProc) (string, error) {
	raw, err := p.ns.Dial("tcp", p.tlsAddr)
	if err != nil {
		return "", err
	}
	conf := d.pki.ClientConfig()
	conf.InsecureSkipVerify = true // the certificate names 127.0.0.1; only its serial is checked here
	c := tls.Client(raw, conf)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := c.Handshake(); err != nil {
		return "", fmt.Errorf("handshake with %s: %w", p.name, err)
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// serialOf is the serial of the first certificate in the PEM file path.
func serialOf(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return "", fmt.Errorf("%s: no PEM block", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return cert.SerialNumber.String(), nil
}

// rejoin points a restarted redis-server at its upstream, as an
// orchestrator would: its home, or for redis-1 and redis-2 the primary
// the Sentinels name now (a restarted redis-server forgets its REPLICAOF).
func (d *Deployment) rejoin(f chaos.Fault) {
	up := d.upstreamOf(f.Target, d.primary())
	d.replicaOf(f.Target, d.node(up).addr)
	d.rec(f, chaos.ActHeal, f.Target, "restarted, REPLICAOF "+up)
}

// upstreamOf is the node a restarted redis-server name replicates: its
// home, or for redis-1 and redis-2 primary, the one the Sentinels name.
func (d *Deployment) upstreamOf(name, primary string) string {
	if strings.HasPrefix(name, "redis-") {
		return primary
	}
	return d.home[name]
}

// replicaOf points replica name at addr. A redis-server still loading its
// dataset (its own RDB after a restart, or a full sync) refuses REPLICAOF
// with -LOADING; it is asked again, as an orchestrator would, for as long as
// convergence may take, and a replica that never takes it is a violation.
func (d *Deployment) replicaOf(name, addr string) {
	host, port, _ := net.SplitHostPort(addr)
	err := untilLoaded(convergeBound, func() error {
		return do(d.node(name), "REPLICAOF", host, port)
	})
	if err != nil {
		d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckConverge, Detail: err.Error()})
	}
}

// untilLoaded sends a command (send) again for as long as the server answers
// -LOADING, up to bound, and returns the last answer's error: nil once it
// took, another error at once, or -LOADING still at bound.
func untilLoaded(bound time.Duration, send func() error) error {
	var err error
	redistest.Poll(bound, func() bool {
		err = send()
		var re *redistest.ReplyError
		return !errors.As(err, &re) || re.Prefix() != "LOADING"
	})
	return err
}

// moveReplicas points replicas at to, as an orchestrator would when from
// dies or comes back: a redis-server at to's port, proxy B at its TLS port.
func (d *Deployment) moveReplicas(f chaos.Fault, replicas []string, from, to string) {
	for _, name := range replicas {
		d.replicaOf(name, d.addrFor(name, to))
	}
	d.rec(f, chaos.ActMove, strings.Join(replicas, ","), from+" → "+to)
}

// addrFor is the address replica dials to replicate node to: to's plain
// port for a redis-server, its TLS port for a proxy (proxy B's link is
// TLS).
func (d *Deployment) addrFor(replica, to string) string {
	if _, ok := d.proxies[replica]; ok {
		return d.proxies[to].tlsAddr
	}
	return d.node(to).addr
}

// waitCaughtUp waits until proxy name's offset reaches where other's was,
// so that the replicas moved back to it find their offset in its history,
// as an orchestrator would wait before moving them.
func (d *Deployment) waitCaughtUp(name, other string) {
	ok := redistest.Poll(convergeBound, func() bool {
		o, err := info(d.node(other), "replication")
		if err != nil {
			return false
		}
		m, err := info(d.node(name), "replication")
		if err != nil || m["master_link_status"] != "up" {
			return false
		}
		mine, _ := strconv.ParseInt(m["master_repl_offset"], 10, 64)
		theirs, _ := strconv.ParseInt(o["master_repl_offset"], 10, 64)
		return mine >= theirs
	})
	if !ok {
		d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckConverge,
			Detail: fmt.Sprintf("%s did not reach %s's offset within %v", name, other, convergeBound)})
	}
}

// hold waits out a fault's duration: the outage itself, not a
// synchronisation. It returns early when ctx ends.
func hold(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// smallFSSize is the size of the tmpfs under proxy A's dir: its stream log
// (repl-log-size 128mb) and two snapshots of the run's data, with room.
const smallFSSize = "384m"

// mountSmallFS mounts a tmpfs of smallFSSize at dir for the test and
// unmounts it at the end (after the processes, which are stopped by
// cleanups registered later, and so run first).
func mountSmallFS(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+smallFSSize, "chaos", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillFS allocates what is free on the file system at dir to the file
// filler and returns its size. A tmpfs allocates pages, so the next write
// of anyone else fails with ENOSPC.
func fillFS(dir, filler string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	free := int64(st.Bavail) * st.Bsize
	f, err := os.Create(filler)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// What is free may shrink while the proxy writes: allocate less until
	// it fits, and the last few pages with the proxy's next writes.
	for size := free; size > 0; size -= 1 << 20 {
		err = syscall.Fallocate(int(f.Fd()), 0, 0, size)
		if err == nil {
			return size, nil
		}
		if !errors.Is(err, syscall.ENOSPC) {
			break
		}
	}
	return 0, fmt.Errorf("fill %s: %w", dir, err)
}

// emptyDir removes everything in dir, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

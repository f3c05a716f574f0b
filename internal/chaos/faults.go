package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a kind of fault the nemesis applies.
type Kind int

// The fault kinds of this slice; each has its heal (see [Kind.String] for
// the names the report uses).
const (
	// ProxyKill is a SIGKILL of proxy A or B, healed by a restart on the
	// same dir; A's replicas are moved to the standby meanwhile and back.
	ProxyKill Kind = iota
	// ProxyStop is a SIGSTOP of proxy A or B past its repl-timeout, healed
	// by SIGCONT.
	ProxyStop
	// ReplicaKill is a SIGKILL of one redis-server replica, healed by a
	// restart (an empty server, so one full sync from its upstream).
	ReplicaKill
	// WANCut black-holes the WAN between the regions for a while, healed by
	// restoring it.
	WANCut
	// PrimaryKill is a SIGKILL of the primary: Sentinel promotes its
	// replica and moves the proxies; healed by restarting the old primary
	// as a replica of the new one.
	PrimaryKill
	// ConfigSet is a CONFIG SET of a limit on a proxy under load, healed by
	// setting the value it had.
	ConfigSet
	// ProxyWipe is a SIGKILL of proxy A or B whose dir is then emptied,
	// healed by a restart on the empty dir. The replicas behind it are moved
	// meanwhile, as an orchestrator would (A's to the standby, B's across
	// the WAN to proxy A), and back once it has caught up.
	ProxyWipe
	// DiskFull fills the small file system that holds proxy A's dir, healed
	// by removing the filler.
	DiskFull
	// ConnStorm opens 1,000 idle connections to a proxy, healed by closing
	// them.
	ConnStorm
	// CertRotate gives a proxy a new certificate and key (CONFIG SET
	// tls-cert-file tls-key-file, as a rotation job would); its heal checks
	// that new handshakes get the new certificate while the links it had
	// carry on.
	CertRotate
	// LinkCut black-holes the primary's link to proxy A alone (proxy A
	// dials from an address of its own, which the cut singles out), healed
	// by restoring it.
	LinkCut
	numKinds
)

// NoFault marks an event of the history that belongs to no fault (the
// deployment's start).
const NoFault Kind = -1

// Kinds lists every kind, in the report's order.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// ParseKinds parses a comma-separated list of kinds' names.
func ParseKinds(names string) ([]Kind, error) {
	var ks []Kind
	for name := range strings.SplitSeq(names, ",") {
		i := slices.IndexFunc(Kinds(), func(k Kind) bool { return k.String() == strings.TrimSpace(name) })
		if i < 0 {
			return nil, fmt.Errorf("chaos: no fault kind %q", name)
		}
		ks = append(ks, Kind(i))
	}
	return ks, nil
}

func (k Kind) String() string {
	switch k {
	case NoFault:
		return "-"
	case ProxyKill:
		return "proxy-kill"
	case ProxyStop:
		return "proxy-stop"
	case ReplicaKill:
		return "replica-kill"
	case WANCut:
		return "wan-cut"
	case PrimaryKill:
		return "primary-kill"
	case ConfigSet:
		return "config-set"
	case ProxyWipe:
		return "proxy-wipe"
	case DiskFull:
		return "disk-full"
	case ConnStorm:
		return "conn-storm"
	case CertRotate:
		return "cert-rotate"
	case LinkCut:
		return "link-cut"
	}
	return "unknown"
}

// Cost is what a fault may cost in full syncs, counted as the increase of
// sync_full between the fault and the convergence after its heal.
type Cost struct {
	// Primary is the most full syncs the redis-servers of region A (the
	// primary and its replica, whichever is primary) may serve: forks.
	Primary int
	// Proxies is the most full syncs the proxies (A, B, the standby) may
	// serve: the full syncs behind the proxies.
	Proxies int
}

// Expected is the table of what each kind may cost. A proxy SIGKILL or
// SIGSTOP, a WAN cut the log covers, a failover and a CONFIG SET cost no
// full sync behind the proxies; a killed replica restarts empty, so its
// upstream serves it one, and behind a proxy that may cost one fork at the
// primary too, as docs/durable-history.md's Forks says: a proxy whose
// snapshot predates a replid change (a failover) or the log fetches a new
// one when a replica needs a full sync, never more often than the replica
// attached directly would make the primary fork; the killed primary
// restarts empty and rejoins as a replica of the new primary, one fork
// there. A wiped proxy syncs afresh from its upstream: one fork at the
// primary at most (proxy A's own sync, or proxy A fetching a snapshot for
// proxy B's), and for proxy B one full sync served by proxy A; the
// replicas moved away and back continue.
//
// target is the fault's: a replica named redis-* replicates the primary's
// tier directly, any other replica is behind a proxy. Behind proxy B (b*),
// the snapshot may cross both proxies: proxy B fetches it from proxy A
// over its link when its own is too old (after a failover), and that fetch
// is a full sync proxy A serves.
func Expected(k Kind, target string) Cost {
	replicaBehindProxy := !strings.HasPrefix(target, "redis-")
	switch k {
	case ProxyWipe:
		if target == "proxy-b" {
			return Cost{Primary: 1, Proxies: 1}
		}
		return Cost{Primary: 1, Proxies: 0}
	case ReplicaKill:
		if strings.HasPrefix(target, "b") {
			return Cost{Primary: 1, Proxies: 2}
		}
		if replicaBehindProxy {
			return Cost{Primary: 1, Proxies: 1}
		}
		return Cost{Primary: 1, Proxies: 0}
	case PrimaryKill:
		return Cost{Primary: 1, Proxies: 0}
	}
	return Cost{}
}

// Fault is one fault the nemesis chose: its kind, its target (a node's
// name; "" for the WAN) and how long it lasts before its heal.
type Fault struct {
	Kind   Kind
	Target string
	Hold   time.Duration
	// Setting and Value are a ConfigSet's directive and new value.
	Setting, Value string
	// Inner, when not nil, is a second fault applied while this one holds
	// and healed before it is: two faults at once (see [Compatible]).
	Inner *Fault
}

// Name names f for the history and violations: its kind and target, and
// its inner fault's.
func (f Fault) Name() string {
	name := fmt.Sprintf("%s of %s", f.Kind, orWAN(f.Target))
	if f.Inner != nil {
		name += fmt.Sprintf(" (with %s of %s inside)", f.Inner.Kind, orWAN(f.Inner.Target))
	}
	return name
}

// Total is what f may cost with its inner fault: the sum of both, and for
// proxy A's disk full together with a fault that parts proxy B from proxy A
// (detachesProxyB), what an outage the stream log cannot cover costs. Proxy
// A's log stops at the full disk and starts again afterwards as a new
// generation from memory, so while it is down proxy A keeps what a
// redis-server would, repl-backlog-size (1 MB, 8 s of the load); once proxy
// B's offset has left it, proxy B syncs afresh from a snapshot proxy A
// fetches (one fork) and its three replicas from proxy B.
func (f Fault) Total() Cost {
	c := Expected(f.Kind, f.Target)
	if f.Inner != nil {
		in := Expected(f.Inner.Kind, f.Inner.Target)
		c.Primary += in.Primary
		c.Proxies += in.Proxies
		if f.Kind == DiskFull && detachesProxyB(*f.Inner) || f.Inner.Kind == DiskFull && detachesProxyB(f) {
			c.Primary++
			c.Proxies += 4
		}
	}
	return c
}

// detachesProxyB reports whether f parts proxy B from proxy A's stream for
// a while and lets it continue from where it was: a WAN cut, proxy B killed
// (restarted on its dir) or stopped. A wipe of proxy B is not among them:
// it syncs afresh whatever proxy A holds, and its replicas, moved to proxy
// A at once, continue there.
func detachesProxyB(f Fault) bool {
	return f.Kind == WANCut || f.Target == "proxy-b" && (f.Kind == ProxyKill || f.Kind == ProxyStop)
}

// innerKinds are the kinds that may start while another fault holds:
// those whose start and heal need nothing of the rest of the deployment
// but their target. A failover waits for every proxy to follow, a wiped or
// killed proxy's heal for its replicas to be moved back: such a fault is
// only ever the outer one.
var innerKinds = map[Kind]bool{
	ProxyStop: true, ReplicaKill: true, WANCut: true, ConfigSet: true,
	DiskFull: true, ConnStorm: true, CertRotate: true, LinkCut: true,
}

// proxyDown reports whether f takes its target proxy down (it cannot be
// configured, stormed or cut meanwhile).
func proxyDown(f Fault) bool {
	return f.Kind == ProxyKill || f.Kind == ProxyWipe || f.Kind == ProxyStop
}

// Compatible reports whether inner may start while outer holds: a kind of
// innerKinds other than outer's, never at a proxy outer took down (disk-full
// and link-cut are at proxy A), never a replica killed during a failover
// (the list of replicas changes with it), and never a storm of connections
// with a CONFIG SET on the same proxy (a maxclients of 200 under 1,000
// connections would refuse the CONFIG SET that heals it).
func Compatible(outer, inner Fault) bool {
	switch {
	case !innerKinds[inner.Kind] || inner.Kind == outer.Kind:
		return false
	case proxyDown(outer) && inner.Target == outer.Target:
		return false
	case outer.Kind == PrimaryKill && inner.Kind == ReplicaKill:
		return false
	case inner.Target == outer.Target && (inner.Kind == ConnStorm && outer.Kind == ConfigSet || inner.Kind == ConfigSet && outer.Kind == ConnStorm):
		return false
	}
	return true
}

// Nemesis chooses faults from a seed: the same seed and the same targets
// give the same sequence of faults, whatever the deployment does meanwhile.
type Nemesis struct {
	rng *rand.Rand
	// ReplTimeout is the proxies' repl-timeout, which a ProxyStop outlasts.
	ReplTimeout time.Duration
	// Proxies are the proxies a ProxyKill, ProxyStop or ConfigSet targets.
	Proxies []string
	// Replicas are the redis-server replicas a ReplicaKill targets.
	Replicas []string
	// Wiped are the proxies a ProxyWipe targets; Filled is the proxy whose
	// dir a DiskFull fills and whose link to the primary a LinkCut cuts.
	Wiped  []string
	Filled string
	// Only, when not empty, is the kinds to choose from (to reproduce or
	// work on a few); empty is every kind.
	Only []Kind
}

// NewNemesis returns a nemesis seeded with seed.
func NewNemesis(seed uint64, replTimeout time.Duration, proxies, replicas []string) *Nemesis {
	return &Nemesis{
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ReplTimeout: replTimeout,
		Proxies:     proxies,
		Replicas:    replicas,
		Wiped:       proxies,
		Filled:      proxies[0],
	}
}

// configChoices are the limits a ConfigSet sets on a proxy: values a
// deployment might set under load, none of which should cost a full sync.
var configChoices = [][2]string{
	{"maxclients", "200"},
	{"maxclients", "1000"},
	{"repl-link-sync-rate-limit", "8mb"},
	{"client-output-buffer-limit", "replica 512mb 128mb 60"},
	{"repl-backlog-size", "64mb"},
}

// overlapOneIn is how often a fault has an inner one: one in two, so that
// an hour holds as many pairs as faults alone.
const overlapOneIn = 2

// Next chooses the next fault, and for one in overlapOneIn a compatible
// inner fault to apply while it holds.
func (n *Nemesis) Next() Fault {
	f := n.one()
	if n.rng.IntN(overlapOneIn) != 0 {
		return f
	}
	for range 8 {
		in := n.one()
		if Compatible(f, in) {
			f.Inner = &in
			break
		}
	}
	return f
}

// one chooses one fault.
func (n *Nemesis) one() Fault {
	var k Kind
	if len(n.Only) > 0 {
		k = n.Only[n.rng.IntN(len(n.Only))]
	} else {
		k = Kind(n.rng.IntN(int(numKinds)))
	}
	f := Fault{Kind: k}
	switch k {
	case ProxyKill:
		f.Target = n.Proxies[n.rng.IntN(len(n.Proxies))]
		f.Hold = time.Duration(2+n.rng.IntN(6)) * time.Second
	case ProxyStop:
		f.Target = n.Proxies[n.rng.IntN(len(n.Proxies))]
		f.Hold = n.ReplTimeout + time.Duration(2+n.rng.IntN(4))*time.Second
	case ReplicaKill:
		f.Target = n.Replicas[n.rng.IntN(len(n.Replicas))]
		f.Hold = time.Duration(1+n.rng.IntN(5)) * time.Second
	case WANCut:
		// 5–120 s: three cuts in four are short (5–30 s), a blip an
		// operator barely sees; one in four is long (31–120 s), the outage
		// the stream log is there to cover.
		if n.rng.IntN(4) == 0 {
			f.Hold = time.Duration(31+n.rng.IntN(90)) * time.Second
		} else {
			f.Hold = time.Duration(5+n.rng.IntN(26)) * time.Second
		}
	case PrimaryKill:
		f.Hold = time.Duration(1+n.rng.IntN(3)) * time.Second
	case ConfigSet:
		f.Target = n.Proxies[n.rng.IntN(len(n.Proxies))]
		c := configChoices[n.rng.IntN(len(configChoices))]
		f.Setting, f.Value = c[0], c[1]
		f.Hold = time.Duration(2+n.rng.IntN(6)) * time.Second
	case ProxyWipe:
		f.Target = n.Wiped[n.rng.IntN(len(n.Wiped))]
		f.Hold = time.Duration(2+n.rng.IntN(6)) * time.Second
	case DiskFull:
		f.Target = n.Filled
		f.Hold = time.Duration(5+n.rng.IntN(26)) * time.Second
	case ConnStorm:
		f.Target = n.Proxies[n.rng.IntN(len(n.Proxies))]
		f.Hold = time.Duration(2+n.rng.IntN(9)) * time.Second
	case CertRotate:
		f.Target = n.Proxies[n.rng.IntN(len(n.Proxies))]
		f.Hold = time.Duration(1+n.rng.IntN(3)) * time.Second
	case LinkCut:
		f.Target = n.Filled
		f.Hold = time.Duration(5+n.rng.IntN(36)) * time.Second
	}
	return f
}

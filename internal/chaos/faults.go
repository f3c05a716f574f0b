package chaos

import (
	"math/rand/v2"
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
// there.
func Expected(k Kind, replicaBehindProxy bool) Cost {
	switch k {
	case ReplicaKill:
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
}

// NewNemesis returns a nemesis seeded with seed.
func NewNemesis(seed uint64, replTimeout time.Duration, proxies, replicas []string) *Nemesis {
	return &Nemesis{
		rng:         rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		ReplTimeout: replTimeout,
		Proxies:     proxies,
		Replicas:    replicas,
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

// Next chooses the next fault.
func (n *Nemesis) Next() Fault {
	k := Kind(n.rng.IntN(int(numKinds)))
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
		f.Hold = time.Duration(5+n.rng.IntN(26)) * time.Second
	case PrimaryKill:
		f.Hold = time.Duration(1+n.rng.IntN(3)) * time.Second
	case ConfigSet:
		f.Target = n.Proxies[n.rng.IntN(len(n.Proxies))]
		c := configChoices[n.rng.IntN(len(configChoices))]
		f.Setting, f.Value = c[0], c[1]
		f.Hold = time.Duration(2+n.rng.IntN(6)) * time.Second
	}
	return f
}

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/replproxy/replproxy/bench/internal/cluster"
)

// topology is how N replicas get the primary's stream.
type topology int

const (
	direct  topology = iota // primary → N replicas
	chained                 // primary → one redis-server → N replicas
	proxied                 // primary → replproxy → N replicas
)

var topologies = []topology{direct, chained, proxied}

func (t topology) String() string {
	return [...]string{"direct", "chained", "proxied"}[t]
}

// variant is one configuration of the servers under a topology. Only the
// plain one is measured today; issue 10's durable history log ("log on" /
// "log off") and TLS become variants with their own proxy and server
// arguments, selected by a flag, without touching the measurements.
type variant struct {
	name      string
	proxyArgs []string // extra replproxy arguments
}

var plain = variant{name: "plain"}

// linkTimeout bounds waiting for links to come up and offsets to settle.
const linkTimeout = 5 * time.Minute

// servers is one topology's processes.
type servers struct {
	primary  *cluster.Process
	relay    *cluster.Process // the chained redis-server or the proxy; nil for direct
	replicas []*cluster.Process
}

// upstream is what the replicas replicate from.
func (s *servers) upstream() *cluster.Process {
	if s.relay != nil {
		return s.relay
	}
	return s.primary
}

// startPrimary starts the primary: diskless full syncs (Redis 7's default)
// started without delay unless delay says otherwise.
func startPrimary(ctx context.Context, c *cluster.Cluster, delay int) (*cluster.Process, error) {
	return c.StartRedis(ctx, "primary", "--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", fmt.Sprint(delay))
}

// startRelay starts the relay of t (none for direct) and waits until it is
// in sync with the primary.
func startRelay(ctx context.Context, c *cluster.Cluster, t topology, v variant, primary *cluster.Process) (*cluster.Process, error) {
	var relay *cluster.Process
	var err error
	switch t {
	case direct:
		return nil, nil
	case chained:
		relay, err = c.StartRedis(ctx, "relay", "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port),
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
	case proxied:
		relay, err = c.StartProxy(ctx, "proxy", primary, v.proxyArgs...)
	}
	if err != nil {
		return nil, err
	}
	if err := cluster.WaitLinkUp(ctx, linkTimeout, relay); err != nil {
		return nil, fmt.Errorf("%s relay: %w", t, err)
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, primary, relay); err != nil {
		return nil, fmt.Errorf("%s relay: %w", t, err)
	}
	return relay, nil
}

// startReplicas starts n redis-servers; attached, they replicate from up at
// once, otherwise they wait for ReplicaOf.
func startReplicas(ctx context.Context, c *cluster.Cluster, n int, up *cluster.Process) ([]*cluster.Process, error) {
	var out []*cluster.Process
	for i := range n {
		var args []string
		if up != nil {
			args = []string{"--replicaof", "127.0.0.1", fmt.Sprint(up.Port)}
		}
		r, err := c.StartRedis(ctx, fmt.Sprintf("replica%d", i+1), args...)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// digestsEqual compares DEBUG DIGEST of the primary and every replica.
func digestsEqual(ctx context.Context, s *servers) (bool, error) {
	want, err := s.primary.Digest(ctx)
	if err != nil {
		return false, err
	}
	for _, r := range s.replicas {
		got, err := r.Digest(ctx)
		if err != nil {
			return false, err
		}
		if got != want {
			return false, nil
		}
	}
	return true, nil
}

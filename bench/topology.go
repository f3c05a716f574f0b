package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
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

// variant is one configuration of the servers under a topology: the proxy's
// durable history log on (its default, repl-log-size 1gb) from an empty
// log, on and already full (recycling its segments), or off, and TLS on
// every replication link with the log on or off. Direct and chained runs
// have no proxy, so only TLS changes them: they run under plain or withTLS.
type variant struct {
	name      string
	proxyArgs []string // extra replproxy arguments
	tls       bool     // every replication link over TLS (cluster.EnableTLS)
	twin      string   // under TLS: the proxied variant that differs only by TLS
	log       bool     // the proxy writes its stream log
	// fullLog: the proxy's log is given -full-log-size and filled past it
	// before the run measures (fullLogFill), so that it recycles segments.
	fullLog bool
}

// fullLogArgs are the full-log variant's proxy arguments: its repl-log-size,
// smaller than the default 1gb so that the fill before each run is short
// (its segments are an eighth of it, at most 64 MiB).
func fullLogArgs(o *options) []string {
	return []string{"--repl-log-size", fmt.Sprintf("%dmb", o.fullLogMB)}
}

// fullLogFill is what a full-log run writes before it measures: the log's
// size and two segments more, so that retention has dropped a segment and
// every new one is a recycled file.
func fullLogFill(o *options) int64 {
	size := int64(o.fullLogMB) << 20
	return size + 2*min(size/8, 64<<20)
}

var (
	plain     = variant{name: "plain"}
	logOn     = variant{name: "log on", log: true}
	logFull   = variant{name: "log on, full", log: true, fullLog: true}
	logOff    = variant{name: "log off", proxyArgs: []string{"--repl-log-size", "0"}}
	withTLS   = variant{name: "TLS", tls: true, log: true, twin: logOn.name}
	tlsLogOff = variant{name: "TLS, log off", tls: true, proxyArgs: logOff.proxyArgs, twin: logOff.name}
)

// variantNamed is the variant of a name; names key the streaming points.
func variantNamed(name string) variant {
	for _, v := range []variant{plain, logOn, logFull, logOff, withTLS, tlsLogOff} {
		if v.name == name {
			return v
		}
	}
	panic("bench: unknown variant " + name)
}

// peer is the variant of the direct and chained runs that a proxied run
// under v is compared with.
func (v variant) peer() variant {
	if v.tls {
		return withTLS
	}
	return plain
}

// newCluster is a cluster for one run under v, whose proxies also get
// o's -proxy-args.
func newCluster(o *options, proxyBin string, v variant) (*cluster.Cluster, error) {
	c, err := cluster.New(proxyBin, o.proxyArgs...)
	if err != nil || !v.tls {
		return c, err
	}
	if err := c.EnableTLS(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// closeCluster closes c, stopping its servers, and keeps the first error
// in *err (deferred by every run).
func closeCluster(c *cluster.Cluster, err *error) {
	if cerr := c.Close(); *err == nil {
		*err = cerr
	}
}

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
// started without delay unless delay says otherwise, then args.
func startPrimary(ctx context.Context, c *cluster.Cluster, delay int, args ...string) (*cluster.Process, error) {
	return c.StartRedis(ctx, "primary", append([]string{"--repl-diskless-sync", "yes",
		"--repl-diskless-sync-delay", fmt.Sprint(delay)}, args...)...)
}

// noReplicaLimit lifts the replica output buffer limit (Redis's default:
// 256mb hard, 64mb for 60 s). The streaming runs give it to every server
// that feeds replicas: a replica dropped for lagging resyncs from the
// small dataset the load leaves instead of receiving the stream, which
// would make its relay look cheaper than it is.
func noReplicaLimit() []string {
	return []string{"--client-output-buffer-limit", "replica 0 0 0"}
}

// startRelay starts the relay of t (none for direct) with args after its
// own, and waits until it is in sync with the primary.
func startRelay(ctx context.Context, c *cluster.Cluster, t topology, v variant, primary *cluster.Process, args ...string) (*cluster.Process, error) {
	var relay *cluster.Process
	var err error
	switch t {
	case direct:
		return nil, nil
	case chained:
		relay, err = c.StartRedis(ctx, "relay", append([]string{"--replicaof", "127.0.0.1", fmt.Sprint(primary.ReplPort()),
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}, args...)...)
	case proxied:
		relay, err = c.StartProxy(ctx, "proxy", primary, append(slices.Clone(v.proxyArgs), args...)...)
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

// startSteady starts the primary, t's relay (with noReplicaLimit, then
// relayArgs) and n replicas of it, and returns once every replica has
// applied one write: after a diskless full sync the primary holds the
// stream back until the replica's first ACK, so that a load started then
// measures the steady state.
func startSteady(ctx context.Context, c *cluster.Cluster, t topology, v variant, n int, relayArgs ...string) (*servers, error) {
	s := &servers{}
	var err error
	if s.primary, err = startPrimary(ctx, c, 0, noReplicaLimit()...); err != nil {
		return nil, err
	}
	if s.relay, err = startRelay(ctx, c, t, v, s.primary, append(noReplicaLimit(), relayArgs...)...); err != nil {
		return nil, err
	}
	if s.replicas, err = startReplicas(ctx, c, n, s.upstream()); err != nil {
		return nil, err
	}
	if err := cluster.WaitLinkUp(ctx, linkTimeout, s.replicas...); err != nil {
		return nil, err
	}
	if err := s.primary.Client().Set(ctx, "bench:warmup", "1", 0).Err(); err != nil {
		return nil, err
	}
	if _, err := cluster.WaitOffsets(ctx, linkTimeout, s.primary, s.replicas...); err != nil {
		return nil, err
	}
	return s, nil
}

// startReplicas starts n redis-servers, all at once; attached, they
// replicate from up at once, otherwise they wait for ReplicaOf.
func startReplicas(ctx context.Context, c *cluster.Cluster, n int, up *cluster.Process) ([]*cluster.Process, error) {
	var args []string
	if up != nil {
		args = []string{"--replicaof", "127.0.0.1", fmt.Sprint(up.ReplPort())}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("replica%d", i+1)
	}
	return c.StartRedisMany(ctx, names, args...)
}

// digestsEqual compares DEBUG DIGEST of the primary and every replica.
// The replicas are asked a core's worth at a time: DEBUG DIGEST hashes
// the whole dataset (about 0.4 s for 64 MiB), so a hundred replicas asked
// one after another would take most of a minute.
func digestsEqual(ctx context.Context, s *servers) (bool, error) {
	want, err := s.primary.Digest(ctx)
	if err != nil {
		return false, err
	}
	got := make([]string, len(s.replicas))
	errs := make([]error, len(s.replicas))
	slots := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, r := range s.replicas {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			got[i], errs[i] = r.Digest(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	for _, d := range got {
		if d != want {
			return false, nil
		}
	}
	return true, nil
}

// replicaOfAll tells every replica REPLICAOF up at the same moment, one
// goroutine each, and returns once all have answered.
func replicaOfAll(ctx context.Context, replicas []*cluster.Process, up *cluster.Process) error {
	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() { errs[i] = r.ReplicaOf(ctx, up) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("REPLICAOF: %w", err)
	}
	return nil
}

package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/clusterwatch"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// Following one shard of a cluster (replicaof-cluster, cluster-shard):
// clusterwatch decides which node is the shard's primary, and the follower
// here acts on its decisions the way REPLICAOF acts: a configuration change
// that sets replicaof (configChanges), whose finish re-points the link
// (applyConfig → Link.Retarget), which reconnects with PSYNC <replid>
// <offset+1>, the partial resync a promoted replica accepts through its
// replid2. INFO's master_host and CONFIG GET replicaof therefore show the
// primary followed, and REPLICAOF and CONFIG SET replicaof are refused
// while replicaof-cluster is set (commands.go), as a cluster node refuses
// REPLICAOF.

// clusterCheckGap is the least time between two checks when the link's
// losses ask for them: a link that fails at once on every attempt (a
// primary that is down) does not turn into a check per attempt.
const clusterCheckGap = 250 * time.Millisecond

// clusterLogEvery is how often failures to find the shard's primary are
// logged at warning level while they last; in between, at debug level.
const clusterLogEvery = time.Minute

// errNotFollowing refuses a change a decision made after replicaof-cluster
// was cleared. It cannot be today (the directive is startup only), but the
// change re-reads the configuration it edits, so it says so rather than
// set replicaof behind an operator's back.
var errNotFollowing = errors.New("replicaof-cluster is not set")

// clusterFollower is Run's cluster follower actor: it checks the shard at
// start, every cluster-refresh-interval, and at once (but at most every
// clusterCheckGap) when the link is lost, and re-points the link when the
// shard's confirmed primary is another node. All its fields are read-only
// or owned by run's goroutine.
type clusterFollower struct {
	watch   *clusterwatch.Watcher // owned by run
	conf    *liveConfig
	changes *configChanges
	lost    <-chan struct{} // the link's Lost: the follower is its one reader
	log     hclog.Logger
	counts  clusterCounts

	// warnedAt is when a failure was last logged at warning level (zero
	// after a success), and suppressed how many were logged at debug level
	// since; owned by run.
	warnedAt   time.Time
	suppressed int
}

// clusterCounts are the follower's counters (INFO proxy's cluster_*),
// atomics the server owns and the follower only adds to, and the shard's
// slots it last found (cluster_slots, CLUSTER SHARDS and SLOTS), which it
// alone stores.
type clusterCounts struct {
	checks, failures, changes *atomic.Int64
	slots                     *atomic.Pointer[[]clustertopo.SlotRange]
}

// newClusterFollower returns the follower of the shard cfg names, which
// re-points the link whose Lost is lost through changes.
func newClusterFollower(cfg *config.Config, conf *liveConfig, changes *configChanges, lost <-chan struct{},
	counts clusterCounts, log hclog.Logger) (*clusterFollower, error) {
	sel, err := clustertopo.ParseSelector(cfg.ClusterShard)
	if err != nil {
		return nil, err
	}
	w, err := clusterwatch.New(clusterwatch.Config{Seeds: cfg.ClusterSeedAddrs(), Shard: sel})
	if err != nil {
		return nil, err
	}
	return &clusterFollower{watch: w, conf: conf, changes: changes, lost: lost, counts: counts, log: log}, nil
}

// run checks the shard until ctx ends, then returns nil.
func (f *clusterFollower) run(ctx context.Context) error {
	cfg := f.conf.config()
	f.log.Info("following a cluster shard", "cluster-shard", cfg.ClusterShard,
		"seeds", strings.Join(cfg.ClusterSeedAddrs(), " "), "refresh-ms", cfg.ClusterRefreshInterval.Milliseconds())
	timer := time.NewTimer(0) // the first check at once
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-f.lost:
			if wait := clusterCheckGap - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		f.check(ctx)
		timer.Reset(f.conf.config().ClusterRefreshInterval)
	}
}

// check asks the watcher once and acts on its decision.
func (f *clusterFollower) check(ctx context.Context) {
	cfg := f.conf.config()
	current := ""
	if cfg.MasterHost != "" {
		current = net.JoinHostPort(cfg.MasterHost, strconv.Itoa(cfg.MasterPort))
	}
	d := f.watch.Check(ctx, current, f.options(cfg))
	if ctx.Err() != nil {
		return
	}
	f.counts.checks.Add(1)
	if d.Held != "" {
		f.log.Debug("another primary confirmed while the current one still says master: held back", "primary", current,
			"held", d.Held, "topology-from", d.From)
	}
	if d.Primary != "" && f.counts.slots != nil {
		slots := d.Slots
		f.counts.slots.Store(&slots)
	}
	if d.Primary == "" {
		msg := "no topology"
		if d.Err != nil {
			msg = d.Err.Error()
		}
		f.failed(msg, current)
		return
	}
	if d.Primary == current {
		f.warnedAt, f.suppressed = time.Time{}, 0
		return
	}
	host, port, err := net.SplitHostPort(d.Primary)
	if err == nil {
		err = f.changes.change(func(_, next *config.Config) error {
			if len(next.ClusterSeeds) == 0 {
				return errNotFollowing
			}
			return next.Set("replicaof", host, port)
		})
	}
	if err != nil {
		f.failed("cannot follow "+d.Primary+" ("+d.NodeID+"): "+err.Error(), current)
		return
	}
	f.warnedAt, f.suppressed = time.Time{}, 0
	f.counts.changes.Add(1)
	f.log.Info("following the shard's primary", "primary", d.Primary, "node-id", d.NodeID, "shard", d.Shard,
		"previous-primary", current, "topology-from", d.From)
}

// failed logs a check that put no primary in force (none confirmed, or
// the change refused): at warning level for the first failure after a
// success and then once every clusterLogEvery, with how many were left
// out, else at debug level, so that a primary down for minutes costs a
// line a minute (a failure's text may differ at each check: a timeout
// names the local port).
func (f *clusterFollower) failed(msg, current string) {
	f.counts.failures.Add(1)
	now := time.Now()
	if f.warnedAt.IsZero() || now.Sub(f.warnedAt) >= clusterLogEvery {
		f.warnedAt = now
		f.log.Warn("shard's primary not confirmed, keeping the current one", "primary", current, "error", msg,
			"suppressed", f.suppressed)
		f.suppressed = 0
		return
	}
	f.suppressed++
	f.log.Debug("shard's primary not confirmed, keeping the current one", "primary", current, "error", msg)
}

// options are the topology queries' settings as cfg has them: masteruser
// and masterauth, TLS under tls-replication (the material in force),
// bind-source-addr, and each node within repl-timeout, at most
// clustertopo.DefaultTimeout.
func (f *clusterFollower) options(cfg *config.Config) clustertopo.Options {
	t := upstream.Target{Timeout: min(cfg.ReplTimeout, clustertopo.DefaultTimeout), BindSource: cfg.BindSourceAddr}
	opts := clustertopo.Options{Username: cfg.MasterUser, Password: cfg.MasterAuth, Timeout: t.Timeout, Dial: t.DialTCP}
	if st := f.conf.tls(); cfg.TLSReplication && st != nil {
		opts.TLS = st.Client
	}
	return opts
}

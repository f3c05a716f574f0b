package clusterwatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/replproxy/replproxy/proxy/clustertopo"
)

// MaxLearnt bounds the nodes a Watcher remembers from topologies besides
// its seeds: a cluster of hundreds of nodes needs no more to be found
// again, and a hostile reply cannot make a check dial without end.
const MaxLearnt = 64

// maxViews is how many nodes' topologies one check reads at most: enough
// to pass over a stale view or two, few enough that a shard whose primary
// is down and not yet replaced costs a few connections per check in a
// cluster of hundreds of nodes. Nodes that do not answer do not count.
const maxViews = 3

// ErrNotPrimary is returned (wrapped, in [Decision.Err]) when the node a
// topology names as the shard's primary does not say it is one.
var ErrNotPrimary = errors.New("the node named as the shard's primary is not one")

// Decision is what a check found.
type Decision struct {
	// Primary is the address (host:port) of the shard's primary, confirmed
	// by its ROLE; "" when no primary was confirmed: the proxy keeps the one
	// it follows.
	Primary string
	// NodeID is the primary's node ID, and Shard the shard's ID as the
	// topology gave it; "" with Primary.
	NodeID, Shard string
	// From is the node whose topology named the primary, or the last that
	// gave a topology when none was confirmed.
	From string
	// Err says why Primary is "": every node's failure, joined, or why the
	// topologies named no primary to follow. nil when Primary is set.
	Err error
	// Slots are the shard's slot ranges as the topology that named Primary
	// gave them (nil for a shard that serves none, and with Primary "").
	Slots []clustertopo.SlotRange
	// Held is a confirmed primary not followed yet: the current one still
	// says it is a primary, and Held has not been the decision for
	// Config.Settle. Primary is then the current one.
	Held string
}

// DefaultSettle is Config.Settle's default.
const DefaultSettle = 5 * time.Second

// Config configures a Watcher.
type Config struct {
	// Seeds are the nodes to ask (host:port), in order; at least one.
	Seeds []string
	// Shard is the shard to follow.
	Shard clustertopo.Selector
	// Settle is how long another node must be the decision, check after
	// check, before the watcher leaves a current primary that still says
	// it is one (ROLE master), so that two nodes that both say so are not
	// followed back and forth: a manual failover's old primary in the
	// moment before it learns of the promotion, seen through a node's view
	// not updated yet, or a primary cut off from the rest of the cluster.
	// A current primary that is down or says it is a replica is left at
	// once. Zero means DefaultSettle.
	Settle time.Duration
	// Now is the clock Settle is measured with; nil means time.Now.
	Now func() time.Time
}

// Watcher decides the primary of one shard. Its fields are owned by the
// goroutine that calls Check.
type Watcher struct {
	seeds []string
	shard clustertopo.Selector

	// query and role ask one node (clustertopo.Query, clustertopo.AskRole);
	// tests replace them.
	query func(ctx context.Context, seeds []string, opts clustertopo.Options) (clustertopo.Result, error)
	role  func(ctx context.Context, addr string, opts clustertopo.Options) (string, error)

	settle time.Duration
	now    func() time.Time

	// pending is a confirmed primary held back since pendingSince, while
	// the current one still says it is one.
	pending      string
	pendingSince time.Time

	answered string   // the node that gave the last topology; asked first
	learnt   []string // addresses the last topology named that are not seeds, at most MaxLearnt
	members  []string // IDs of the shard's nodes when its primary was last confirmed (a shard chosen by ID)
	// confirmed is the node ID of the last primary confirmed (a shard
	// chosen by ID): the shard is looked for by it first, so that the node
	// the selector names, once a replica, may move to another shard (a
	// cluster's replica migration) without taking the watcher along.
	confirmed string
}

// New returns a Watcher of cfg's shard, asking cfg's seeds.
func New(cfg Config) (*Watcher, error) {
	if len(cfg.Seeds) == 0 {
		return nil, clustertopo.ErrNoSeeds
	}
	w := &Watcher{seeds: slices.Clone(cfg.Seeds), shard: cfg.Shard, settle: cfg.Settle, now: cfg.Now,
		query: clustertopo.Query, role: clustertopo.AskRole}
	if w.settle <= 0 {
		w.settle = DefaultSettle
	}
	if w.now == nil {
		w.now = time.Now
	}
	return w, nil
}

// Targets returns the nodes a check asks, in order: the node that answered
// last, the seeds, the nodes learnt from the last topology; each once.
func (w *Watcher) Targets() []string {
	out := make([]string, 0, 1+len(w.seeds)+len(w.learnt))
	seen := make(map[string]bool, cap(out))
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(w.answered)
	for _, a := range w.seeds {
		add(a)
	}
	for _, a := range w.learnt {
		add(a)
	}
	return out
}

// Check asks the known nodes, one at a time (Targets, as they were when it
// began), for the topology, and returns the shard's primary once one is
// confirmed (ROLE says master): the first node whose topology names a
// primary that confirms it decides, and is asked first next time. At most
// maxViews nodes' topologies are read. current is the primary the proxy
// follows now ("" for none): a confirmed primary other than current is
// returned at once when current is down or no longer says master, else
// only once it has been the decision for Config.Settle (Decision.Held
// until then). The primary the proxy follows now
// is confirmed like any other, so that a stale view cannot hold the proxy
// on a demoted node; the caller compares the decision with it. A node
// named by several topologies is asked ROLE once per check. opts are the
// credentials, TLS, timeout and limits of every connection, given at each
// check so that a change of masterauth or TLS applies to the next. A check
// ends early, with ctx's error, when ctx ends.
func (w *Watcher) Check(ctx context.Context, current string, opts clustertopo.Options) Decision {
	d := w.find(ctx, opts)
	if d.Primary == "" || current == "" || d.Primary == current {
		w.pending = ""
		return d
	}
	if role, err := w.role(ctx, current, opts); err != nil || role != string(clustertopo.RolePrimary) {
		w.pending = ""
		return d
	}
	now := w.now()
	if w.pending != d.Primary {
		w.pending, w.pendingSince = d.Primary, now
	}
	if now.Sub(w.pendingSince) >= w.settle {
		w.pending = ""
		return d
	}
	return Decision{Primary: current, From: d.From, Held: d.Primary, Slots: d.Slots}
}

// find is Check before it compares the confirmed primary with the current
// one.
func (w *Watcher) find(ctx context.Context, opts clustertopo.Options) Decision {
	var errs []error
	from := ""
	refused := map[string]error{} // ROLE answers of this check, by address
	views := 0
	for _, node := range w.Targets() {
		if views == maxViews {
			break
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		res, err := w.query(ctx, []string{node}, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", node, unwrapSeed(err)))
			continue
		}
		from = node
		views++
		w.learn(res.Topology, opts.TLS != nil)
		d, err := w.decide(ctx, node, res.Topology, opts, refused)
		if err == nil {
			w.answered = node
			return d
		}
		errs = append(errs, fmt.Errorf("%s: %w", node, err))
	}
	return Decision{From: from, Err: errors.Join(errs...)}
}

// unwrapSeed returns the cause a one-seed Query's error wraps, so that a
// node's failure is said once.
func unwrapSeed(err error) error {
	var se *clustertopo.SeedError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// decide picks the shard in t, which node answered, and confirms its
// primary.
func (w *Watcher) decide(ctx context.Context, node string, t clustertopo.Topology, opts clustertopo.Options,
	refused map[string]error) (Decision, error) {
	sh, err := w.pick(t)
	if err != nil {
		return Decision{}, err
	}
	p, err := sh.Primary()
	if err != nil {
		return Decision{}, err
	}
	addr := address(p, opts.TLS != nil)
	if addr == "" {
		return Decision{}, fmt.Errorf("%w: shard %s: its primary %s has no address to connect to", clustertopo.ErrNoPrimary, sh.ID, p.ID)
	}
	if err, ok := refused[addr]; ok {
		return Decision{}, err
	}
	role, err := w.role(ctx, addr, opts)
	switch {
	case err != nil:
		err = fmt.Errorf("confirming the shard's primary %s at %s: %w", p.ID, addr, err)
	case role != string(clustertopo.RolePrimary):
		err = fmt.Errorf("%w: %s at %s says it is %q", ErrNotPrimary, p.ID, addr, role)
	}
	if err != nil {
		refused[addr] = err
		return Decision{}, err
	}
	if w.shard.ID != "" {
		// The shard as its confirmed primary's topology has it: where
		// pick looks for it next.
		w.confirmed = p.ID
		w.members = w.members[:0]
		for _, n := range sh.Nodes {
			w.members = append(w.members, n.ID)
		}
	}
	return Decision{Primary: addr, NodeID: p.ID, Shard: sh.ID, From: node, Slots: sh.Slots}, nil
}

// pick returns the shard w follows in t. One chosen by a slot is the
// shard serving it. One chosen by an ID is looked for by the node ID of
// the last primary confirmed, then by the ID chosen, then by the IDs its
// nodes had when its primary was last confirmed: the first shard found
// whose primary is up, else the first found. Each has its reason: the
// node the ID names, once a replica, may move to another shard (a
// cluster's replica migration), or leave the cluster; and a primary that
// died and was replaced is listed alone, as a shard of its own with no
// slots, until it comes back as a replica.
func (w *Watcher) pick(t clustertopo.Topology) (clustertopo.Shard, error) {
	if w.shard.ID == "" {
		return t.Shard(w.shard)
	}
	ids := make([]string, 0, 2+len(w.members))
	if w.confirmed != "" {
		ids = append(ids, w.confirmed)
	}
	ids = append(ids, w.shard.ID)
	ids = append(ids, w.members...)
	var first clustertopo.Shard
	found := false
	for _, id := range ids {
		sh, err := t.ShardByID(id)
		if err != nil {
			continue
		}
		if _, err := sh.Primary(); err == nil {
			return sh, nil
		}
		if !found {
			first, found = sh, true
		}
	}
	if found {
		return first, nil
	}
	return t.Shard(w.shard) // the error, naming the ID chosen
}

// learn remembers the addresses t names, besides the seeds, up to
// MaxLearnt: the followed shard's first, so that they stay known in a
// large cluster.
func (w *Watcher) learn(t clustertopo.Topology, useTLS bool) {
	var nodes []clustertopo.Node
	if sh, err := t.Shard(w.shard); err == nil {
		nodes = append(nodes, sh.Nodes...)
	}
	for _, sh := range t.Shards {
		nodes = append(nodes, sh.Nodes...)
	}
	learnt := make([]string, 0, MaxLearnt)
	for _, n := range nodes {
		a := address(n, useTLS)
		if a == "" || slices.Contains(w.seeds, a) || slices.Contains(learnt, a) {
			continue
		}
		if len(learnt) == MaxLearnt {
			break
		}
		learnt = append(learnt, a)
	}
	w.learnt = learnt
}

// address returns where to connect to n: its TLS address under TLS when
// the topology gave one, else its address ("" for none).
func address(n clustertopo.Node, useTLS bool) string {
	if useTLS && n.TLSAddr != "" {
		return n.TLSAddr
	}
	return n.Addr
}

package deploy

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/redistest"
)

// What the checkers observe of the deployment: offsets and replids
// sampled, convergence to the primary's digest, full syncs counted per
// node.

// convergeBound is how long every replica has, once writes pause after a
// heal, to reach the primary's DEBUG DIGEST.
const convergeBound = 60 * time.Second

// sample reads every node's replid and offset each second into offsets
// (checker 3), and each proxy's memory into mem (checker 6), until ctx
// ends.
func (d *Deployment) sample(ctx context.Context, offsets *chaos.OffsetTracker, mem *chaos.MemoryTracker) {
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
			s := replState(n.name, m)
			s.Epoch = epoch
			if v := offsets.Observe(time.Now(), s); v != nil {
				d.hist.Violate(*v)
			}
			if _, ok := d.proxies[n.name]; ok {
				d.sampleMemory(n, m, mem)
			}
		}
	}
}

// replState is what a node's INFO replication (repl) says of it: its
// replid, its offset, and for a replica whether its link is up.
func replState(name string, repl map[string]string) chaos.NodeState {
	off, _ := strconv.ParseInt(repl["master_repl_offset"], 10, 64)
	return chaos.NodeState{Name: name, ReplID: repl["master_replid"], Offset: off, LinkUp: repl["master_link_status"] == "up"}
}

// converge pauses the load and waits until every replica has the primary's
// DEBUG DIGEST (checker 1), then checks every node's replid against the
// primary's (checker 2), and resumes the load. It returns how long that
// took from since, and false (recorded as a violation) if the bound passed.
func (d *Deployment) converge(load *loader, since time.Time) (time.Duration, bool) {
	load.pause()
	defer load.resume()
	// The primary's active expiry keeps deleting keys its writes gave a TTL
	// (cachedata's tokens live 15 minutes): from then on its digest moves
	// every 100 ms with no write, and a replica's lags it by the DEL's trip.
	// It is held off while the digests are compared, as the load is.
	defer d.activeExpire(true)
	var behind []string
	var primary string
	ok := pollEvery(convergeBound, 250*time.Millisecond, func() bool {
		primary = d.primary()
		if primary == "" {
			behind = []string{"no Sentinel names the primary"}
			return false
		}
		if err := do(d.node(primary), "DEBUG", "SET-ACTIVE-EXPIRE", "0"); err != nil {
			behind = []string{err.Error()}
			return false
		}
		pm, err := info(d.node(primary), "replication")
		if err != nil {
			behind = []string{err.Error()}
			return false
		}
		end, _ := strconv.ParseInt(pm["master_repl_offset"], 10, 64)
		var states []chaos.NodeState
		for name := range d.servers {
			if name == primary {
				continue
			}
			s := chaos.NodeState{Name: name} // unread: behind, link down
			if m, err := info(d.node(name), "replication"); err == nil {
				s = replState(name, m)
			}
			states = append(states, s)
		}
		// A DEBUG DIGEST walks the whole keyspace (seconds, once the
		// dataset is grown): the digests are taken only once every replica
		// has the primary's stream, and all at once.
		var at bool
		if at, behind = chaos.AtOffset(end, states); !at {
			return false
		}
		want, digests := d.digests(primary, states)
		for i := range states {
			states[i].Digest = digests[i]
		}
		var ok bool
		ok, behind = chaos.Converged(want, states)
		return ok
	})
	took := time.Since(since)
	if ok {
		d.checkReplIDs(primary)
		return took, true
	}
	slices.Sort(behind)
	d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckConverge,
		Detail: fmt.Sprintf("not at the primary's digest %v after the heal: %s", convergeBound, strings.Join(behind, "; "))})
	return took, false
}

// activeExpire turns active expiry on or off on redis-1 and redis-2,
// whichever is the primary; a server down is skipped (it restarts with
// active expiry on).
func (d *Deployment) activeExpire(on bool) {
	v := "0"
	if on {
		v = "1"
	}
	for _, name := range []string{"redis-1", "redis-2"} {
		do(d.node(name), "DEBUG", "SET-ACTIVE-EXPIRE", v)
	}
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
func (d *Deployment) checkReplIDs(p string) {
	pm, err := info(d.node(p), "replication")
	if err != nil {
		d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckReplID, Detail: err.Error()})
		return
	}
	var states []chaos.NodeState
	for _, n := range d.nodes {
		if n.name == p {
			continue
		}
		m, err := info(n, "replication")
		if err != nil {
			d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckReplID, Detail: err.Error()})
			continue
		}
		states = append(states, chaos.NodeState{Name: n.name, ReplID: m["master_replid"]})
	}
	d.hist.Violate(chaos.CheckReplIDs(time.Now(), pm["master_replid"], pm["master_replid2"], states)...)
}

// digests takes the primary's DEBUG DIGEST, then every replica's of states,
// as many at once as there are cores; a digest that fails is "" (and does
// not match). The primary's is taken alone: DEBUG DIGEST blocks the server
// that runs it, and a primary that does not answer the Sentinels for
// down-after-milliseconds is failed over. A replica blocked as long only
// sends its ACK late.
func (d *Deployment) digests(primary string, states []chaos.NodeState) (string, []string) {
	want, _ := digest(d.node(primary))
	got := make([]string, len(states))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, s := range states {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got[i], _ = digest(d.node(s.Name))
		})
	}
	wg.Wait()
	return want, got
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
func (d *Deployment) fullSyncs() (map[string]int64, []string) {
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
func caused(before, after map[string]int64) (chaos.Cost, string) {
	var c chaos.Cost
	var shares []string
	for _, name := range []string{"redis-1", "redis-2", "proxy-a", "standby", "proxy-b"} {
		b, okB := before[name]
		a, okA := after[name]
		if !okB || !okA {
			continue
		}
		delta := int(chaos.SyncDelta(b, a))
		if strings.HasPrefix(name, "redis-") {
			c.Primary += delta
		} else {
			c.Proxies += delta
		}
		shares = append(shares, fmt.Sprintf("%s %d→%d", name, b, a))
	}
	return c, strings.Join(shares, ", ")
}

// sampleMemory reads proxy n's memory and limits (repl is its INFO
// replication, just read) into mem.
func (d *Deployment) sampleMemory(n node, repl map[string]string, mem *chaos.MemoryTracker) {
	m, err := info(n, "memory")
	if err != nil {
		return
	}
	c, err := dialNode(n)
	if err != nil {
		return
	}
	v, err := c.Do("CONFIG", "GET", "client-output-buffer-limit")
	c.Close()
	if err != nil || len(v.Array()) != 2 {
		return
	}
	if viol := mem.Observe(time.Now(), memoryOf(n.name, m, repl, v.Array()[1].String())); viol != nil {
		d.hist.Violate(*viol)
	}
}

// memoryOf is a proxy's memory as its INFO memory (mem) and INFO
// replication (repl) report it, with the bound its limits allow: maxmemory,
// plus at their most what is never counted for eviction: the stream log's
// window, the memory backlog, and an output buffer at the replica class's
// hard limit (limits, as CONFIG GET client-output-buffer-limit gives it)
// for each replica and one more.
func memoryOf(name string, mem, repl map[string]string, limits string) chaos.Memory {
	num := func(s string) int64 { x, _ := strconv.ParseInt(s, 10, 64); return x }
	m := chaos.Memory{
		Name:       name,
		Used:       num(mem["used_memory"]),
		NotCounted: num(mem["mem_not_counted_for_evict"]),
		MaxMemory:  num(mem["maxmemory"]),
	}
	replicas := num(repl["connected_slaves"])
	m.Bound = m.MaxMemory + num(repl["repl_log_window"]) + num(repl["repl_backlog_size"]) + (replicas+1)*replicaHardLimit(limits)
	return m
}

// replicaHardLimit is the replica class's hard limit in a
// client-output-buffer-limit value ("normal 0 0 0 replica 268435456 …").
func replicaHardLimit(limits string) int64 {
	f := strings.Fields(limits)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "replica" || f[i] == "slave" {
			n, _ := strconv.ParseInt(f[i+1], 10, 64)
			return n
		}
	}
	return 0
}

// baselineSlack is how far above its baseline a proxy's goroutines and
// descriptors may be after a heal: the connections of the sampler and the
// checkers come and go.
var baselineSlack = chaos.Resources{Goroutines: 40, FDs: 20}

// captureBaseline records each proxy's goroutines and descriptors: the
// least of three samples a second apart, so that a connection of the
// moment is not taken for the baseline.
func (d *Deployment) captureBaseline() {
	d.baseline = map[string]chaos.Resources{}
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		for name, p := range d.proxies {
			r, err := p.resources()
			if err != nil {
				d.t.Fatal(err)
			}
			b, ok := d.baseline[name]
			if !ok {
				b = r
			}
			d.baseline[name] = chaos.Resources{Goroutines: min(b.Goroutines, r.Goroutines), FDs: min(b.FDs, r.FDs)}
		}
	}
}

// checkBaselines waits up to baselineWait for every proxy to be back within
// baselineSlack of its baseline (checker 7), and records what each holds.
func (d *Deployment) checkBaselines(f chaos.Fault) {
	const baselineWait = 20 * time.Second
	var notes []string
	for _, name := range []string{"proxy-a", "standby", "proxy-b"} {
		p, base := d.proxies[name], d.baseline[name]
		var got chaos.Resources
		var err error
		ok := pollEvery(baselineWait, 500*time.Millisecond, func() bool {
			got, err = p.resources()
			return err == nil && got.Within(base, baselineSlack)
		})
		if err != nil {
			d.hist.Violate(chaos.Violation{At: time.Now(), Checker: chaos.CheckBaseline, Detail: err.Error()})
			continue
		}
		if !ok {
			d.hist.Violate(*chaos.CheckBaselineOf(time.Now(), name, base, got, baselineSlack))
		}
		notes = append(notes, fmt.Sprintf("%s %d/%d", name, got.Goroutines, got.FDs))
	}
	d.rec(f, chaos.ActNote, "", "goroutines/descriptors "+strings.Join(notes, ", "))
}

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// What the checkers observe of the deployment: offsets and replids
// sampled, convergence to the primary's digest, full syncs counted per
// node.

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

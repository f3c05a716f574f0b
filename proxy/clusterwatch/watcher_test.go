package clusterwatch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/clustertopo"
)

// id returns a node ID made of c.
func id(c byte) string { return strings.Repeat(string(c), 40) }

// node is a node of a fake topology.
func node(c byte, addr string, role clustertopo.Role) clustertopo.Node {
	return clustertopo.Node{ID: id(c), Addr: addr, Role: role, Health: clustertopo.HealthOnline}
}

// twoShards is a cluster whose shard of slots 0-8191 has primary a (at
// a:1) and replica b (b:1), and whose other shard has c (c:1) and d (d:1).
func twoShards() clustertopo.Topology {
	return clustertopo.Topology{Source: clustertopo.FromShards, Shards: []clustertopo.Shard{
		{ID: id('a'), Slots: []clustertopo.SlotRange{{First: 0, Last: 8191}},
			Nodes: []clustertopo.Node{node('a', "a:1", clustertopo.RolePrimary), node('b', "b:1", clustertopo.RoleReplica)}},
		{ID: id('c'), Slots: []clustertopo.SlotRange{{First: 8192, Last: 16383}},
			Nodes: []clustertopo.Node{node('c', "c:1", clustertopo.RolePrimary), node('d', "d:1", clustertopo.RoleReplica)}},
	}}
}

// failedOver is twoShards after b took over from a.
func failedOver() clustertopo.Topology {
	t := twoShards()
	t.Shards[0].ID = id('b')
	t.Shards[0].Nodes = []clustertopo.Node{node('b', "b:1", clustertopo.RolePrimary), node('a', "a:1", clustertopo.RoleReplica)}
	return t
}

// fakeCluster answers a Watcher's questions: each node's topology (a node
// not in topos refuses the dial), each address's role (one not in roles
// refuses the dial). It records what it was asked, in order.
type fakeCluster struct {
	topos map[string]clustertopo.Topology
	roles map[string]string
	asked []string // "query addr" and "role addr"
	opts  []clustertopo.Options
}

func (f *fakeCluster) query(_ context.Context, seeds []string, opts clustertopo.Options) (clustertopo.Result, error) {
	if len(seeds) != 1 {
		return clustertopo.Result{}, fmt.Errorf("asked %d seeds at once", len(seeds))
	}
	f.asked = append(f.asked, "query "+seeds[0])
	f.opts = append(f.opts, opts)
	t, ok := f.topos[seeds[0]]
	if !ok {
		err := &clustertopo.SeedError{Seed: seeds[0], Err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED)}
		return clustertopo.Result{Failed: []clustertopo.SeedError{*err}}, fmt.Errorf("cluster topology: no seed answered: %w", err)
	}
	return clustertopo.Result{Topology: t, Seed: seeds[0]}, nil
}

func (f *fakeCluster) role(_ context.Context, addr string, _ clustertopo.Options) (string, error) {
	f.asked = append(f.asked, "role "+addr)
	r, ok := f.roles[addr]
	if !ok {
		return "", fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	}
	return r, nil
}

// watcher returns a Watcher of sel asking seeds, on f.
func watcher(t *testing.T, f *fakeCluster, sel string, seeds ...string) *Watcher {
	t.Helper()
	s, err := clustertopo.ParseSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Config{Seeds: seeds, Shard: s})
	if err != nil {
		t.Fatal(err)
	}
	w.query, w.role = f.query, f.role
	return w
}

func TestNewNeedsSeeds(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, clustertopo.ErrNoSeeds) {
		t.Errorf("New with no seeds: %v, want ErrNoSeeds", err)
	}
}

func TestCheck(t *testing.T) {
	masters := map[string]string{"a:1": "master", "b:1": "slave", "c:1": "master", "d:1": "slave"}
	tests := []struct {
		name    string
		sel     string
		seeds   []string
		topos   map[string]clustertopo.Topology
		roles   map[string]string
		want    string   // Decision.Primary
		wantErr []string // in Decision.Err when want is ""
		asked   []string
	}{
		{
			name: "by slot", sel: "0", seeds: []string{"a:1"},
			topos: map[string]clustertopo.Topology{"a:1": twoShards()}, roles: masters,
			want: "a:1", asked: []string{"query a:1", "role a:1"},
		},
		{
			name: "by slot of the other shard", sel: "16383", seeds: []string{"a:1"},
			topos: map[string]clustertopo.Topology{"a:1": twoShards()}, roles: masters,
			want: "c:1", asked: []string{"query a:1", "role c:1"},
		},
		{
			name: "by a replica's ID", sel: id('d'), seeds: []string{"a:1"},
			topos: map[string]clustertopo.Topology{"a:1": twoShards()}, roles: masters,
			want: "c:1", asked: []string{"query a:1", "role c:1"},
		},
		{
			name: "dead seeds passed over", sel: "0", seeds: []string{"dead:1", "dead:2", "c:1"},
			topos: map[string]clustertopo.Topology{"c:1": twoShards()}, roles: masters,
			want: "a:1", asked: []string{"query dead:1", "query dead:2", "query c:1", "role a:1"},
		},
		{
			// a still believes it is the primary's node and names itself, but
			// says slave (a stale view); the next node names b, which is.
			name: "stale view passed over", sel: "0", seeds: []string{"a:1", "c:1", "d:1"},
			topos: map[string]clustertopo.Topology{"a:1": twoShards(), "c:1": twoShards(), "d:1": failedOver()},
			roles: map[string]string{"a:1": "slave", "b:1": "master"},
			want:  "b:1", asked: []string{"query a:1", "role a:1", "query c:1", "query d:1", "role b:1"},
		},
		{
			// The named primary is down and no failover has happened yet:
			// unknown, and it is asked once however many nodes name it.
			name: "primary down", sel: "0", seeds: []string{"b:1", "c:1"},
			topos: map[string]clustertopo.Topology{"b:1": twoShards(), "c:1": twoShards()},
			roles: map[string]string{},
			wantErr: []string{"b:1: confirming the shard's primary " + id('a') + " at a:1", "connection refused",
				"c:1: confirming"},
			asked: []string{"query b:1", "role a:1", "query c:1"},
		},
		{
			// Views are asked of at most maxViews nodes that answer: here
			// every one names a primary that says it is not.
			name: "views bounded", sel: "0", seeds: []string{"n:1", "n:2", "n:3", "n:4", "n:5"},
			topos: map[string]clustertopo.Topology{"n:1": twoShards(), "n:2": twoShards(), "n:3": twoShards(),
				"n:4": failedOver(), "n:5": failedOver()},
			roles:   map[string]string{"a:1": "slave", "b:1": "master"},
			wantErr: []string{"n:3: " + ErrNotPrimary.Error()},
			asked:   []string{"query n:1", "role a:1", "query n:2", "query n:3"},
		},
		{
			name: "no node answers", sel: "0", seeds: []string{"dead:1", "dead:2"},
			wantErr: []string{"dead:1: dial: connection refused", "dead:2: dial: connection refused"},
			asked:   []string{"query dead:1", "query dead:2"},
		},
		{
			name: "no such shard", sel: id('z'), seeds: []string{"a:1"},
			topos:   map[string]clustertopo.Topology{"a:1": twoShards()},
			wantErr: []string{"no such shard"},
			asked:   []string{"query a:1"},
		},
		{
			name: "primary failing", sel: "0", seeds: []string{"c:1"},
			topos: func() map[string]clustertopo.Topology {
				t := twoShards()
				t.Shards[0].Nodes[0].Health = clustertopo.HealthFail
				return map[string]clustertopo.Topology{"c:1": t}
			}(),
			roles:   masters,
			wantErr: []string{"no primary to follow"},
			asked:   []string{"query c:1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCluster{topos: tt.topos, roles: tt.roles}
			w := watcher(t, f, tt.sel, tt.seeds...)
			d := w.Check(t.Context(), "", clustertopo.Options{})
			if d.Primary != tt.want {
				t.Errorf("Primary = %q (%v), want %q", d.Primary, d.Err, tt.want)
			}
			if tt.want != "" && d.Err != nil {
				t.Errorf("Err = %v with a primary", d.Err)
			}
			for _, s := range tt.wantErr {
				if d.Err == nil || !strings.Contains(d.Err.Error(), s) {
					t.Errorf("Err = %v, want it to say %q", d.Err, s)
				}
			}
			if !slices.Equal(f.asked, tt.asked) {
				t.Errorf("asked %q, want %q", f.asked, tt.asked)
			}
		})
	}
}

// TestCheckFollowsFailover: the decisions over a failover, and the order
// of the nodes asked: the node that answered first, then the seeds, then
// the nodes learnt.
func TestCheckFollowsFailover(t *testing.T) {
	f := &fakeCluster{topos: map[string]clustertopo.Topology{"c:1": twoShards()},
		roles: map[string]string{"a:1": "master", "b:1": "slave"}}
	w := watcher(t, f, id('a'), "dead:1", "c:1")
	if d := w.Check(t.Context(), "", clustertopo.Options{}); d.Primary != "a:1" || d.NodeID != id('a') || d.Shard != id('a') || d.From != "c:1" {
		t.Fatalf("before the failover: %+v", d)
	}
	if got, want := w.Targets(), []string{"c:1", "dead:1", "a:1", "b:1", "d:1"}; !slices.Equal(got, want) {
		t.Errorf("Targets = %q, want %q", got, want)
	}

	// a is removed from the cluster after b took over; the shard chosen by
	// a's ID is found by b's, remembered from the last reading. The seed c
	// is gone too: b, learnt, answers.
	after := failedOver()
	after.Shards[0].Nodes = after.Shards[0].Nodes[:1]
	f.topos = map[string]clustertopo.Topology{"b:1": after}
	f.roles = map[string]string{"b:1": "master"}
	f.asked = nil
	d := w.Check(t.Context(), "", clustertopo.Options{})
	if d.Primary != "b:1" || d.NodeID != id('b') || d.From != "b:1" {
		t.Fatalf("after the failover: %+v", d)
	}
	if want := []string{"query c:1", "query dead:1", "query a:1", "query b:1", "role b:1"}; !slices.Equal(f.asked, want) {
		t.Errorf("asked %q, want %q", f.asked, want)
	}
	if got, want := w.Targets(), []string{"b:1", "dead:1", "c:1", "d:1"}; !slices.Equal(got, want) {
		t.Errorf("Targets = %q, want %q (a is no longer named)", got, want)
	}
}

// TestCheckAfterReplicaMigration: a shard chosen by a node's ID stays the
// shard of the primary confirmed last when that node, made a replica by a
// failover, moves to another shard (a cluster's replica migration, when a
// primary there has none left): the shard is not left for the one the node
// joined.
func TestCheckAfterReplicaMigration(t *testing.T) {
	f := &fakeCluster{topos: map[string]clustertopo.Topology{"c:1": twoShards()},
		roles: map[string]string{"a:1": "master", "b:1": "slave", "c:1": "master"}}
	w := watcher(t, f, id('a'), "c:1")
	if d := w.Check(t.Context(), "", clustertopo.Options{}); d.Primary != "a:1" {
		t.Fatalf("before the failover: %+v", d)
	}
	// b took over; a is its replica.
	f.topos["c:1"] = failedOver()
	f.roles = map[string]string{"a:1": "slave", "b:1": "master", "c:1": "master"}
	if d := w.Check(t.Context(), "a:1", clustertopo.Options{}); d.Primary != "b:1" {
		t.Fatalf("after the failover: %+v", d)
	}
	// a migrated to c's shard, whose replica d was lost.
	migrated := failedOver()
	migrated.Shards[0].Nodes = migrated.Shards[0].Nodes[:1]
	migrated.Shards[1].Nodes = []clustertopo.Node{node('c', "c:1", clustertopo.RolePrimary), node('a', "a:1", clustertopo.RoleReplica)}
	f.topos["c:1"] = migrated
	if d := w.Check(t.Context(), "b:1", clustertopo.Options{}); d.Primary != "b:1" || d.NodeID != id('b') {
		t.Fatalf("after a moved to c's shard: %+v, want b:1 still", d)
	}
}

// TestCheckAfterKilledPrimary: a shard chosen by a node's ID, after a
// manual failover made another node its primary, is followed when that
// primary dies and the cluster promotes the node back: the dead primary is
// listed as a shard of its own, with no slots and its primary failed, and
// is passed over for the shard whose primary is up.
func TestCheckAfterKilledPrimary(t *testing.T) {
	f := &fakeCluster{topos: map[string]clustertopo.Topology{"c:1": twoShards()},
		roles: map[string]string{"a:1": "master", "b:1": "slave", "c:1": "master"}}
	w := watcher(t, f, id('a'), "c:1")
	if d := w.Check(t.Context(), "", clustertopo.Options{}); d.Primary != "a:1" {
		t.Fatalf("at first: %+v", d)
	}
	f.topos["c:1"] = failedOver()
	f.roles = map[string]string{"a:1": "slave", "b:1": "master", "c:1": "master"}
	if d := w.Check(t.Context(), "a:1", clustertopo.Options{}); d.Primary != "b:1" {
		t.Fatalf("after the manual failover: %+v", d)
	}
	// b died; a took over. b is listed alone, failed, with no slots.
	killed := twoShards()
	dead := node('b', "b:1", clustertopo.RolePrimary)
	dead.Health = clustertopo.HealthFail
	killed.Shards[0].Nodes = killed.Shards[0].Nodes[:1]
	killed.Shards = append([]clustertopo.Shard{{ID: id('b'), Nodes: []clustertopo.Node{dead}}}, killed.Shards...)
	f.topos["c:1"] = killed
	f.roles = map[string]string{"a:1": "master", "c:1": "master"}
	if d := w.Check(t.Context(), "b:1", clustertopo.Options{}); d.Primary != "a:1" || d.NodeID != id('a') {
		t.Fatalf("after b was killed: %+v, want a:1", d)
	}
}

// TestCheckTLS: under TLS a node's TLS address is used where the topology
// gives one, and the options reach every question.
func TestCheckTLS(t *testing.T) {
	topo := twoShards()
	topo.Shards[0].Nodes[0].TLSAddr = "a:2"
	f := &fakeCluster{topos: map[string]clustertopo.Topology{"c:1": topo}, roles: map[string]string{"a:2": "master"}}
	w := watcher(t, f, "0", "c:1")
	opts := clustertopo.Options{Username: "u", Password: "p", TLS: &tls.Config{}}
	if d := w.Check(t.Context(), "", opts); d.Primary != "a:2" {
		t.Fatalf("Primary = %q (%v), want the TLS address a:2", d.Primary, d.Err)
	}
	if got := w.Targets(); !slices.Contains(got, "a:2") || slices.Contains(got, "a:1") {
		t.Errorf("Targets = %q, want TLS addresses where known", got)
	}
	for _, o := range f.opts {
		if o.Username != "u" || o.Password != "p" || o.TLS != opts.TLS {
			t.Errorf("a query got options %+v", o)
		}
	}
	if d := w.Check(t.Context(), "", clustertopo.Options{}); d.Primary != "" {
		t.Errorf("without TLS, Primary = %q: the plain address a:1 is not confirmed", d.Primary)
	}
}

// TestLearntBounded: a topology naming many nodes adds at most MaxLearnt
// of them, the followed shard's first.
func TestLearntBounded(t *testing.T) {
	topo := clustertopo.Topology{Source: clustertopo.FromShards}
	for i := range 3 * MaxLearnt {
		n := clustertopo.Node{ID: fmt.Sprintf("%040d", i), Addr: fmt.Sprintf("n%d:1", i), Role: clustertopo.RolePrimary,
			Health: clustertopo.HealthOnline}
		topo.Shards = append(topo.Shards, clustertopo.Shard{ID: n.ID, Nodes: []clustertopo.Node{n},
			Slots: []clustertopo.SlotRange{{First: i, Last: i}}})
	}
	last := fmt.Sprintf("n%d:1", 3*MaxLearnt-1)
	f := &fakeCluster{topos: map[string]clustertopo.Topology{"seed:1": topo}, roles: map[string]string{last: "master"}}
	w := watcher(t, f, fmt.Sprint(3*MaxLearnt-1), "seed:1")
	if d := w.Check(t.Context(), "", clustertopo.Options{}); d.Primary != last {
		t.Fatalf("Primary = %q (%v), want %s", d.Primary, d.Err, last)
	}
	got := w.Targets()
	if len(got) != 1+MaxLearnt || got[0] != "seed:1" || got[1] != last {
		t.Errorf("Targets = %d nodes starting %q, want the seed, the shard's primary, then %d more", len(got), got[:2], MaxLearnt-1)
	}
}

func TestCheckCanceled(t *testing.T) {
	f := &fakeCluster{}
	w := watcher(t, f, "0", "dead:1", "dead:2")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	d := w.Check(ctx, "", clustertopo.Options{})
	if d.Primary != "" || !errors.Is(d.Err, context.Canceled) || len(f.asked) != 0 {
		t.Errorf("a canceled check: %+v, asked %q", d, f.asked)
	}
}

// TestCheckSettles: a confirmed primary other than the current one is
// followed at once when the current one is down or a replica, and only
// after Settle while the current one still says master.
func TestCheckSettles(t *testing.T) {
	f := &fakeCluster{topos: map[string]clustertopo.Topology{"c:1": failedOver()},
		roles: map[string]string{"a:1": "master", "b:1": "master"}}
	now := time.Unix(1000, 0)
	s, _ := clustertopo.ParseSelector("0")
	w, err := New(Config{Seeds: []string{"c:1"}, Shard: s, Settle: 5 * time.Second, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	w.query, w.role = f.query, f.role
	check := func(current, want, held string) {
		t.Helper()
		d := w.Check(t.Context(), current, clustertopo.Options{})
		if d.Primary != want || d.Held != held || d.Err != nil {
			t.Fatalf("at %v from %q: %+v, want primary %q held %q", now.Sub(time.Unix(1000, 0)), current, d, want, held)
		}
	}
	check("", "b:1", "")       // none yet: at once
	check("b:1", "b:1", "")    // the current one
	check("a:1", "a:1", "b:1") // a still says master: held
	now = now.Add(4 * time.Second)
	check("a:1", "a:1", "b:1") // not for Settle yet
	now = now.Add(time.Second)
	check("a:1", "b:1", "")    // Settle passed
	check("a:1", "a:1", "b:1") // held again from here: a new candidacy
	f.roles["a:1"] = "slave"
	check("a:1", "b:1", "") // a demoted: at once
	delete(f.roles, "a:1")
	check("a:1", "b:1", "") // a down: at once
	if want := "role a:1"; !slices.Contains(f.asked, want) {
		t.Errorf("asked %q, want the current primary's ROLE", f.asked)
	}
}

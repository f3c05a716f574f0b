package clusterset

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/config"
)

// fakeTopology is a query the test sets the answer of.
type fakeTopology struct {
	mu    sync.Mutex
	t     clustertopo.Topology
	fail  bool
	calls int // readings answered
}

// readings returns how many readings were answered.
func (f *fakeTopology) readings() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeTopology) set(shards ...clustertopo.Shard) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t, f.fail = clustertopo.Topology{Source: clustertopo.FromShards, Shards: shards}, false
}

func (f *fakeTopology) failing() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = true
}

func (f *fakeTopology) query(_ context.Context, seeds []string, _ clustertopo.Options) (clustertopo.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail {
		return clustertopo.Result{}, errors.New("no seed answered")
	}
	return clustertopo.Result{Topology: f.t, Seed: seeds[0]}, nil
}

// freePorts returns the first of n consecutive free ports of 127.0.0.1.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := redistest.FreePort(t)
		if base+n > 65535 {
			continue
		}
		ok := true
		for i := 1; i < n && ok; i++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// runSet runs a set of dir with the fake topology f, on ports from base,
// until the test ends; it returns the set and Run's result.
func runSet(t *testing.T, dir string, base, metricsBase int, f *fakeTopology) (*Set, <-chan error) {
	t.Helper()
	cfg, err := config.Parse([]string{"--port", "0", "--dir", dir, "--replicaof-cluster", "127.0.0.1", "1",
		"--cluster-shard", "all", "--cluster-port-base", strconv.Itoa(base), "--cluster-refresh-interval", "100",
		"--metrics-port", strconv.Itoa(metricsBase)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, Options{Grace: 500 * time.Millisecond, query: f.query})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)     // Run's result, for the test
	finished := make(chan struct{}) // closed once Run has returned, for the cleanup
	go func() {
		done <- s.Run(ctx)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return s, done
}

// shardPorts returns the ports CLUSTER SHARDS on port lists, by first
// slot (-1 for none); nil when port does not answer.
func shardPorts(t *testing.T, port int) map[int]int {
	t.Helper()
	c, err := redistest.Connect(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), redistest.DialOptions{Timeout: time.Second})
	if err != nil {
		return nil
	}
	defer c.Close()
	v, err := c.Do("CLUSTER", "SHARDS")
	if err != nil {
		return nil // the port closing
	}
	out := map[int]int{}
	for _, sh := range v.Array() {
		kv := sh.Array()
		first := -1
		if slots := kv[1].Array(); len(slots) > 0 {
			first = slots[0].Integer()
		}
		node := kv[3].Array()[0].Array()
		for i := 0; i+1 < len(node); i += 2 {
			if node[i].String() == "port" {
				out[first] = node[i+1].Integer()
			}
		}
	}
	return out
}

// TestSetFollowsTopology: a set serves each shard of the topology on
// cluster-port-base + its index (its /metrics on metrics-port + its
// index), and answers CLUSTER SHARDS with them on every port; a shard missing from one reading is kept, one missing for the
// grace period is stopped (its port closed) while the others run on; a
// reading that fails stops nothing; a new shard gets the next index; and a
// set started again on the same dir gives every shard its index again.
func TestSetFollowsTopology(t *testing.T) {
	dir := t.TempDir()
	base, metricsBase := freePorts(t, 4), freePorts(t, 4)
	f := &fakeTopology{}
	a, b := topoShard(0, 8191, id('a'), id('b')), topoShard(8192, 16383, id('c'), id('d'))
	f.set(a, b)
	s, done := runSet(t, dir, base, metricsBase, f)
	want := map[int]int{0: base, 8192: base + 1}
	redistest.WaitFor(t, 10*time.Second, "both shards served", func() bool {
		return equalInts(shardPorts(t, base), want) && equalInts(shardPorts(t, base+1), want)
	})
	for i := range 2 {
		// Each shard's /metrics on metrics-port + its index, every
		// replproxy series labelled with the shard's index.
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(metricsBase+i) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		label := `shard="` + strconv.Itoa(i) + `"`
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "replproxy_cluster_checks_total{"+label+"}") {
			t.Errorf("shard %d's /metrics: %s, no replproxy_cluster_checks_total{%s}: %.200q", i, resp.Status, label, body)
		}
	}

	f.failing()
	// Failed readings for longer than the grace period: at least as many
	// as fit in it, and the time itself.
	from, since := f.readings(), time.Now()
	redistest.WaitFor(t, 10*time.Second, "failed readings for longer than the grace period", func() bool {
		return f.readings() >= from+8 && time.Since(since) > 600*time.Millisecond
	})
	if !equalInts(shardPorts(t, base+1), want) {
		t.Fatal("failed readings stopped a shard")
	}
	f.set(a) // b is gone
	redistest.WaitFor(t, 10*time.Second, "the gone shard stopped", func() bool { return shardPorts(t, base+1) == nil })
	if got := shardPorts(t, base); !equalInts(got, map[int]int{0: base}) {
		t.Errorf("after b left: CLUSTER SHARDS lists %v", got)
	}
	g := topoShard(8192, 16383, id('g'))
	f.set(a, g)
	want = map[int]int{0: base, 8192: base + 2}
	redistest.WaitFor(t, 10*time.Second, "the new shard on the next index's port", func() bool {
		return equalInts(shardPorts(t, base+2), want)
	})
	s.Shutdown()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Shutdown")
	}

	// Started again: a (after a failover to b) and g keep their ports, c's
	// shard is back on its own.
	f.set(topoShard(0, 8191, id('b'), id('a')), b, g)
	runSet(t, dir, base, metricsBase, f)
	want = map[int]int{0: base, 8192: base + 2, -1: base + 1}
	b.Slots = nil
	f.set(topoShard(0, 8191, id('b'), id('a')), b, topoShard(8192, 16383, id('g')))
	redistest.WaitFor(t, 10*time.Second, "every shard on its port after a restart", func() bool {
		return equalInts(shardPorts(t, base), want)
	})
	if _, err := loadMap(filepath.Clean(dir)); err != nil {
		t.Fatal(err)
	}
}

func equalInts(a, b map[int]int) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

package deploy

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"

	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

// testDeployment is a deployment's bookkeeping with no process behind it:
// the nodes of the whole deployment, registered in the order New starts
// them, at addresses of one region.
func testDeployment(t *testing.T) *Deployment {
	d := &Deployment{
		t:       t,
		dir:     "run",
		servers: map[string]*redistest.Server{},
		proxies: map[string]*proxyProc{},
		byAddr:  map[string]string{},
		home: map[string]string{"redis-1": "", "redis-2": "redis-1",
			"a1": "proxy-a", "a2": "proxy-a", "a3": "proxy-a", "b1": "proxy-b", "b2": "proxy-b", "b3": "proxy-b"},
	}
	ns := netns.Namespace{Name: "a"}
	for i, name := range []string{"redis-1", "redis-2", "proxy-a", "standby", "proxy-b", "a1", "a2", "a3", "b1", "b2", "b3"} {
		addr := fmt.Sprintf("10.1.2.1:%d", 7000+i)
		d.register(name, ns, addr)
		if _, ok := d.home[name]; ok {
			d.servers[name] = nil // a redis-server; none runs here
		} else {
			d.proxies[name] = &proxyProc{name: name, addr: addr, tlsAddr: fmt.Sprintf("10.1.2.1:%d", 8000+i)}
		}
	}
	return d
}

// TestHostAt: proxy A's own address is the region's address with another
// last byte, and an address that is no IPv4 is refused rather than turned
// into a wrong one.
func TestHostAt(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want string
		err  bool
	}{
		{"10.70.3.1", "10.70.3.5", false},
		{"10.64.255.2", "10.64.255.5", false},
		{"10.70.3.1:6379", "", true}, // an address with a port
		{"::1", "", true},
		{"region-a", "", true},
		{"", "", true},
	} {
		got, err := hostAt(tc.addr, sourceHost)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("hostAt(%q, %d) = %q, %v; want %q, error %v", tc.addr, sourceHost, got, err, tc.want, tc.err)
		}
	}
}

// TestRegister: every node is found by its name and by its address, in
// the order of its start, and a name of no node is not found.
func TestRegister(t *testing.T) {
	d := testDeployment(t)
	if len(d.nodes) != 11 {
		t.Fatalf("%d nodes, want 11", len(d.nodes))
	}
	for _, n := range d.nodes {
		got, ok := d.lookup(n.name)
		if !ok || got != n {
			t.Errorf("lookup(%s) = %+v, %v; want %+v", n.name, got, ok, n)
		}
		if d.byAddr[n.addr] != n.name {
			t.Errorf("byAddr[%s] = %q, want %s", n.addr, d.byAddr[n.addr], n.name)
		}
	}
	if len(d.byAddr) != len(d.nodes) {
		t.Errorf("%d addresses for %d nodes: two nodes share one", len(d.byAddr), len(d.nodes))
	}
	if n, ok := d.lookup("redis-3"); ok {
		t.Errorf("lookup(redis-3) = %+v: no such node", n)
	}
}

// TestServersBut: the replicas a replica-kill may pick are the
// redis-servers but the primary, in the order of their start: never a
// proxy, and redis-1 once redis-2 is the primary.
func TestServersBut(t *testing.T) {
	d := testDeployment(t)
	for _, tc := range []struct {
		primary string
		want    []string
	}{
		{"redis-1", []string{"redis-2", "a1", "a2", "a3", "b1", "b2", "b3"}},
		{"redis-2", []string{"redis-1", "a1", "a2", "a3", "b1", "b2", "b3"}},
		// No Sentinel answered: every server may be picked.
		{"", []string{"redis-1", "redis-2", "a1", "a2", "a3", "b1", "b2", "b3"}},
	} {
		if got := d.serversBut(tc.primary); !slices.Equal(got, tc.want) {
			t.Errorf("serversBut(%q) = %q, want %q", tc.primary, got, tc.want)
		}
	}
}

// TestKnownReplicas: a SENTINEL REPLICAS reply names a replica known only
// when it is neither down nor disconnected, by the deployment's name for
// its address; an address of no node is left out.
func TestKnownReplicas(t *testing.T) {
	d := testDeployment(t)
	entry := func(name, flags string) []string {
		n, _ := d.lookup(name)
		host, port, _ := net.SplitHostPort(n.addr)
		return []string{"name", n.addr, "ip", host, "port", port, "runid", "x", "flags", flags}
	}
	reply := [][]string{
		entry("redis-2", "slave"),
		entry("proxy-a", "slave"),
		entry("standby", "s_down,slave"),
		entry("a1", "slave,disconnected"),
		{"name", "10.9.9.9:6379", "ip", "10.9.9.9", "port", "6379", "flags", "slave"},
		{"ip"}, // a short entry: no fields
	}
	got := d.knownReplicas(reply)
	want := map[string]bool{"redis-2": true, "proxy-a": true}
	if !maps.Equal(got, want) {
		t.Errorf("knownReplicas = %v, want %v", got, want)
	}
}

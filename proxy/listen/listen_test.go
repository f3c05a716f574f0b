package listen

import (
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestBindNetwork: bind's and metrics-bind's "*" and "::*" are every IPv4
// and every IPv6 address, anything else a host; a bad address fails with
// net.Listen's error, naming it. (Nothing here listens beyond loopback.)
func TestBindNetwork(t *testing.T) {
	for _, c := range []struct{ addr, network, host string }{
		{"*", "tcp4", ""},
		{"::*", "tcp6", "::"},
		{"127.0.0.1", "tcp", "127.0.0.1"},
		{"::1", "tcp", "::1"},
	} {
		if n, h := Network(c.addr); n != c.network || h != c.host {
			t.Errorf("Network(%q) = %q, %q, want %q, %q", c.addr, n, h, c.network, c.host)
		}
	}
	ln, err := TCP("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if ln, err := TCP("256.0.0.1", 0); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("listen on a bad address: %v", err)
	}
}

// TestOpenKeepsAndSettles: port 0 is settled on the first address and used
// for the others; a listener of the same kind and address in keep is taken,
// not opened again; an optional address that fails is skipped, a required
// one fails the whole and leaves nothing open.
func TestOpenKeepsAndSettles(t *testing.T) {
	lns, port, err := Open([]string{"127.0.0.1", "-256.0.0.1"}, 0, 0, nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(lns)
	if len(lns) != 1 || port == 0 || lns[0].Ln.Addr().(*net.TCPAddr).Port != port {
		t.Fatalf("Open = %d listeners on port %d", len(lns), port)
	}
	again, _, err := Open([]string{"127.0.0.1"}, port, 0, lns, hclog.NewNullLogger())
	if err != nil || len(again) != 1 || again[0].Ln != lns[0].Ln || len(Without(again, lns)) != 0 {
		t.Fatalf("reopen with keep: %v, %d listeners", err, len(again))
	}
	if _, _, err := Open([]string{"127.0.0.1", "256.0.0.1"}, 0, 0, nil, hclog.NewNullLogger()); err == nil {
		t.Fatal("a required address that cannot be listened on did not fail")
	}
}

// TestIsLoopbackAndFD: loopback is 127.0.0.0/8, ::1 (mapped or not) and a
// unix socket, nothing else; an accepted TCP connection has a descriptor, a
// pipe has none.
func TestIsLoopbackAndFD(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "127.9.9.9:1": true, "[::1]:1": true,
		"[::ffff:127.0.0.1]:1": true, "10.0.0.1:1": false, "[2001:db8::1]:1": false} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := IsLoopback(a); got != want {
			t.Errorf("IsLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
	if !IsLoopback(&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}) {
		t.Error("a unix socket is not loopback")
	}
	ln, err := TCP("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if FD(c) < 0 {
		t.Error("a TCP connection has no descriptor")
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if FD(p1) != -1 {
		t.Error("a pipe has a descriptor")
	}
}

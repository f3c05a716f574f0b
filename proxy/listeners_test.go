package proxy

import (
	"strings"
	"testing"
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
		if n, h := bindNetwork(c.addr); n != c.network || h != c.host {
			t.Errorf("bindNetwork(%q) = %q, %q, want %q, %q", c.addr, n, h, c.network, c.host)
		}
	}
	ln, err := listenTCP("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if ln, err := listenTCP("256.0.0.1", 0); err == nil || !strings.Contains(err.Error(), "256.0.0.1") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("listen on a bad address: %v", err)
	}
}

package redistest

import (
	"net"
	"testing"
)

// StartReplicas starts n redis-servers replicating addr (host:port: a Redis primary
// or the proxy) with --replicaof, and returns them with a client for each. It does not
// wait for them to sync; [WaitSynced] does.
func StartReplicas(t testing.TB, n int, addr string) ([]*Server, []*Client) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redistest: replica of %q: %v", addr, err)
	}
	servers := make([]*Server, n)
	clients := make([]*Client, n)
	for i := range n {
		servers[i] = StartServer(t, "--replicaof", host, port)
		clients[i] = Dial(t, servers[i].Addr())
	}
	return servers, clients
}

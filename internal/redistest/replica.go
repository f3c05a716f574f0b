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
	return startReplicas(t, nil, "", n, addr)
}

// StartReplicasIn is [StartReplicas] inside network namespace ns, the replicas
// listening on host ([StartServerIn]) and their clients dialing from inside ns.
func StartReplicasIn(t testing.TB, ns Namespace, host string, n int, addr string) ([]*Server, []*Client) {
	t.Helper()
	return startReplicas(t, ns, host, n, addr)
}

// startReplicas is StartReplicas, inside ns on host when ns is not nil.
func startReplicas(t testing.TB, ns Namespace, host string, n int, addr string) ([]*Server, []*Client) {
	t.Helper()
	primaryHost, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("redistest: replica of %q: %v", addr, err)
	}
	servers := make([]*Server, n)
	clients := make([]*Client, n)
	for i := range n {
		if ns == nil {
			servers[i] = StartServer(t, "--replicaof", primaryHost, port)
			clients[i] = Dial(t, servers[i].Addr())
			continue
		}
		servers[i] = StartServerIn(t, ns, host, "--replicaof", primaryHost, port)
		clients[i] = DialIn(t, ns, servers[i].Addr())
	}
	return servers, clients
}

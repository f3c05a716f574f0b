package proxy

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestClusterFollowerOwnsReplicaOf: with replicaof-cluster set, replicaof
// is the follower's: a replicaof from the configuration is ignored at
// start, REPLICAOF and CONFIG SET replicaof are refused, and the cluster
// directives are startup only. With no seed answering, the follower says
// so and the link waits for a primary.
func TestClusterFollowerOwnsReplicaOf(t *testing.T) {
	closed := strconv.Itoa(redistest.FreePort(t))
	p := startProxy(t, "--replicaof", "127.0.0.1", "6379", "--replicaof-cluster", "127.0.0.1", closed,
		"--cluster-shard", "0", "--cluster-refresh-interval", "100")
	a := adminDial(t, p)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CONFIG", "GET", "replicaof"}, "*2\r\n$9\r\nreplicaof\r\n$0\r\n\r\n"},
		{[]string{"CONFIG", "GET", "replicaof-cluster"}, "*2\r\n$17\r\nreplicaof-cluster\r\n$" +
			strconv.Itoa(len("127.0.0.1 "+closed)) + "\r\n127.0.0.1 " + closed + "\r\n"},
		{[]string{"CONFIG", "GET", "cluster-shard"}, "*2\r\n$13\r\ncluster-shard\r\n$1\r\n0\r\n"},
		{[]string{"REPLICAOF", "127.0.0.1", "6380"}, "-ERR REPLICAOF not allowed while replicaof-cluster is set\r\n"},
		{[]string{"REPLICAOF", "NO", "ONE"}, "-ERR REPLICAOF not allowed while replicaof-cluster is set\r\n"},
		{[]string{"CONFIG", "SET", "replicaof", "127.0.0.1 6380"},
			"-ERR CONFIG SET failed (possibly related to argument 'replicaof') - REPLICAOF not allowed while replicaof-cluster is set\r\n"},
		{[]string{"CONFIG", "SET", "cluster-shard", "1"},
			"-ERR CONFIG SET failed (possibly related to argument 'cluster-shard') - can't set immutable config\r\n"},
		{[]string{"CONFIG", "SET", "replicaof-cluster", ""},
			"-ERR CONFIG SET failed (possibly related to argument 'replicaof-cluster') - can't set immutable config\r\n"},
	} {
		if got := a.do(tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
	}
	if !p.Log.Contains("replicaof ignored: replicaof-cluster finds the shard's primary") {
		t.Error("no log line says the configured replicaof was ignored")
	}
	redistest.WaitFor(t, 5*time.Second, "the follower to check three times, finding no seed", func() bool {
		return p.Log.Count("[DEBUG] replproxy.cluster: shard's primary not confirmed") >= 2
	})
	warn := "[WARN]  replproxy.cluster: shard's primary not confirmed, keeping the current one"
	if n := p.Log.Count(warn); n != 1 {
		t.Errorf("the same failure logged %d times at warning level, want once (rate-limited):\n%s", n, p.Log)
	}
	if !p.Log.Contains(net.JoinHostPort("127.0.0.1", closed)) {
		t.Errorf("the failure does not name the seed:\n%s", p.Log)
	}
	// One reading of INFO; checks run meanwhile, each counted before its
	// failure is.
	info := redistest.ParseInfo(p.Info("proxy"))
	checks, _ := strconv.Atoi(info["cluster_checks"])
	fails, _ := strconv.Atoi(info["cluster_check_failures"])
	if info["cluster_shard"] != "0" || checks < 2 || fails < checks-1 || fails > checks || info["cluster_primary_changes"] != "0" {
		t.Errorf("INFO proxy: cluster_shard=%s cluster_checks=%s cluster_check_failures=%s cluster_primary_changes=%s; want shard 0, every check of at least two failed, no move",
			info["cluster_shard"], info["cluster_checks"], info["cluster_check_failures"], info["cluster_primary_changes"])
	}
	if got := a.do("CONFIG", "SET", "cluster-refresh-interval", "5000"); got != "+OK\r\n" {
		t.Errorf("CONFIG SET cluster-refresh-interval: %q", got)
	}
}

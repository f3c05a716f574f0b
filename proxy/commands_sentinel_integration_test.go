package proxy

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// Sentinel timings for TestSentinelFailover: short, so that the test stays
// well under 30 s.
const (
	sentinelDownAfter       = 1000 * time.Millisecond
	sentinelFailoverTimeout = 5000 * time.Millisecond
)

// TestSentinelFailover runs a real Sentinel failover around the proxy: a
// primary P, its direct replica R1, the proxy replicating from P and a
// replica R2 of the proxy, watched by one Sentinel. P is killed; Sentinel
// must promote R1 (never the proxy, which reports slave_priority:0) and move
// the proxy to R1, which the proxy reaches by partial resync, and R2 must
// follow without a full sync.
func TestSentinelFailover(t *testing.T) { sentinelFailover(t, false) }

// TestSentinelFailoverACL is the same failover with least privilege, as
// Redis's documentation sets it up: Sentinel authenticates everywhere as
// its own user (auth-user, auth-pass; +multi +slaveof +ping +exec
// +subscribe +config|rewrite +role +publish +info +client|setname
// +client|kill +script|kill, all channels), R2 replicates through the
// proxy as a replication-only user, and the proxy's default user has a
// password. The proxy follows by partial resync, and Sentinel's hello link
// to it (Pub/Sub) stays up.
func TestSentinelFailoverACL(t *testing.T) { sentinelFailover(t, true) }

// sentinelUser is Redis's documented Sentinel user, as a user line.
var sentinelUser = []string{"--user", "sentinel", "on", ">sentinel-secret", "allchannels", "+multi", "+slaveof", "+ping",
	"+exec", "+subscribe", "+config|rewrite", "+role", "+publish", "+info", "+client|setname", "+client|kill", "+script|kill"}

func sentinelFailover(t *testing.T, withUsers bool) {
	var serverArgs, proxyArgs, r2Args, sentinelAuth []string
	var proxyAuth redistest.DialOptions
	dialProxy := func(addr string) *redistest.Client { return redistest.Dial(t, addr) }
	if withUsers {
		proxyAuth = redistest.DialOptions{Username: "admin", Password: "admin-secret"}
		serverArgs = sentinelUser
		proxyArgs = operatorUsers
		r2Args = []string{"--masteruser", "replica", "--masterauth", "replica-secret"}
		sentinelAuth = []string{"sentinel auth-user m sentinel", "sentinel auth-pass m sentinel-secret"}
		dialProxy = func(addr string) *redistest.Client {
			c, err := redistest.DialOpts(t, addr, proxyAuth)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	p, pc := startPrimary(t, serverArgs...)
	r1 := redistest.StartServer(t, append(replicaOf(p), serverArgs...)...)
	r1c := redistest.Dial(t, r1.Addr())
	proxy := startProxy(t, append(replicaOf(p), proxyArgs...)...)
	xc := dialProxy(proxy.AddrString())
	waitLinkUp(t, xc)
	phost, pport, _ := strings.Cut(proxy.AddrString(), ":")
	r2 := redistest.StartServer(t, append([]string{"--replicaof", phost, pport}, r2Args...)...)
	r2c := redistest.Dial(t, r2.Addr())

	for i := range 100 {
		pc.MustDo(t, "SET", "k"+strconv.Itoa(i), strconv.Itoa(i))
	}
	redistest.WaitSynced(t, pc, r1c, r2c) // R2 through the proxy

	sentinel := redistest.StartSentinel(t, append([]string{
		"sentinel monitor m 127.0.0.1 " + strconv.Itoa(p.Port()) + " 1",
		"sentinel down-after-milliseconds m " + strconv.Itoa(int(sentinelDownAfter.Milliseconds())),
		"sentinel failover-timeout m " + strconv.Itoa(int(sentinelFailoverTimeout.Milliseconds())),
		"loglevel verbose",
	}, sentinelAuth...))
	sc := redistest.Dial(t, sentinel.Addr())

	// Sentinel learns the replicas from P's INFO, then reads each one's INFO:
	// the proxy reports priority 0 (until then Sentinel shows the default),
	// and both of Sentinel's links to it, commands and Pub/Sub, are up.
	var proxyEntry map[string]string
	redistest.WaitFor(t, 10*time.Second, "Sentinel to read both replicas' INFO (the proxy's priority 0) and link to the proxy", func() bool {
		rs := sentinelReplicas(t, sc)
		proxyEntry = nil
		for _, r := range rs {
			if r["port"] == pport {
				proxyEntry = r
			}
		}
		return len(rs) == 2 && proxyEntry != nil && proxyEntry["slave-priority"] == "0" &&
			!strings.Contains(proxyEntry["flags"], "disconnected")
	})
	t.Logf("Sentinel's view of the proxy: %v", proxyEntry)

	proxyFull := xc.InfoInt(t, "stats", "sync_full")
	p.Kill()
	killed := time.Now()

	redistest.WaitFor(t, 15*time.Second, "Sentinel to promote R1", func() bool {
		v := sc.MustDo(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "m")
		return len(v.Array()) == 2 && v.Array()[1].String() == strconv.Itoa(r1.Port())
	})
	t.Logf("R1 promoted %v after P was killed", time.Since(killed).Round(time.Millisecond))

	// Sentinel ends the failover once every replica it knows, the proxy
	// included, replicates from R1: "+failover-end", not the
	// "+failover-end-for-timeout" of a replica it could not move. It
	// disconnects normal clients of the instances it reconfigures (CLIENT
	// KILL), so every check from here dials afresh.
	sentinelLog := func() string {
		b, err := os.ReadFile(sentinel.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	redistest.WaitFor(t, sentinelFailoverTimeout+5*time.Second, "Sentinel to end the failover", func() bool {
		return strings.Contains(sentinelLog(), "+failover-end")
	})
	t.Logf("failover ended %v after P was killed", time.Since(killed).Round(time.Millisecond))
	slog := sentinelLog()
	if strings.Contains(slog, "+failover-end-for-timeout") {
		t.Errorf("Sentinel ended the failover on failover-timeout: it did not move the proxy during the failover")
	}
	if want := "+slave-reconf-done slave " + proxy.AddrString(); !strings.Contains(slog, want) {
		t.Errorf("Sentinel log lacks %q", want)
	}
	if role := freshInfo(t, r1.Addr(), "replication")["role"]; role != "master" {
		t.Fatalf("R1 role %q after promotion", role)
	}
	redistest.WaitFor(t, 5*time.Second, "the proxy to replicate from R1", func() bool {
		info := freshInfoAs(t, proxy.AddrString(), "replication", proxyAuth)
		return info["master_port"] == strconv.Itoa(r1.Port()) && info["master_link_status"] == "up"
	})
	t.Logf("proxy linked to R1 %v after P was killed", time.Since(killed).Round(time.Millisecond))

	r1stats := freshInfo(t, r1.Addr(), "stats")
	if n := r1stats["sync_full"]; n != "0" {
		t.Errorf("R1 sync_full = %s, want 0 (the proxy must continue by partial resync)", n)
	}
	if n, _ := strconv.Atoi(r1stats["sync_partial_ok"]); n < 1 {
		t.Errorf("R1 sync_partial_ok = %s, want at least 1", r1stats["sync_partial_ok"])
	}
	if n := freshInfoAs(t, proxy.AddrString(), "stats", proxyAuth)["sync_full"]; n != strconv.FormatInt(proxyFull, 10) {
		t.Errorf("proxy sync_full = %s after the failover, was %d: R2 must not need a full sync", n, proxyFull)
	}

	if withUsers {
		// Sentinel's links to the proxy, commands and hello (Pub/Sub), run
		// as the Sentinel user, and its hello link is subscribed.
		ac := dialProxy(proxy.AddrString())
		redistest.WaitFor(t, 10*time.Second, "Sentinel's hello link on the proxy as the Sentinel user", func() bool {
			for _, c := range ac.ClientList(t) {
				if strings.HasSuffix(c["name"], "-pubsub") && c["user"] == "sentinel" && c["flags"] == "P" && c["sub"] == "1" {
					return true
				}
			}
			return false
		})
		// Nothing Sentinel sent was refused by its rules (MULTI and EXEC,
		// which the proxy does not serve, are refused as unknown first).
		if log := ac.MustDo(t, "ACL", "LOG").Array(); len(log) != 0 {
			t.Errorf("ACL LOG after the failover has %d entries: %v", len(log), log)
		}
		for _, r := range sentinelReplicas(t, redistest.Dial(t, sentinel.Addr())) {
			if r["port"] == pport && strings.Contains(r["flags"], "disconnected") {
				t.Errorf("Sentinel's view of the proxy after the failover: %v", r)
			}
		}
	}

	r1c = redistest.Dial(t, r1.Addr())
	r1c.MustDo(t, "SET", "after", "failover")
	// Same offset and DEBUG DIGEST on R1 and on R2 behind the proxy.
	redistest.WaitSynced(t, r1c, r2c)
	if got := r2c.MustDo(t, "GET", "after").String(); got != "failover" {
		t.Fatalf("R2 GET after = %q", got)
	}
}

// freshInfo reads INFO section from addr on a connection of its own, or
// returns nil when that fails (Sentinel may be killing clients).
func freshInfo(t testing.TB, addr, section string) map[string]string {
	return freshInfoAs(t, addr, section, redistest.DialOptions{})
}

// freshInfoAs is freshInfo authenticated as opts says.
func freshInfoAs(t testing.TB, addr, section string, opts redistest.DialOptions) map[string]string {
	t.Helper()
	opts.Timeout = time.Second
	c, err := redistest.DialOpts(t, addr, opts)
	if err != nil {
		return nil
	}
	defer c.Close()
	v, err := c.Do("INFO", section)
	if err != nil {
		return nil
	}
	return redistest.ParseInfo(v.String())
}

// sentinelReplicas returns SENTINEL REPLICAS m as one map per replica.
func sentinelReplicas(t testing.TB, sc *redistest.Client) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, r := range sc.MustDo(t, "SENTINEL", "REPLICAS", "m").Array() {
		m := make(map[string]string)
		for i := 0; i+1 < len(r.Array()); i += 2 {
			m[r.Array()[i].String()] = r.Array()[i+1].String()
		}
		out = append(out, m)
	}
	return out
}

// sentinelLinkWindow is how long TestSentinelPubSubLink watches Sentinel's
// links: four times the 15 s after which Sentinel reopened a subscribed
// link that heard nothing.
const sentinelLinkWindow = 60 * time.Second

// TestSentinelPubSubLink: two real Sentinels monitor a primary whose only
// replica is the proxy. The primary cannot deliver their hellos (PUBLISH
// renamed away), so they can find each other only through the hellos each
// publishes to the proxy; and each keeps one subscribed link to the proxy,
// the same client (flags=P sub=1) for sentinelLinkWindow, with no new
// connection from either and no link reconnection in their logs.
func TestSentinelPubSubLink(t *testing.T) {
	p, pc := startPrimary(t, "--rename-command", "PUBLISH", "")
	if _, err := pc.Do("PUBLISH", sentinelHello, "x"); err == nil {
		t.Fatal("the primary still serves PUBLISH")
	}
	_, xc := startProxyOf(t, p)
	monitor := []string{
		"sentinel monitor m 127.0.0.1 " + strconv.Itoa(p.Port()) + " 2",
		"sentinel down-after-milliseconds m 5000",
		"loglevel debug",
	}
	s1, s2 := redistest.StartSentinel(t, monitor), redistest.StartSentinel(t, monitor)
	sentinels := []*redistest.Server{s1, s2}

	// Each learns of the other from the hellos the proxy delivers.
	for i, s := range sentinels {
		sc := redistest.Dial(t, s.Addr())
		other := sentinels[1-i]
		redistest.WaitFor(t, 30*time.Second, "Sentinel "+s.Addr()+" to discover "+other.Addr()+" through the proxy", func() bool {
			for _, peer := range sc.MustDo(t, "SENTINEL", "SENTINELS", "m").Array() {
				f := peer.Array()
				for j := 0; j+1 < len(f); j += 2 {
					if f[j].String() == "port" && f[j+1].String() == strconv.Itoa(other.Port()) {
						return true
					}
				}
			}
			return false
		})
	}

	// Sentinel names its subscribed link sentinel-<id>-pubsub.
	links := func() map[string]map[string]string {
		m := make(map[string]map[string]string)
		for _, c := range xc.ClientList(t) {
			if strings.HasPrefix(c["name"], "sentinel-") && strings.HasSuffix(c["name"], "-pubsub") {
				m[c["name"]] = c
			}
		}
		return m
	}
	var first map[string]map[string]string
	redistest.WaitFor(t, 10*time.Second, "both Sentinels' subscribed links on the proxy", func() bool {
		first = links()
		return len(first) == 2
	})
	conns := xc.InfoInt(t, "stats", "total_connections_received")
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range tick.C {
		now := links()
		for name, c := range first {
			n := now[name]
			switch {
			case n == nil:
				t.Fatalf("%v into the window: %s's subscribed link is gone", time.Since(start).Round(time.Second), name)
			case n["id"] != c["id"]:
				t.Fatalf("%v into the window: %s's subscribed link was reopened (id %s, was %s)",
					time.Since(start).Round(time.Second), name, n["id"], c["id"])
			case n["flags"] != "P" || n["sub"] != "1":
				t.Fatalf("%s: flags=%s sub=%s, want flags=P sub=1", name, n["flags"], n["sub"])
			}
			// Hellos arrive every 2 s from each Sentinel; Redis counts a
			// message written as an interaction (the bound allows for a
			// loaded machine).
			if idle, _ := strconv.Atoi(n["idle"]); idle > 4 {
				t.Errorf("%s: idle=%s while it receives hellos", name, n["idle"])
			}
		}
		if time.Since(start) >= sentinelLinkWindow {
			break
		}
	}
	if n := xc.InfoInt(t, "stats", "total_connections_received"); n != conns {
		t.Errorf("the proxy accepted %d connections during the window, want none (a Sentinel reconnected)", n-conns)
	}
	for _, s := range sentinels {
		b, err := os.ReadFile(s.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "link-reconnection") {
			t.Errorf("Sentinel %s logged a link reconnection:\n%s", s.Addr(), b)
		}
	}
	t.Logf("both subscribed links kept for %v: %v", sentinelLinkWindow, first)
}

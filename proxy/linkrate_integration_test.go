package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/linkzstd"
)

// replicasOf returns the replicas of p that are (proxy) or are not downstream
// proxies.
func replicasOf(p *testProxy, proxy bool) []*downstream.Replica {
	var out []*downstream.Replica
	for _, r := range p.clients.replicaList() {
		if r.IsProxy() == proxy {
			out = append(out, r)
		}
	}
	return out
}

// syncReadRate samples proxy b's master_sync_read_bytes over d (a
// measurement interval, not a wait for a condition) and returns the bytes a
// second it read meanwhile, and whether its full sync was still in progress
// at the end.
func syncReadRate(t *testing.T, bc *redistest.Client, d time.Duration) (perSec float64, inProgress bool) {
	t.Helper()
	read := func() (int64, time.Time, bool) {
		info := bc.Info(t, "replication")
		n, _ := strconv.ParseInt(info["master_sync_read_bytes"], 10, 64)
		return n, time.Now(), info["master_sync_in_progress"] == "1"
	}
	n0, t0, _ := read()
	time.Sleep(d)
	n1, t1, in := read()
	return float64(n1-n0) / t1.Sub(t0).Seconds(), in
}

// TestLinkSyncRateLimit: primary → proxy A (repl-link-sync-rate-limit 4mb)
// → proxy B, with a real redis-server replica of A syncing at the same
// time, on a dataset of about 24 MB (16 MB would do at 4 MiB/s, but on a
// loaded machine the first seconds go to the real replica's sync and the
// INFO polls, and the CONFIG SET below needs a payload still in progress).
// B's payload is paced: it reads at most about 4 MiB/s, then, after CONFIG
// SET of 1mb during its sync, at most about 1 MiB/s, and the sync takes
// over 3 s; the real replica is not paced (it is in sync while B is still
// loading, and A counts no throttled time for it). After the sync, the
// stream to B is never paced: 8 MB of writes under a 512 KiB/s cap reach B
// with no throttled time counted, and well within the 15 s the cap would
// need.
func TestLinkSyncRateLimit(t *testing.T) {
	redistest.Require(t)
	psrv, pc := startPrimary(t, "--rdbcompression", "no")
	pc.MustDo(t, "DEBUG", "POPULATE", 24000, "rate:key", 1000) // ~24 MB of RDB, uncompressed
	a, ac := startProxyOf(t, psrv, "--repl-link-sync-rate-limit", "4mb")
	waitOffsetsEqual(t, pc, ac)
	if got := ac.Info(t, "proxy")["repl_link_sync_rate_limit"]; got != strconv.Itoa(4<<20) {
		t.Fatalf("INFO repl_link_sync_rate_limit:%s; want %d", got, 4<<20)
	}
	host, port, _ := strings.Cut(a.AddrString(), ":")

	start := time.Now()
	b := startProxy(t, "--replicaof", host, port)
	bc := redistest.Dial(t, b.AddrString())
	rsrv := redistest.StartServer(t)
	rc := redistest.Dial(t, rsrv.Addr())
	rc.MustDo(t, "REPLICAOF", host, port)

	// The real replica of A is not paced: it is in sync while B still loads.
	redistest.WaitFor(t, 30*time.Second, "the real replica of A in sync", func() bool {
		info := rc.Info(t, "replication")
		return info["master_link_status"] == "up" && info["master_sync_in_progress"] == "0"
	})
	realSync := time.Since(start)
	if bc.Info(t, "replication")["master_link_status"] == "up" {
		t.Fatalf("proxy B in sync as soon as a real replica (%v): its payload was not paced", realSync)
	}
	for _, r := range replicasOf(a, false) {
		if r.Throttled() != 0 {
			t.Errorf("a real replica of A throttled %v", r.Throttled())
		}
	}

	redistest.WaitFor(t, 20*time.Second, "proxy B syncing", func() bool {
		info := bc.Info(t, "replication")
		return info["master_sync_in_progress"] == "1" && info["master_sync_read_bytes"] != "0"
	})
	rate4, in := syncReadRate(t, bc, time.Second)
	if !in {
		t.Fatal("proxy B's 24 MB sync ended within 1 s at 4 MiB/s: its payload was not paced")
	}
	// The bound allows a burst and what the sockets' buffers held when the
	// window began (B reads what A wrote earlier): a MiB over the window.
	if rate4 > 1.25*(4<<20)+(1<<20)/1.0 {
		t.Errorf("proxy B read %.0f B/s under a 4 MiB/s cap", rate4)
	}
	ac.MustDo(t, "CONFIG", "SET", "repl-link-sync-rate-limit", "1mb")
	rate1, in := syncReadRate(t, bc, 1500*time.Millisecond)
	if !in {
		t.Fatal("proxy B's sync ended under a 1 MiB/s cap with over 10 MB left")
	}
	if rate1 > 1.25*(1<<20)+(1<<20)/1.5 {
		t.Errorf("proxy B read %.0f B/s after CONFIG SET of a 1 MiB/s cap (%.0f B/s under 4 MiB/s before)", rate1, rate4)
	}
	ac.MustDo(t, "CONFIG", "SET", "repl-link-sync-rate-limit", "0")
	waitLinkUp(t, bc)
	bSync := time.Since(start)
	// Both windows above (1 s and 1.5 s) ended with the sync in progress;
	// the cap is lifted after them, so the rest may go at once.
	if bSync < 2500*time.Millisecond {
		t.Errorf("proxy B's sync took %v; want at least the 2.5 s of its two paced windows", bSync)
	}
	proxies := replicasOf(a, true)
	if len(proxies) != 1 {
		t.Fatalf("A has %d downstream proxies; want 1 (B)", len(proxies))
	}
	throttled := proxies[0].Throttled()
	// Over 1 s in the 1 MiB/s window alone, unless B read slower than
	// that (slow reads need fewer sleeps): a generous bound.
	if throttled < 500*time.Millisecond {
		t.Errorf("B's payload throttled %v in all; want well over 500 ms", throttled)
	}
	link := ac.Info(t, "links")["link0"]
	_, ms, _ := strings.Cut(link, "throttled_ms=")
	if n, err := strconv.ParseInt(ms, 10, 64); err != nil || n != throttled.Milliseconds() {
		t.Errorf("INFO links link0:%s; want throttled_ms=%d", link, throttled.Milliseconds())
	}
	t.Logf("real replica in sync after %v; proxy B after %v (%.2f MiB/s at 4mb, %.2f MiB/s at 1mb, throttled %v)",
		realSync, bSync, rate4/(1<<20), rate1/(1<<20), throttled)

	// The stream after the payload is never paced, whatever the cap.
	ac.MustDo(t, "CONFIG", "SET", "repl-link-sync-rate-limit", "512kb")
	value := strings.Repeat("v", 4000)
	writes := time.Now()
	for i := 0; i < 2000; i++ {
		pc.Send("SET", "rate:stream:"+strconv.Itoa(i), value)
	}
	if err := pc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2000; i++ {
		if _, err := pc.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	want := pc.InfoInt(t, "replication", "master_repl_offset")
	redistest.WaitFor(t, 30*time.Second, "proxy B at the primary's offset", func() bool {
		return bc.InfoInt(t, "replication", "master_repl_offset") == want
	})
	caughtUp := time.Since(writes)
	if got := proxies[0].Throttled(); got != throttled {
		t.Errorf("the stream to B throttled %v", got-throttled)
	}
	if caughtUp > 10*time.Second {
		t.Errorf("8 MB of stream reached B in %v; a 512 KiB/s cap would need 15 s, and the stream is never paced", caughtUp)
	}
	t.Logf("8 MB of stream at B %v after the writes began", caughtUp)
	redistest.WaitFor(t, 30*time.Second, "the real replica at the primary's offset", func() bool {
		return rc.InfoInt(t, "replication", "master_repl_offset") == want
	})
	if pd, rd := pc.Digest(t), rc.Digest(t); pd != rd {
		t.Errorf("the real replica's digest %s; the primary's %s", rd, pd)
	}
}

// TestSyncRateLimitTooLowRefused: CONFIG SET of a repl-link-sync-rate-limit
// that could not send a downstream proxy the largest piece it reads whole
// (config.SyncRatePiece) within repl-timeout is refused with an error that
// says the least it may be, and changes nothing; so is a repl-timeout that
// would leave the cap in force below that floor. At 1 byte a second a
// downstream proxy's full sync would time out and retry forever.
func TestSyncRateLimitTooLowRefused(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	for _, tc := range []struct {
		args []string
		want string // prefix of the raw reply
	}{
		{[]string{"CONFIG", "SET", "repl-link-sync-rate-limit", "1"},
			"-ERR CONFIG SET failed - config: repl-link-sync-rate-limit: invalid value 1: at least 2202 bytes a second"},
		{[]string{"CONFIG", "GET", "repl-link-sync-rate-limit"}, "*2\r\n$25\r\nrepl-link-sync-rate-limit\r\n$1\r\n0\r\n"},
		{[]string{"CONFIG", "SET", "repl-link-sync-rate-limit", "2202"}, "+OK"},
		{[]string{"CONFIG", "SET", "repl-timeout", "30"},
			"-ERR CONFIG SET failed - config: repl-link-sync-rate-limit: invalid value 2202: at least 4404 bytes a second"},
		{[]string{"CONFIG", "GET", "repl-timeout"}, "*2\r\n$12\r\nrepl-timeout\r\n$2\r\n60\r\n"},
		{[]string{"CONFIG", "SET", "repl-link-sync-rate-limit", "0", "repl-timeout", "1"}, "+OK"},
	} {
		if got := a.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v answered %q; want %q...", tc.args, got, tc.want)
		}
	}
}

// TestSyncRatePieceIsAChunk: the floor of repl-link-sync-rate-limit is
// reckoned on the longest compressed chunk, which proxy/config (which may
// not import proxy/linkzstd) states as a number of its own.
func TestSyncRatePieceIsAChunk(t *testing.T) {
	if config.SyncRatePiece != linkzstd.MaxChunk {
		t.Fatalf("config.SyncRatePiece %d; the longest compressed chunk is %d", config.SyncRatePiece, linkzstd.MaxChunk)
	}
}

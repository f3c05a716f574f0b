package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/cachedata"
	"github.com/replproxy/replproxy/internal/netns"
	"github.com/replproxy/replproxy/internal/redistest"
)

const (
	// wanRate is the WAN's bandwidth each way in TestWANCut.
	wanRate = 100e6
	// wanCut is how long TestWANCut keeps the WAN down: a minute-long outage.
	wanCut = 60 * time.Second
	// wanReplTimeout is the proxies' repl-timeout in TestWANCut, in seconds:
	// short, so that proxy B gives up its dead link and redials within seconds
	// of the cut and of the restore rather than after Redis's 60; not shorter,
	// since on a loaded machine (load 20 on 2 cores, -race) a proxy has gone 5 s
	// without reading its primary or its replicas' ACKs.
	wanReplTimeout = "10"
	// wanDataset and wanWriteRate are the cache-like data written before the
	// syncs and, paced, all along the cut.
	wanDataset   = 8 << 20
	wanWriteRate = 128 << 10 // bytes per second
)

// startProxyIn runs replproxy (this test binary, see TestMain) inside ns, listening
// on host, with its dir and log in dir/name; args are its directives. The proxy's
// log is shown if the test fails.
func startProxyIn(t *testing.T, ns netns.Namespace, host, dir, name string, args ...string) (addr string) {
	t.Helper()
	port := redistest.FreePort(t)
	proxyDir := filepath.Join(dir, name)
	if err := os.MkdirAll(proxyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	logfile := filepath.Join(dir, name+".log")
	args = append([]string{"--bind", host, "--port", itoa(port), "--protected-mode", "no",
		"--dir", proxyDir, "--logfile", logfile}, args...)
	cmd := ns.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	cmd.Dir = proxyDir
	checkJSONLog(t, logfile)
	redistest.StartProcess(t, cmd)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logfile)
			t.Logf("%s's log:\n%s", name, b)
		}
	})
	addr = net.JoinHostPort(host, itoa(port))
	redistest.WaitFor(t, 10*time.Second, name+" listening", func() bool {
		c, err := ns.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr
}

// cacheWriter writes cache-like commands (internal/cachedata) to a primary over one
// connection, whose replies a second goroutine drains.
type cacheWriter struct {
	conn net.Conn
	gen  *cachedata.Gen
	// written counts the bytes of commands written; owned by the one goroutine
	// that writes (Fill, or run until it returns).
	written int64
	replies chan error // the draining goroutine's end: nil at EOF after Close
}

// newCacheWriter connects to the primary at addr from inside ns.
func newCacheWriter(t *testing.T, ns netns.Namespace, addr string) *cacheWriter {
	t.Helper()
	conn, err := ns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	w := &cacheWriter{conn: conn, gen: cachedata.New(22), replies: make(chan error, 1)}
	go func() {
		_, err := io.Copy(io.Discard, conn)
		w.replies <- err
	}()
	t.Cleanup(func() { conn.Close() })
	return w
}

// Fill writes at least n bytes of commands at once.
func (w *cacheWriter) Fill(n int) error {
	for n > 0 {
		chunk := w.gen.FillRESP(min(n, 64<<10))
		w.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := w.conn.Write(chunk); err != nil {
			return err
		}
		w.written += int64(len(chunk))
		n -= len(chunk)
	}
	return nil
}

// run writes rate bytes per second, in a chunk every 50 ms, until ctx ends.
func (w *cacheWriter) run(ctx context.Context, rate int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := w.Fill(rate / 20); err != nil {
				return err
			}
		}
	}
}

// TestWANCut runs on a WAN built of two network
// namespaces (internal/netns) joined by a veth pair limited to 100 Mbit/s each way:
// region A holds the primary (redis-server) and proxy A, region B proxy B, whose
// upstream is proxy A across the WAN, and three redis-server replicas of proxy B.
// Cache-like data is written before the syncs and all along; once everything is
// in sync (DEBUG DIGEST equal) through a compressed link between the proxies
// (repl-link-compression zstd on B, INFO's links section on both), the WAN is
// cut for 60 s under writes and restored. Proxy B's link to proxy A continues by partial resync (A's sync_partial_ok +1, A's
// and the primary's sync_full unchanged), the replicas in B keep their connection
// to proxy B through the cut and take no full sync (B's sync_full unchanged), and
// all end with the primary's data and offset, the link compressed again.
//
// Every server in region B listens on B's address, every one in A on A's: the WAN
// is the only way between them. The replicas' repl-timeout is 120 s, so that they
// outlast the cut (proxy B cannot ping them meanwhile: what it relays is the
// primary's stream, byte for byte); the proxies' is 10 s, so that B redials soon,
// and the primary pings every second, so that 10 s of silence means a dead link.
func TestWANCut(t *testing.T) {
	t.Parallel()
	redistest.Require(t)
	start := time.Now()
	pair := netns.NewPair(t, netns.Options{RateBitsPerSec: wanRate})
	dir := t.TempDir()

	// The primary pings every second: its PINGs, relayed by both proxies, are
	// what keeps a quiet link from looking dead within the proxies' 10 s.
	primary := redistest.StartServerIn(t, pair.A, pair.AddrA, "--repl-diskless-sync-delay", "0",
		"--repl-ping-replica-period", "1")
	pc := redistest.DialIn(t, pair.A, primary.Addr())
	w := newCacheWriter(t, pair.A, primary.Addr())
	if err := w.Fill(wanDataset); err != nil {
		t.Fatal(err)
	}

	aAddr := startProxyIn(t, pair.A, pair.AddrA, dir, "proxy-a",
		"--replicaof", pair.AddrA, itoa(primary.Port()), "--repl-timeout", wanReplTimeout)
	aHost, aPort, _ := net.SplitHostPort(aAddr)
	bAddr := startProxyIn(t, pair.B, pair.AddrB, dir, "proxy-b",
		"--replicaof", aHost, aPort, "--repl-timeout", wanReplTimeout, "--repl-link-compression", "zstd")
	ac := redistest.DialIn(t, pair.A, aAddr)
	bc := redistest.DialIn(t, pair.B, bAddr)
	_, rcs := redistest.StartReplicasIn(t, pair.B, pair.AddrB, 3, bAddr)
	for _, rc := range rcs {
		rc.MustDo(t, "CONFIG", "SET", "repl-timeout", "120")
	}
	if err := w.Fill(1 << 20); err != nil { // while the replicas sync
		t.Fatal(err)
	}
	redistest.WaitSyncedWithin(t, time.Minute, pc, rcs...)
	waitOffsets(t, pc, ac, bc)
	checkCompressed(t, "after the first sync", ac, bc)

	primaryFull := pc.InfoInt(t, "stats", "sync_full")
	aFull, aPartial := ac.InfoInt(t, "stats", "sync_full"), ac.InfoInt(t, "stats", "sync_partial_ok")
	bFull, bPartial := bc.InfoInt(t, "stats", "sync_full"), bc.InfoInt(t, "stats", "sync_partial_ok")
	wan0, _, err := pair.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("synced %v after the start: %d bytes of commands written, %d bytes crossed the WAN from A to B",
		time.Since(start).Round(time.Millisecond), w.written, wan0)

	// Writes all along the cut, paced, on the writer's connection.
	ctx, stopWrites := context.WithCancel(t.Context())
	var writes sync.WaitGroup
	var writeErr error
	writes.Go(func() { writeErr = w.run(ctx, wanWriteRate) })
	defer func() {
		stopWrites()
		writes.Wait()
	}()

	if err := pair.Cut(); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	restored := false
	defer func() {
		if !restored {
			pair.Restore()
		}
	}()
	redistest.WaitFor(t, 30*time.Second, "proxy B to see its link to A down", func() bool {
		return bc.Info(t, "replication")["master_link_status"] == "down"
	})
	// The cut lasts wanCut whatever happens meanwhile: this wait is the
	// outage itself, not a synchronisation.
	select {
	case <-time.After(time.Until(cutAt.Add(wanCut))):
	case <-t.Context().Done():
		t.Fatal("test ended during the cut")
	}
	for i, rc := range rcs {
		if got := rc.Info(t, "replication")["master_link_status"]; got != "up" {
			t.Errorf("replica %d's link to proxy B %s after the cut, want up (same connection)", i, got)
		}
	}
	if err := pair.Restore(); err != nil {
		t.Fatal(err)
	}
	restored = true
	restoredAt := time.Now()
	redistest.WaitFor(t, 30*time.Second, "proxy B's link to A up again", func() bool {
		return bc.Info(t, "replication")["master_link_status"] == "up"
	})
	t.Logf("WAN restored after a cut of %v; proxy B's link up %v later",
		restoredAt.Sub(cutAt).Round(time.Millisecond), time.Since(restoredAt).Round(time.Millisecond))
	stopWrites()
	writes.Wait()
	if writeErr != nil {
		t.Fatalf("writes to the primary: %v", writeErr)
	}
	if err := w.Fill(1 << 20); err != nil { // and after
		t.Fatal(err)
	}
	redistest.WaitSyncedWithin(t, time.Minute, pc, rcs...)
	waitOffsets(t, pc, ac, bc)
	checkCompressed(t, "after the cut", ac, bc)
	t.Logf("synced again %v after the restore", time.Since(restoredAt).Round(time.Millisecond))

	if got := pc.InfoInt(t, "stats", "sync_full"); got != primaryFull {
		t.Errorf("primary sync_full %d→%d across the cut", primaryFull, got)
	}
	if got := ac.InfoInt(t, "stats", "sync_full"); got != aFull {
		t.Errorf("proxy A sync_full %d→%d across the cut: B's link took a full sync", aFull, got)
	}
	// B's link continued by partial resync: +1 for the cut. Each further
	// reconnect (the same stall on a loaded machine) must be partial too, as
	// the unchanged sync_full says; it is logged, not failed.
	switch got := ac.InfoInt(t, "stats", "sync_partial_ok"); {
	case got < aPartial+1:
		t.Errorf("proxy A sync_partial_ok %d→%d across the cut, want +1 (B's link continued)", aPartial, got)
	case got > aPartial+1:
		t.Logf("proxy A sync_partial_ok %d→%d across the cut: B's link reconnected again after it continued, partially", aPartial, got)
	}
	if got := bc.InfoInt(t, "stats", "sync_full"); got != bFull {
		t.Errorf("proxy B sync_full %d→%d across the cut: a replica took a full sync", bFull, got)
	}
	// A replica may have reconnected meanwhile, by partial resync from B: on a
	// loaded machine proxy B has dropped replicas that had caught up over a 5 s
	// gap in their ACKs (at repl-timeout 5) while it caught up itself. That is
	// logged, not failed.
	if got := bc.InfoInt(t, "stats", "sync_partial_ok"); got != bPartial {
		t.Logf("proxy B sync_partial_ok %d→%d across the cut: a replica reconnected, partially", bPartial, got)
	}
	replid := pc.Info(t, "replication")["master_replid"]
	for i, c := range append([]*redistest.Client{ac, bc}, rcs...) {
		if got := c.Info(t, "replication")["master_replid"]; got != replid {
			t.Errorf("node %d (%s) has replid %s, the primary %s", i, c.Addr(), got, replid)
		}
	}
	wan1, _, err := pair.Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes of commands written in all; %d bytes crossed the WAN from A to B since the first sync", w.written, wan1-wan0)
}

// checkCompressed checks that the link from proxy A (ac) to proxy B (bc) is
// compressed on both sides, as INFO's links section shows it, and logs its figures.
func checkCompressed(t *testing.T, when string, ac, bc *redistest.Client) {
	t.Helper()
	up := linkFields(bc.Info(t, "links")["upstream_link"])
	down := linkFields(ac.Info(t, "links")["link0"])
	if up["compression"] != "zstd" || down["compression"] != "zstd" {
		t.Fatalf("%s: proxy B's upstream_link %v, proxy A's link0 %v: want compression=zstd on both", when, up, down)
	}
	t.Logf("%s: proxy A sent raw_bytes=%s wire_bytes=%s ratio=%s cpu_sec=%s; proxy B received raw_bytes=%s wire_bytes=%s cpu_sec=%s",
		when, down["raw_bytes"], down["wire_bytes"], down["ratio"], down["cpu_sec"], up["raw_bytes"], up["wire_bytes"], up["cpu_sec"])
}

// linkFields splits a links line's value, "compression=zstd,raw_bytes=12,...".
func linkFields(s string) map[string]string {
	fields := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			fields[k] = v
		}
	}
	return fields
}

// waitOffsets waits until every proxy's master_repl_offset is the primary's (the
// replicas' are checked, with their digests, by WaitSynced).
func waitOffsets(t *testing.T, primary *redistest.Client, proxies ...*redistest.Client) {
	t.Helper()
	redistest.WaitFor(t, time.Minute, "the proxies at the primary's offset", func() bool {
		want := primary.Info(t, "replication")["master_repl_offset"]
		for _, c := range proxies {
			if c.Info(t, "replication")["master_repl_offset"] != want {
				return false
			}
		}
		return true
	})
}

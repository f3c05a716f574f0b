package proxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/cachedata"
	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/sysmem"
)

// writeCache sends n cache-like commands (internal/cachedata) to c,
// pipelined in batches, and reads every reply.
func writeCache(t testing.TB, c *redistest.Client, g *cachedata.Gen, n int) {
	t.Helper()
	for n > 0 {
		batch := min(n, 500)
		for _, argv := range g.Commands(batch) {
			if err := c.Send(argv...); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		for range batch {
			if _, err := c.Receive(); err != nil {
				t.Fatal(err)
			}
		}
		n -= batch
	}
}

// linkFields parses the k=v fields of an INFO links line.
func linkFields(t testing.TB, line string) map[string]string {
	t.Helper()
	if line == "" {
		t.Fatal("no such INFO links line")
	}
	f := map[string]string{}
	for _, kv := range strings.Split(line, ",") {
		k, v, _ := strings.Cut(kv, "=")
		f[k] = v
	}
	return f
}

// checkCompressed fails unless a links line says its link is compressed
// and made fewer bytes on the wire than it carried.
func checkCompressed(t testing.TB, what string, f map[string]string) {
	t.Helper()
	raw, _ := strconv.ParseInt(f["raw_bytes"], 10, 64)
	wire, _ := strconv.ParseInt(f["wire_bytes"], 10, 64)
	ratio, _ := strconv.ParseFloat(f["ratio"], 64)
	if f["compression"] != "zstd" || raw == 0 || wire >= raw || ratio <= 1 {
		t.Fatalf("%s: %v; want compression=zstd with wire_bytes < raw_bytes and ratio > 1", what, f)
	}
	t.Logf("%s: raw %d, wire %d, ratio %.2f, cpu %s s", what, raw, wire, ratio, f["cpu_sec"])
}

// TestCompressedProxyChain: primary → proxy A → proxy B (asking for a
// compressed link) → 2 replicas, with cache-like writes during B's initial
// full sync and after. Every replica ends equal to the primary, B at the
// primary's offset and its replicas on the primary's replid; both proxies'
// INFO links show a compressed link that saved bytes. B's link, killed on
// A, continues by partial resync; a replica of B pointed at the primary
// continues by partial resync there.
func TestCompressedProxyChain(t *testing.T) {
	primary, pc := startPrimary(t)
	g := cachedata.New(22)
	writeCache(t, pc, g, 4000)
	a, ac := startProxyOf(t, primary)

	// Writes while B makes its first full sync (and its replicas theirs).
	stop := make(chan struct{})
	var writes sync.WaitGroup
	wc := redistest.Dial(t, primary.Addr())
	writes.Go(func() {
		wg := cachedata.New(23)
		for {
			select {
			case <-stop:
				return
			default:
			}
			writeCache(t, wc, wg, 200)
		}
	})
	b := startProxy(t, "--replicaof", "127.0.0.1", strconv.Itoa(a.Port()), "--repl-link-compression", "zstd")
	bc := redistest.Dial(t, b.AddrString())
	waitLinkUp(t, bc)
	_, rcs := redistest.StartReplicas(t, 2, b.AddrString())
	redistest.WaitFor(t, 30*time.Second, "B's replicas online", func() bool {
		for _, rc := range rcs {
			if rc.Info(t, "replication")["master_link_status"] != "up" {
				return false
			}
		}
		return true
	})
	close(stop)
	writes.Wait()
	writeCache(t, pc, g, 2000)

	redistest.WaitSynced(t, pc, rcs...)
	waitOffsetsEqual(t, pc, bc)
	replID := pc.Info(t, "replication")["master_replid"]
	for i, rc := range rcs {
		if got := rc.Info(t, "replication")["master_replid"]; got != replID {
			t.Fatalf("replica %d of B has replid %s, want the primary's %s", i, got, replID)
		}
	}
	checkCompressed(t, "A link0", linkFields(t, ac.Info(t, "links")["link0"]))
	checkCompressed(t, "B upstream_link", linkFields(t, bc.Info(t, "links")["upstream_link"]))

	// B's link killed on A: it continues by partial resync.
	partialOK := ac.InfoInt(t, "stats", "sync_partial_ok")
	fullA := ac.InfoInt(t, "stats", "sync_full")
	fullPrimary := pc.InfoInt(t, "stats", "sync_full")
	if n := ac.MustDo(t, "CLIENT", "KILL", "TYPE", "replica").String(); n != "1" {
		t.Fatalf("CLIENT KILL TYPE replica on A killed %s, want 1 (B)", n)
	}
	redistest.WaitFor(t, 15*time.Second, "B back by partial resync", func() bool {
		return ac.InfoInt(t, "stats", "sync_partial_ok") == partialOK+1 &&
			bc.Info(t, "replication")["master_link_status"] == "up"
	})
	writeCache(t, pc, g, 1000)
	redistest.WaitSynced(t, pc, rcs...)
	if got := ac.InfoInt(t, "stats", "sync_full"); got != fullA {
		t.Errorf("A's sync_full went from %d to %d across B's reconnect", fullA, got)
	}
	checkCompressed(t, "B upstream_link after the reconnect", linkFields(t, bc.Info(t, "links")["upstream_link"]))

	// A replica of B, pointed at the primary itself, continues there.
	primaryPartial := pc.InfoInt(t, "stats", "sync_partial_ok")
	host, port, _ := net.SplitHostPort(primary.Addr())
	rcs[0].MustDo(t, "REPLICAOF", host, port)
	redistest.WaitFor(t, 15*time.Second, "replica continued on the primary", func() bool {
		return pc.InfoInt(t, "stats", "sync_partial_ok") == primaryPartial+1 &&
			rcs[0].Info(t, "replication")["master_link_status"] == "up"
	})
	writeCache(t, pc, g, 500)
	redistest.WaitSynced(t, pc, rcs...)
	if got := pc.InfoInt(t, "stats", "sync_full"); got != fullPrimary {
		t.Errorf("the primary's sync_full went from %d to %d: a reconnect cost a full sync", fullPrimary, got)
	}
}

// flipTap is the A-to-B direction of a relay of a compressed
// proxy-to-proxy link (B dials the relay; it dials A): once armed, it flips
// one byte in the body of the next compressed chunk it relays, once over
// its whole life. It reads A's plain replies up to the PSYNC reply line and
// then the chunk framing (linkzstd's 12-byte headers), so that the flip
// lands in a body and the link fails by its check, not by a length that
// leaves it waiting.
type flipTap struct {
	armed   atomic.Bool
	flipped atomic.Bool
}

// relayDown copies A's direction: plain lines to the PSYNC reply, then
// chunks, one of which it may alter; it reports whether it did.
func (r *flipTap) relayDown(_ int, down io.Writer, up io.Reader) (flipped bool) {
	br := bufio.NewReader(up)
	for {
		line, err := br.ReadString('\n')
		if _, werr := io.WriteString(down, line); err != nil || werr != nil {
			return false
		}
		if strings.HasPrefix(line, "+FULLRESYNC") || strings.HasPrefix(line, "+CONTINUE") {
			break
		}
	}
	var hdr [12]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return flipped
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[0:4]))
		if _, err := io.ReadFull(br, body); err != nil {
			return flipped
		}
		if r.armed.Load() && len(body) >= 32 && r.flipped.CompareAndSwap(false, true) {
			body[len(body)/2] ^= 0xff
			flipped = true
		}
		if _, err := down.Write(append(hdr[:], body...)); err != nil {
			return flipped
		}
	}
}

// TestCompressedLinkCorrupt: one byte of the compressed stream flipped on
// the way from A to B: B logs it once, counts link_corrupt_errors 1 and
// continues by partial resync (nothing of the corrupt chunk was used), and
// its replica ends equal to the primary.
func TestCompressedLinkCorrupt(t *testing.T) {
	primary, pc := startPrimary(t)
	g := cachedata.New(7)
	writeCache(t, pc, g, 2000)
	a, ac := startProxyOf(t, primary)
	flip := &flipTap{}
	relay := redistest.StartRelay(t, "127.0.0.1:0", a.AddrString(), flip.relayDown)
	b := startProxy(t, "--replicaof", "127.0.0.1", relay.PortString(), "--repl-link-compression", "zstd")
	bc := redistest.Dial(t, b.AddrString())
	waitLinkUp(t, bc)
	_, rcs := redistest.StartReplicas(t, 1, b.AddrString())
	redistest.WaitSynced(t, pc, rcs...)
	partialOK := ac.InfoInt(t, "stats", "sync_partial_ok")
	fullA := ac.InfoInt(t, "stats", "sync_full")

	flip.armed.Store(true)
	writeCache(t, pc, g, 1000)
	redistest.WaitFor(t, 15*time.Second, "a flipped chunk", flip.flipped.Load)
	redistest.WaitFor(t, 15*time.Second, "B back by partial resync", func() bool {
		return ac.InfoInt(t, "stats", "sync_partial_ok") == partialOK+1 &&
			bc.Info(t, "replication")["master_link_status"] == "up"
	})
	writeCache(t, pc, g, 500)
	redistest.WaitSynced(t, pc, rcs...)
	if got := bc.InfoInt(t, "proxy", "link_corrupt_errors"); got != 1 {
		t.Errorf("link_corrupt_errors %d, want 1", got)
	}
	if n := b.Log.Count("compressed link corrupt, resyncing"); n != 1 {
		t.Errorf("the corrupt link was logged %d times, want once", n)
	}
	if got := ac.InfoInt(t, "stats", "sync_full"); got != fullA {
		t.Errorf("A's sync_full went from %d to %d: the corrupt link cost a full sync", fullA, got)
	}
}

// refusalLogged is what B logs, once per primary and reply, when its
// primary refuses link compression.
const refusalLogged = "primary refused link compression, the link stays plain"

// TestCompressionRefusedByRedis: a proxy asking for a
// compressed link from a real redis-server gets its refusal and a plain
// link (upstream_link compression=refused), logs the refusal exactly once
// across reconnects, and its replicas equal the primary. The same against
// valkey-server, when one is on PATH (optional: it is not built here, and
// CI does not require it).
func TestCompressionRefusedByRedis(t *testing.T) {
	t.Run("redis-server", func(t *testing.T) {
		primary, pc := startPrimary(t)
		refusedByServer(t, primary, pc)
	})
	t.Run("valkey-server", func(t *testing.T) {
		bin, err := exec.LookPath("valkey-server")
		if err != nil {
			t.Skip("valkey-server is not on PATH (optional, not under CI): the redis-server case ran")
		}
		primary := redistest.StartServerBinary(t, bin, "--repl-diskless-sync-delay", "0")
		refusedByServer(t, primary, redistest.Dial(t, primary.Addr()))
	})
}

func refusedByServer(t *testing.T, primary *redistest.Server, pc *redistest.Client) {
	g := cachedata.New(9)
	writeCache(t, pc, g, 1000)
	p, xc := startProxyOf(t, primary, "--repl-link-compression", "zstd")
	_, rcs := redistest.StartReplicas(t, 2, p.AddrString())
	redistest.WaitSynced(t, pc, rcs...)
	for i := range 2 {
		connects := xc.InfoInt(t, "proxy", "upstream_connects")
		pc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
		redistest.WaitFor(t, 15*time.Second, "the proxy reconnected", func() bool {
			return xc.InfoInt(t, "proxy", "upstream_connects") > connects &&
				xc.Info(t, "replication")["master_link_status"] == "up"
		})
		writeCache(t, pc, g, 300)
		redistest.WaitSynced(t, pc, rcs...)
		t.Logf("reconnect %d done", i+1)
	}
	if f := linkFields(t, xc.Info(t, "links")["upstream_link"]); f["compression"] != "refused" || f["wire_bytes"] != "0" {
		t.Errorf("upstream_link %v, want compression=refused and no compressed bytes", f)
	}
	if n := p.Log.Count(refusalLogged); n != 1 {
		t.Errorf("the refusal was logged %d times over 3 connections, want once:\n%s", n, p.Log.String())
	}
	if !p.Log.Contains("Unrecognized REPLCONF option") {
		t.Errorf("the log does not give the primary's reply")
	}
	// capa replproxy rides on the capa REPLCONF, which the server accepts
	// (it ignores a capa it does not know) rather than refuses.
	if p.Log.Contains("primary refused a handshake option") {
		t.Errorf("the server refused a handshake option (capa replproxy?):\n%s", p.Log.String())
	}
}

// TestCompressionRefusedByProxy: an upstream proxy with
// repl-link-compression-allow no refuses, with its reason; the link stays
// plain on both sides and the data equal.
func TestCompressionRefusedByProxy(t *testing.T) {
	primary, pc := startPrimary(t)
	g := cachedata.New(11)
	writeCache(t, pc, g, 1000)
	a, ac := startProxyOf(t, primary, "--repl-link-compression-allow", "no")
	b := startProxy(t, "--replicaof", "127.0.0.1", strconv.Itoa(a.Port()), "--repl-link-compression", "zstd")
	bc := redistest.Dial(t, b.AddrString())
	waitLinkUp(t, bc)
	_, rcs := redistest.StartReplicas(t, 1, b.AddrString())
	writeCache(t, pc, g, 500)
	redistest.WaitSynced(t, pc, rcs...)
	if f := linkFields(t, bc.Info(t, "links")["upstream_link"]); f["compression"] != "refused" {
		t.Errorf("B's upstream_link %v, want compression=refused", f)
	}
	f := linkFields(t, ac.Info(t, "links")["link0"])
	if f["compression"] != "no" || f["ratio"] != "1.00" || f["raw_bytes"] != f["wire_bytes"] || f["raw_bytes"] == "0" {
		t.Errorf("A's link0 %v, want a plain link (compression=no, ratio=1.00, raw = wire > 0)", f)
	}
	if n := b.Log.Count(refusalLogged); n != 1 || !b.Log.Contains("repl-link-compression-allow is no") {
		t.Errorf("B logged the refusal %d times (want once, with A's reason):\n%s", n, b.Log.String())
	}

	// CONFIG SET on A applies from B's next connection.
	ac.MustDo(t, "CONFIG", "SET", "repl-link-compression-allow", "yes")
	if got := ac.MustDo(t, "CONFIG", "GET", "repl-link-compression-allow").String(); !strings.Contains(got, "yes") {
		t.Fatalf("CONFIG GET repl-link-compression-allow: %s", got)
	}
	ac.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	redistest.WaitFor(t, 15*time.Second, "B back on a compressed link", func() bool {
		return linkFields(t, bc.Info(t, "links")["upstream_link"])["compression"] == "zstd" &&
			bc.Info(t, "replication")["master_link_status"] == "up"
	})
	writeCache(t, pc, g, 500)
	redistest.WaitSynced(t, pc, rcs...)
	checkCompressed(t, "A link0 after CONFIG SET", linkFields(t, ac.Info(t, "links")["link0"]))
}

// TestCompressedLinksMemory: 100 downstream proxies that asked for a
// compressed link (the cap raised to 100) hold an encoder each, counted in
// used_memory as mem_link_compression (and in mem_not_counted_for_evict,
// as replicas' buffers are): used_memory grows with the Go heap, and
// /metrics shows the category, the categories adding up to used memory. The 101st
// is refused, as repl-link-compression-allow no refuses, logged, and keeps
// a plain link. Once the 100 close, mem_link_compression is 0 and within
// 10 s the memory is given back, within the slack of any release (32 MiB,
// sysmem.ReturnMemoryDrop): the live Go heap comes back to what it was before
// them, and what the process keeps to used_memory, each within it, without
// waiting for the runtime's forced collection; the cap's slots are free
// again.
func TestCompressedLinksMemory(t *testing.T) {
	const links = 100
	h := startFakePrimary(t, fakeGoodMain(0), nil)
	p := newTestProxy(t, proxySetup{level: hclog.Warn, args: append(h.replicaOf(),
		"--repl-log-size", "0", "--repl-link-compression-max-links", strconv.Itoa(links))})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	replID := xc.Info(t, "replication")["master_replid"]
	memory := func() (used, link, notCounted int64) {
		m := xc.Info(t, "memory")
		used, _ = strconv.ParseInt(m["used_memory"], 10, 64)
		link, _ = strconv.ParseInt(m["mem_link_compression"], 10, 64)
		notCounted, _ = strconv.ParseInt(m["mem_not_counted_for_evict"], 10, 64)
		return used, link, notCounted
	}
	// ask opens a downstream proxy's connection and asks for compression:
	// the reply to REPLCONF link-compression zstd.
	ask := func() (*rawReplica, string) {
		r := newRawReplica(t, p)
		if err := r.send("REPLCONF", "capa", "replproxy", "capa", "psync2"); err != nil {
			t.Fatal(err)
		}
		if line, err := r.readLine(); err != nil || line != "+OK" {
			t.Fatalf("REPLCONF capa: %q %v", line, err)
		}
		if err := r.send("REPLCONF", "link-compression", "zstd"); err != nil {
			t.Fatal(err)
		}
		line, err := r.readLine()
		if err != nil {
			t.Fatal(err)
		}
		return r, line
	}
	// resume continues r from the proxy's offset: +CONTINUE.
	resume := func(r *rawReplica) {
		off := xc.InfoInt(t, "replication", "master_repl_offset")
		if line, err := r.psync(replID, strconv.FormatInt(off+1, 10)); err != nil || line != "+CONTINUE "+replID {
			t.Fatalf("PSYNC: %q %v", line, err)
		}
	}

	var before, with runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	liveBefore := liveHeap()
	used0, link0, notCounted0 := memory()
	if link0 != 0 {
		t.Fatalf("mem_link_compression %d before any link", link0)
	}
	rs := make([]*rawReplica, links)
	for i := range rs {
		r, line := ask()
		if line != "+OK" {
			t.Fatalf("link %d: REPLCONF link-compression zstd answered %q", i, line)
		}
		resume(r)
		rs[i] = r
	}
	want := int64(links) * linkzstd.WriterMemory
	redistest.WaitFor(t, 10*time.Second, "every link's encoder counted", func() bool {
		_, link, _ := memory()
		return link == want
	})
	used1, link1, notCounted1 := memory()
	runtime.GC()
	runtime.ReadMemStats(&with)
	heap := int64(with.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d compressed links: used_memory +%d KiB (mem_link_compression %d KiB), Go heap +%d KiB",
		links, (used1-used0)>>10, link1>>10, heap>>10)
	if used1-used0 < link1 || notCounted1-notCounted0 < link1 {
		t.Errorf("used_memory grew by %d and mem_not_counted_for_evict by %d; want both at least mem_link_compression, %d",
			used1-used0, notCounted1-notCounted0, link1)
	}
	if used1-used0 < heap*8/10 {
		t.Errorf("used_memory grew by %d while the Go heap grew by %d: the links' memory is not counted", used1-used0, heap)
	}
	// /metrics: a category of its own, and the categories still add up.
	_, m := renderReport(t, p.Server, p.report(reportAll))
	sum := 0.0
	for series, v := range m {
		if strings.HasPrefix(series, "replproxy_memory_bytes{") {
			sum += v
		}
	}
	if got := m[`replproxy_memory_bytes{category="link_compression"}`]; got != float64(want) || sum != m["replproxy_used_memory_bytes"] {
		t.Errorf("replproxy_memory_bytes{category=\"link_compression\"} %v, want %d; the categories add up to %v, used memory %v",
			got, want, sum, m["replproxy_used_memory_bytes"])
	}

	// Past the cap: refused, logged, and the link stays plain.
	r, line := ask()
	if want := "-ERR link-compression refused: repl-link-compression-max-links (100) reached"; line != want {
		t.Fatalf("link %d: REPLCONF link-compression zstd answered %q; want %q", links+1, line, want)
	}
	resume(r)
	for _, want := range []string{"*1", "$4", "PING"} { // the fake primary's next PING, plain
		if line, err := r.readLine(); err != nil || line != want {
			t.Fatalf("the refused link's stream: %q %v; want %q, plain", line, err, want)
		}
	}
	if !p.Log.Contains("compressed link refused: repl-link-compression-max-links reached") {
		t.Error("no log line says why the link was refused")
	}
	if _, link, _ := memory(); link != want {
		t.Errorf("mem_link_compression %d with a plain link more; want %d", link, want)
	}
	r.conn.Close()

	// Closed: counted no more, and given back.
	for _, r := range rs {
		r.conn.Close()
	}
	redistest.WaitFor(t, 10*time.Second, "the links' encoders released", func() bool {
		_, link, _ := memory()
		return link == 0
	})
	// The encoders are garbage: the monitor sees used_memory fall and has
	// them collected and returned, so the heap the last collection found
	// live comes back to what it was (with no collection, it would hold
	// them until the runtime's forced one, two minutes on), and the
	// process keeps no more than after any release. Both within
	// sysmem.ReturnMemoryDrop: the monitor returns memory once used_memory has
	// fallen that far, so a collection may come while the last links
	// still close, and a tail smaller than that waits for the runtime's
	// own. The live heap, not HeapAlloc: what the test and the proxy
	// allocate after that collection is not the links' and is counted in
	// HeapAlloc until the next one.
	var used, retained, live int64
	if !redistest.Poll(10*time.Second, func() bool {
		used, retained, live = p.mem.report().UsedMemory, retainedMemory(), liveHeap()
		return live <= liveBefore+sysmem.ReturnMemoryDrop && retained <= used+sysmem.ReturnMemoryDrop
	}) {
		t.Fatalf("10 s after the links closed: live heap %d MiB (%d MiB before the links, at most +%d MiB wanted), retained %d MiB, used_memory %d MiB (retained at most used_memory + %d MiB wanted)",
			live>>20, liveBefore>>20, sysmem.ReturnMemoryDrop>>20, retained>>20, used>>20, sysmem.ReturnMemoryDrop>>20)
	}
	t.Logf("closed: used_memory %d MiB, retained %d MiB, live heap %d MiB (%d MiB before the links)",
		used>>20, retained>>20, live>>20, liveBefore>>20)
	r, line = ask()
	if line != "+OK" {
		t.Fatalf("after the links closed, REPLCONF link-compression zstd answered %q", line)
	}
	// CONFIG SET applies to the next handshake: the link above holds the
	// one slot of a cap of 1.
	xc.MustDo(t, "CONFIG", "SET", "repl-link-compression-max-links", "1")
	if got := xc.MustDo(t, "CONFIG", "GET", "repl-link-compression-max-links").String(); !strings.Contains(got, "1") {
		t.Fatalf("CONFIG GET repl-link-compression-max-links: %s", got)
	}
	r2, line := ask()
	if want := "-ERR link-compression refused: repl-link-compression-max-links (1) reached"; line != want {
		t.Fatalf("under CONFIG SET repl-link-compression-max-links 1, a second link: %q; want %q", line, want)
	}
	r2.conn.Close()
	r.conn.Close()
}

// TestCompressionAgreedOnlyByOK: link compression is agreed only by the
// proxy's +OK to REPLCONF. A REPLCONF that asks for zstd and is refused as
// a whole (a bad option after it, a bad value before it), or that carries
// an ACK and so gets no answer, leaves the link plain: the stream after
// +CONTINUE is the primary's commands as they are, and no slot of
// repl-link-compression-max-links is held. Asked for alone, zstd is agreed
// and the stream is compressed.
func TestCompressionAgreedOnlyByOK(t *testing.T) {
	h := startFakePrimary(t, fakeGoodMain(0), nil)
	p := newTestProxy(t, proxySetup{args: append(h.replicaOf(), "--repl-log-size", "0", "--repl-link-compression-max-links", "1")})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	replID := xc.Info(t, "replication")["master_replid"]
	for _, tc := range []struct {
		args  []string
		reply string // "" for none
	}{
		{[]string{"REPLCONF", "link-compression", "zstd", "bogus", "1"}, "-ERR Unrecognized REPLCONF option: bogus"},
		{[]string{"REPLCONF", "link-compression", "zstd", "listening-port", "x"}, "-ERR value is not an integer or out of range"},
		{[]string{"REPLCONF", "link-compression", "zstd", "rdb-only", "2"}, "-ERR value is out of range, value must between 0 and 1"},
		{[]string{"REPLCONF", "link-compression", "zstd", "link-compression", "lz4"}, "-ERR Unsupported link-compression: lz4"},
		{[]string{"REPLCONF", "link-compression", "zstd", "ACK", "5"}, ""},
	} {
		r := newRawReplica(t, p)
		if err := r.send("REPLCONF", "capa", "replproxy", "capa", "psync2"); err != nil {
			t.Fatal(err)
		}
		if line, err := r.readLine(); err != nil || line != "+OK" {
			t.Fatalf("REPLCONF capa: %q %v", line, err)
		}
		if err := r.send(tc.args...); err != nil {
			t.Fatal(err)
		}
		if tc.reply != "" {
			if line, err := r.readLine(); err != nil || line != tc.reply {
				t.Fatalf("%q: %q %v; want %q", tc.args, line, err, tc.reply)
			}
		}
		if held := p.replicas.linkSlots.Held(); held != 0 {
			t.Errorf("%q: %d compressed links held after it", tc.args, held)
		}
		off := xc.InfoInt(t, "replication", "master_repl_offset")
		if line, err := r.psync(replID, strconv.FormatInt(off+1, 10)); err != nil || line != "+CONTINUE "+replID {
			t.Fatalf("%q, then PSYNC: %q %v", tc.args, line, err)
		}
		for _, want := range []string{"*1", "$4", "PING"} { // the fake primary's next PING, plain
			if line, err := r.readLine(); err != nil || line != want {
				t.Fatalf("%q, then the stream: %q %v; want %q, plain", tc.args, line, err, want)
			}
		}
		r.conn.Close()
	}

	// Alone, zstd is agreed: +OK, a slot held, and the stream compressed.
	r := newRawReplica(t, p)
	for _, cmd := range [][]string{{"REPLCONF", "capa", "replproxy", "capa", "psync2"}, {"REPLCONF", "link-compression", "zstd"}} {
		if err := r.send(cmd...); err != nil {
			t.Fatal(err)
		}
		if line, err := r.readLine(); err != nil || line != "+OK" {
			t.Fatalf("%q: %q %v", cmd, line, err)
		}
	}
	if held := p.replicas.linkSlots.Held(); held != 1 {
		t.Errorf("%d compressed links held after an agreed one, want 1", held)
	}
	off := xc.InfoInt(t, "replication", "master_repl_offset")
	if line, err := r.psync(replID, strconv.FormatInt(off+1, 10)); err != nil || line != "+CONTINUE "+replID {
		t.Fatalf("PSYNC: %q %v", line, err)
	}
	r.conn.SetReadDeadline(time.Now().Add(fakeIOTimeout))
	head := make([]byte, 4)
	if _, err := io.ReadFull(r.br, head); err != nil || string(head) == "*1\r\n" {
		t.Errorf("the agreed link's stream starts %q (%v): plain, want compressed", head, err)
	}
}

package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestUnpublishedTailBounded: a primary that opens a MULTI and never sends
// its EXEC makes the proxy hold what follows unpublished (no replica may see
// half a transaction). Those bytes count in INFO memory meanwhile; past
// master-query-buffer-limit the link is dropped, logged and counted, the
// bytes go, and the link resumes by PSYNC from the last whole command.
func TestUnpublishedTailBounded(t *testing.T) {
	const limit = 4 << 20
	h := startFakePrimary(t, fakeHandOver, nil)
	p := startProxy(t, append(h.replicaOf(), "--repl-timeout", "10", "--master-query-buffer-limit", strconv.Itoa(limit))...)
	xc := redistest.Dial(t, p.AddrString())
	hc := h.next(t)
	if err := hc.fullSync(); err != nil {
		t.Fatal(err)
	}
	waitLinkUp(t, xc)
	start := xc.InfoInt(t, "replication", "master_repl_offset")

	set := linkRESP("SET", "k", strings.Repeat("v", 64<<10))
	sent := 0
	write := func(upTo int) error {
		for ; sent < upTo; sent += len(set) {
			if err := hc.write(set); err != nil {
				return err
			}
		}
		return nil
	}
	hc.mustWrite(t, linkRESP("MULTI"))
	sent = len(linkRESP("MULTI"))
	if err := write(limit / 2); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 10*time.Second, "half the limit read", func() bool {
		return xc.InfoInt(t, "replication", "slave_read_repl_offset") == start+int64(sent)
	})
	mem := xc.Info(t, "memory")
	normal, _ := strconv.ParseInt(mem["mem_clients_normal"], 10, 64)
	t.Logf("%d bytes of an open MULTI held: mem_clients_normal %d", sent, normal)
	if normal < int64(sent)-2*16<<10 {
		t.Errorf("mem_clients_normal %d with %d unpublished bytes held: not counted", normal, sent)
	}
	if got := xc.InfoInt(t, "replication", "master_repl_offset"); got != start {
		t.Fatalf("master_repl_offset %d: part of an open MULTI was published (want %d)", got, start)
	}

	// Three times the limit: the proxy drops the link once past it (a
	// write may then fail; the rest is not sent).
	write(3 * limit)
	hc.waitHangUp(t)
	if got := xc.InfoInt(t, "proxy", "upstream_query_buffer_limit_drops"); got != 1 {
		t.Errorf("upstream_query_buffer_limit_drops:%d, want 1", got)
	}
	hc = h.next(t)
	if want := "PSYNC " + linkReplID + " " + strconv.FormatInt(start+1, 10); hc.psync != want {
		t.Errorf("after the drop the proxy sent %q, want %q: resume from the last whole command", hc.psync, want)
	}
	if !p.Log.Contains("over master-query-buffer-limit") {
		t.Error("no log line says why the link was dropped")
	}
	if got := xc.InfoInt(t, "memory", "mem_clients_normal"); got > 1<<20 {
		t.Errorf("mem_clients_normal %d after the drop: the unpublished bytes were kept", got)
	}
	if got := xc.InfoInt(t, "replication", "slave_read_repl_offset"); got != start {
		t.Errorf("slave_read_repl_offset %d after the drop, want %d", got, start)
	}
}

package proxy

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/acl"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/report"
)

// TestMinSoftWaitIsARound: a client over its soft output limit is given
// at least a round of the monitor to write.
func TestMinSoftWaitIsARound(t *testing.T) {
	if minSoftWait != monitorInterval {
		t.Fatalf("minSoftWait %v, the monitor's round %v", minSoftWait, monitorInterval)
	}
}

// TestClientOnItsOwn: a client needs nothing of the server but what every
// client shares: it writes its replies, counts them, and lists itself.
func TestClientOnItsOwn(t *testing.T) {
	var conf liveConfig
	conf.cur.Store(newSettings(config.DefaultConfig(), nil))
	var stats report.Stats
	var limitLog logLimiter
	server, peer := net.Pipe()
	defer peer.Close()
	users := acl.NewUsers()
	c := newClient(7, server, clientShared{conf: &conf, stats: &stats, limitLog: &limitLog}, hclog.NewNullLogger(), users.Default(), true)
	defer c.conn.Close()
	if !c.authed || c.rd.Limits().Unauthenticated {
		t.Fatal("a client of an open default user must not need AUTH")
	}
	name := "mine"
	c.name.Store(&name)
	c.out = append(c.out, "+PONG\r\n"...)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 7)
		io.ReadFull(peer, b)
		got <- string(b)
	}()
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r != "+PONG\r\n" {
		t.Fatalf("flushed %q", r)
	}
	if n := stats.NetOutputBytes.Load(); n != 7 {
		t.Errorf("NetOutputBytes %d, want 7", n)
	}
	if line := c.infoLine(); !strings.HasPrefix(line, "id=7 ") || !strings.Contains(line, " name=mine ") || !strings.Contains(line, " user=default") {
		t.Errorf("CLIENT LIST line %q", line)
	}
}

func TestNormalOutputBufferLimit(t *testing.T) {
	p := startProxy(t, "--client-output-buffer-limit", "normal 100kb 0 0")
	a := adminDial(t, p)
	if got := a.do("ECHO", strings.Repeat("x", 50000)); len(got) != 50000+len("$50000\r\n\r\n") {
		t.Fatalf("a reply under the hard limit: %.40q", got)
	}
	a.send(bulkCommand(200000, "ECHO"))
	a.expectClosed()
	if got := infoField(p, "stats", "client_output_buffer_limit_disconnections"); got != "1" {
		t.Fatalf("client_output_buffer_limit_disconnections %q, want 1", got)
	}
	// The replica class is not the normal one: replicas keep their own limit.
	if got := adminDial(t, p).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("another client: %q", got)
	}
}

func TestOutputLimitSoft(t *testing.T) {
	p := startProxy(t, "--client-output-buffer-limit", "normal 0 1mb 1")
	// A client that reads its 4 MiB reply at once stays.
	a := adminDial(t, p)
	a.send(bulkCommand(4<<20, "ECHO"))
	if got := a.reply(); len(got) != 4<<20+len("$4194304\r\n\r\n") {
		t.Fatalf("a 4 MiB reply read at once: %.40q", got)
	}
	if got := infoField(p, "stats", "client_output_buffer_limit_disconnections"); got != "0" {
		t.Fatalf("a client that reads was closed: %q", got)
	}
	// One that does not read is closed after the soft period, long before the
	// write timeout.
	b := adminDial(t, p)
	start := time.Now()
	b.send(bulkCommand(32<<20, "ECHO"))
	redistest.WaitFor(t, 5*time.Second, "the slow reader closed for its output buffer", func() bool {
		return infoField(p, "stats", "client_output_buffer_limit_disconnections") == "1"
	})
	if d := time.Since(start); d < time.Second {
		t.Fatalf("closed after %v, before the soft period of 1s", d)
	}
	b.expectClosed()
}

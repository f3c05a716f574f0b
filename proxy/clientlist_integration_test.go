package proxy

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestClientListFDAndIdle: CLIENT LIST's fd= is each connection's socket
// descriptor (this process's, the proxy running in it), distinct per
// client; and a streaming replica's idle= stays at 0 or 1 as it ACKs every
// second, as the primary's CLIENT LIST shows the proxy itself, instead of
// counting from its last command (PSYNC).
func TestClientListFDAndIdle(t *testing.T) {
	p, pc := startPrimary(t)
	proxy, xc := startProxyOf(t, p)
	phost, pport, _ := strings.Cut(proxy.AddrString(), ":")
	r := redistest.StartServer(t, "--replicaof", phost, pport)
	rc := redistest.Dial(t, r.Addr())
	pc.MustDo(t, "SET", "k", "v")
	redistest.WaitSynced(t, pc, rc)

	replicaLine := func(c *redistest.Client) map[string]string {
		for _, l := range c.ClientList(t) {
			if strings.Contains(l["flags"], "S") {
				return l
			}
		}
		t.Fatalf("%s: no replica in CLIENT LIST", c.Addr())
		return nil
	}
	// Long enough for an idle= counted from PSYNC to show.
	redistest.WaitFor(t, 10*time.Second, "the replica's connection to be 3 s old", func() bool {
		age, _ := strconv.Atoi(replicaLine(xc)["age"])
		return age >= 3
	})
	for _, c := range []*redistest.Client{xc, pc} {
		l := replicaLine(c)
		if idle, err := strconv.Atoi(l["idle"]); err != nil || idle > 1 {
			t.Errorf("%s: a streaming replica shows idle=%s age=%s, want 0 or 1 (it ACKs every second)", c.Addr(), l["idle"], l["age"])
		}
	}

	seen := map[string]bool{}
	for _, l := range xc.ClientList(t) {
		fd, err := strconv.Atoi(l["fd"])
		if err != nil || fd <= 2 || seen[l["fd"]] {
			t.Errorf("client %s: fd=%s, want a descriptor of its own", l["id"], l["fd"])
			continue
		}
		seen[l["fd"]] = true
		if link, err := os.Readlink("/proc/self/fd/" + l["fd"]); err != nil || !strings.HasPrefix(link, "socket:") {
			t.Errorf("client %s: fd=%s is %q (%v), not a socket of the proxy's", l["id"], l["fd"], link, err)
		}
	}
}

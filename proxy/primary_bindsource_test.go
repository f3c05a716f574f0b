package proxy

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// remoteIP is the address the primary sees a link come from.
func remoteIP(c net.Conn) string { return c.RemoteAddr().(*net.TCPAddr).IP.String() }

// TestBindSourceAddr: bind-source-addr (Redis 7.0's) is the address the
// primary sees the proxy's connections come from, the main link's and the
// snapshot fetches' alike; CONFIG SET moves the next connection, and ""
// gives the choice back to the kernel; a value that is not one address is
// refused and leaves the one in force. The whole of 127.0.0.0/8 is local on
// Linux, so 127.0.0.2 and 127.0.0.3 can be bound.
func TestBindSourceAddr(t *testing.T) {
	mains := make(chan *fakeLink, 16)
	sides := make(chan string, 16)
	h := startFakePrimary(t, func(hc *fakeLink) error {
		select {
		case mains <- hc:
		case <-hc.primary.done:
			return nil
		}
		return fakeGoodMain(hostileBurst)(hc)
	}, func(hc *fakeLink) error {
		select {
		case sides <- remoteIP(hc.conn):
		case <-hc.primary.done:
			return nil
		}
		return hc.goodFetch()
	})
	// No stream log, and a small backlog (startHostileProxy's): the burst
	// after each sync leaves the proxy's snapshot unservable, so that a
	// replica's full sync needs a fetch, on a side link.
	p := startHostileProxy(t, h, "--repl-log-size", "0", "--bind-source-addr", "127.0.0.2")
	xc := redistest.Dial(t, p.AddrString())

	nextMain := func() *fakeLink {
		t.Helper()
		select {
		case hc := <-mains:
			return hc
		case <-time.After(10 * time.Second):
			t.Fatal("no main link within 10s")
			return nil
		}
	}
	// fetched makes a replica's full sync fetch a snapshot and returns
	// where the side link came from.
	fetched := func() string {
		t.Helper()
		redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool { return xc.Info(t, "replication")["master_link_status"] == "up" })
		waitSnapshotUnservable(t, p)
		if err := dialRawReplica(t, p, false).fullSync(h, "?", "-1"); err != nil {
			t.Fatal(err)
		}
		select {
		case from := <-sides:
			return from
		case <-time.After(10 * time.Second):
			t.Fatal("the full sync fetched no snapshot")
			return ""
		}
	}

	link := nextMain()
	if got := remoteIP(link.conn); got != "127.0.0.2" {
		t.Fatalf("the main link comes from %s, want 127.0.0.2 (bind-source-addr)", got)
	}
	if got := configGet(t, xc, "bind-source-addr"); got != "127.0.0.2" {
		t.Fatalf("CONFIG GET bind-source-addr = %q", got)
	}
	if got := fetched(); got != "127.0.0.2" {
		t.Fatalf("the snapshot fetch comes from %s, want 127.0.0.2 (bind-source-addr)", got)
	}

	for _, bad := range []string{"127.0.0.3:6379", "127.0.0.3 127.0.0.4", "[::1]"} {
		if _, err := xc.Do("CONFIG", "SET", "bind-source-addr", bad); err == nil || !strings.Contains(err.Error(), "bind-source-addr") {
			t.Errorf("CONFIG SET bind-source-addr %q: %v, want it refused", bad, err)
		}
	}
	if got := configGet(t, xc, "bind-source-addr"); got != "127.0.0.2" {
		t.Fatalf("CONFIG GET bind-source-addr = %q after refused values, want 127.0.0.2", got)
	}

	// The link in place stays where it is; the next one, and the fetches
	// after it, come from the new address.
	for _, tc := range []struct{ set, want string }{{"127.0.0.3", "127.0.0.3"}, {"", "127.0.0.1"}} {
		xc.MustDo(t, "CONFIG", "SET", "bind-source-addr", tc.set)
		link.conn.Close() // the primary drops the link
		link = nextMain()
		if got := remoteIP(link.conn); got != tc.want {
			t.Fatalf("after CONFIG SET bind-source-addr %q the main link comes from %s, want %s", tc.set, got, tc.want)
		}
		if got := fetched(); got != tc.want {
			t.Fatalf("after CONFIG SET bind-source-addr %q the snapshot fetch comes from %s, want %s", tc.set, got, tc.want)
		}
	}
}

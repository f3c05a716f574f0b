package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/downstream"
)

// waitInfoCount waits until INFO proxy shows key at want.
func waitInfoCount(t testing.TB, p *testProxy, key string, want int) {
	t.Helper()
	redistest.WaitFor(t, 5*time.Second, key+" at "+strconv.Itoa(want), func() bool {
		return infoField(p, "proxy", key) == strconv.Itoa(want)
	})
}

// TestClientCloseReasons: an admin client's close is counted under its
// reason, once.
func TestClientCloseReasons(t *testing.T) {
	p := startProxy(t)
	for _, r := range []downstream.CloseReason{downstream.ClosedByPeer, downstream.CloseQuit, downstream.CloseKilled, downstream.CloseProtocolError} {
		if got := infoField(p, "proxy", "clients_closed_"+r.String()); got != "0" {
			t.Fatalf("clients_closed_%s %q at start", r, got)
		}
	}

	a := adminDial(t, p)
	if got := a.do("QUIT"); got != "+OK\r\n" {
		t.Fatalf("QUIT: %q", got)
	}
	waitInfoCount(t, p, "clients_closed_quit", 1)

	b := adminDial(t, p)
	b.do("PING")
	b.conn.Close()
	waitInfoCount(t, p, "clients_closed_closed_by_peer", 1)

	victim, killer := adminDial(t, p), adminDial(t, p)
	id := victim.do("CLIENT", "ID")[1:]
	if got := killer.do("CLIENT", "KILL", "ID", id[:len(id)-2]); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL: %q", got)
	}
	waitInfoCount(t, p, "clients_closed_killed", 1)

	c := adminDial(t, p)
	c.send([]byte("*1\r\n$x\r\n"))
	waitInfoCount(t, p, "clients_closed_protocol_error", 1)

	if got := infoField(p, "proxy", "clients_closed_closed_by_peer"); got != "1" {
		t.Errorf("clients_closed_closed_by_peer %s after the other closes, want 1", got)
	}
}

// TestReplicaCloseReasons: a replica's close is counted under its reason:
// CLIENT KILL, the replica hanging up, and a new generation upstream.
func TestReplicaCloseReasons(t *testing.T) {
	prim, p, xc, sess := startStreamProxy(t)
	sess.mustWrite(t, sess.fullResync()+sess.payload())
	waitLinkUp(t, xc)

	attachRawReplica(t, p, linkOffset+1)
	a := adminDial(t, p)
	if got := a.do("CLIENT", "KILL", "TYPE", "replica"); got != ":1\r\n" {
		t.Fatalf("CLIENT KILL TYPE replica: %q", got)
	}
	waitInfoCount(t, p, "replicas_closed_killed", 1)

	r := attachRawReplica(t, p, linkOffset+1)
	r.conn.Close()
	waitInfoCount(t, p, "replicas_closed_closed_by_peer", 1)

	attachRawReplica(t, p, linkOffset+1)
	sess.conn.Close() // the link ends; the next one gets a full resync
	sess = prim.next(t)
	sess.mustWrite(t, sess.fullResync()+sess.payload())
	waitInfoCount(t, p, "replicas_closed_generation_changed", 1)

	if got := infoField(p, "proxy", "replicas_dropped"); got != "0" {
		t.Errorf("replicas_dropped %s: none of these is a drop", got)
	}
}

// TestServerClose: Close stops a running server and may be called again, at
// once or later; a closed server does not run again, and one that never ran
// can be closed too.
func TestServerClose(t *testing.T) {
	p := startProxy(t)
	if got := adminDial(t, p).do("PING"); got != "+PONG\r\n" { // Run is serving
		t.Fatalf("PING: %q", got)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { p.Close() })
	}
	wg.Wait()
	if _, err := net.Dial("tcp", p.AddrString()); err == nil {
		t.Error("the listener still accepts after Close")
	}
	if err := p.stop(); err != nil { // Run returned, and cleanly
		t.Error(err)
	}
	p.Close()
	if err := p.Run(context.Background()); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Run after Close: %v, want ErrServerClosed", err)
	}

	idle := linkNewServer(t, hclog.Off)
	idle.Close()
	idle.Close()
	if _, err := net.Dial("tcp", idle.Addr().String()); err == nil {
		t.Error("a server that never ran still accepts after Close")
	}
}

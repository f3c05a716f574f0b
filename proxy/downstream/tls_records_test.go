package downstream

import (
	"bytes"
	"crypto/tls"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestRecordConnOrder: what a capture's write does not take waits, and
// every later write, captured or not, from any goroutine, reaches the
// socket after it and in the order written; a capture is refused while
// bytes wait, and Flush sends them.
func TestRecordConnOrder(t *testing.T) {
	peer, conn := redistest.TCPPair(t)
	rc := NewRecordConn(conn)
	var want bytes.Buffer
	put := func(s string) {
		t.Helper()
		if _, err := rc.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		want.WriteString(s)
	}
	half := func(p []byte) int { // a socket that takes half of the first write
		n := len(p) / 2
		if _, err := conn.Write(p[:n]); err != nil {
			t.Error(err)
		}
		return n
	}
	if !rc.capture(half) {
		t.Fatal("capture refused on an idle connection")
	}
	put("first record;")
	// Another goroutine's record while the capture runs (crypto/tls's
	// own, in the proxy): kept after the first's rest, without blocking.
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := rc.Write([]byte("second;")); err != nil {
			t.Error(err)
		}
	}()
	<-done
	want.WriteString("second;")
	if !rc.release() {
		t.Fatal("release: nothing left, though the socket took half")
	}
	if rc.capture(half) {
		t.Fatal("capture granted while records wait")
	}
	put("third;") // not captured: sent after what waits
	if n := rc.Pending(); n != 0 {
		t.Fatalf("%d bytes pending after an uncaptured write", n)
	}
	if !rc.capture(func(p []byte) int { return 0 }) { // a full socket
		t.Fatal("capture refused on an idle connection")
	}
	put("fourth;")
	if !rc.release() {
		t.Fatal("release: nothing left, though the socket took nothing")
	}
	if err := rc.Flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, want.Len())
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatalf("the socket got %q, want %q", got, want.String())
	}
}

// replicaTLS is replica for a replica over TLS, its server side on a
// RecordConn as the proxy's listener makes it; the test reader reads the
// decrypted stream through ir.br.
func (e *inlineEnv) replicaTLS(pki *redistest.PKI) *inlineReplica {
	t := e.t
	t.Helper()
	peer, conn := redistest.TCPPair(t)
	conn.SetWriteBuffer(32 << 10)
	peer.SetReadBuffer(32 << 10)
	cert, err := tls.LoadX509KeyPair(pki.Cert, pki.Key)
	if err != nil {
		t.Fatal(err)
	}
	server := tls.Server(NewRecordConn(conn), &tls.Config{Certificates: []tls.Certificate{cert}})
	client := tls.Client(peer, pki.ClientConfig())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := server.Handshake(); err != nil {
			t.Error(err)
		}
	}()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return e.run(peer, server, client, Handshake{CapaPSync2: true})
}

// TestInlineTLS: TLS replicas are sent small publishes inline, encrypted
// on the producer's goroutine, and larger ones by their write loops; their
// readers pause at random, so that records are cut short by a full socket
// and finished by the write loop. Every peer decrypts exactly the
// published bytes in order, no two writes overlapped, and all three paths
// were taken: inline records, hand-overs, and records the write loop
// finished.
func TestInlineTLS(t *testing.T) {
	pki := redistest.NewPKI(t)
	e := newInlineEnv(t)
	rs := make([]*inlineReplica, 3)
	for i := range rs {
		rs[i] = e.replicaTLS(pki)
		if rs[i].sender().tc == nil {
			t.Fatalf("replica %d: the inline sender is not a TLS replica's", i)
		}
	}
	e.cutShort(rs, streamByte, 5, func(ir *inlineReplica) (io.Reader, func()) { return ir.br, func() {} })
}

// TestInlineTLSFlushAllocs: a small publish sent inline to a TLS replica
// allocates nothing, as to a plain one (TestInlineFlushAllocs).
func TestInlineTLSFlushAllocs(t *testing.T) {
	e := newInlineEnv(t)
	e.checkFlushAllocs(e.replicaTLS(redistest.NewPKI(t)))
}

package downstream

import (
	"bytes"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
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
	const replicas = 3
	total := int64(6 << 20)
	if testing.Short() {
		total = 2 << 20
	}
	pki := redistest.NewPKI(t)
	e := newInlineEnv(t)
	st := e.hist.Stream()
	start := st.Offset() + 1
	rs := make([]*inlineReplica, replicas)
	for i := range rs {
		rs[i] = e.replicaTLS(pki)
		if s := rs[i].sender(); s.tc == nil {
			t.Fatalf("replica %d: the inline sender is not a TLS replica's", i)
		}
	}
	prog := newProgress(replicas)
	errs := make(chan error, replicas)
	var hold atomic.Bool // readers stop while it is set
	for i, ir := range rs {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(i), 5))
			errs <- readChecked(ir, ir.br, i, start, total, streamByte, prog, func() {
				for hold.Load() {
					time.Sleep(time.Millisecond)
				}
				if rng.IntN(16) == 0 {
					time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				}
			}, rng)
		}()
	}
	rng := rand.New(rand.NewPCG(97, 5))
	chunk := make([]byte, 64<<10)
	// Halfway, the readers stop and small publishes go on until every
	// socket has cut inline records short.
	cut := func() bool {
		for _, ir := range rs {
			if ir.sender().rests.Load() == 0 {
				return false
			}
		}
		return true
	}
	for off, held := start, false; off < start+total; {
		if !held && off > start+total/2 {
			held = true
			if err := prog.wait(off, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			hold.Store(true)
			for ; !cut() && off < start+total; off += 2 << 10 {
				if err := st.Append(fill(chunk[:2<<10], off)); err != nil {
					t.Fatal(err)
				}
				e.fan.Flush()
			}
			hold.Store(false)
		}
		size := 1 + rng.IntN(4<<10)
		if rng.IntN(16) == 0 {
			size = 1 + rng.IntN(len(chunk))
		}
		k := min(int64(size), start+total-off)
		if err := st.Append(fill(chunk[:k], off)); err != nil {
			t.Fatal(err)
		}
		e.fan.Flush()
		off += k
		if rng.IntN(64) == 0 {
			if err := prog.wait(off, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range rs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var inline, handed, rests int64
	for i, ir := range rs {
		s := ir.sender()
		if n := s.overlaps.Load(); n != 0 {
			t.Errorf("replica %d: %d writes began while another was in flight", i, n)
		}
		inline += s.inline.Load()
		handed += s.handed.Load()
		rests += s.rests.Load()
	}
	if inline == 0 || handed == 0 || rests == 0 {
		t.Fatalf("%d inline records, %d hand-overs, %d batches finished by the write loop: every path must be taken", inline, handed, rests)
	}
	t.Logf("%d inline records, %d hand-overs, %d batches finished by the write loop", inline, handed, rests)
}

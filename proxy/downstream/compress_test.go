package downstream

import (
	"bufio"
	"context"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// TestReplicaCompressedFullSync: a downstream proxy whose handshake agreed
// to compression gets the +FULLRESYNC line plain and everything after it
// (payload header, RDB, stream) in linkzstd chunks, each write operation
// flushed, so that every byte arrives without waiting for more; its figures
// count the raw bytes and the chunks.
func TestReplicaCompressedFullSync(t *testing.T) {
	e := newTestEnv(t)
	host, peer := e.host, e.peer
	st := e.hist.Stream()
	st.Append([]byte("0123456789"))
	id := replid.New()
	sn := replbuf.NewSnapshot(id, 10, replbuf.NewPool(0), time.Now())
	rdb := linkRDB(t)
	sn.Append(rdb)
	if err := sn.Complete(); err != nil {
		t.Fatal(err)
	}
	rd, err := sn.NewReader()
	if err != nil {
		t.Fatal(err)
	}
	cur, err := st.Attach(11)
	if err != nil {
		t.Fatal(err)
	}
	hs := Handshake{CapaEOF: true, CapaPSync2: true, CapaReplproxy: true, Compression: "zstd"}
	r := e.replica(hs, history.Plan{ReplID: id, Offset: 10, Snapshot: sn, Reader: rd, Cursor: cur})
	if !r.IsProxy() {
		t.Fatal("a replica that sent capa replproxy is not a proxy")
	}
	go r.Run(context.Background())
	br := bufio.NewReader(peer)
	line := "+FULLRESYNC " + id + " 10\r\n"
	if got := readN(t, br, peer, len(line)); string(got) != line {
		t.Fatalf("got %q, want %q plain", got, line)
	}
	zr := linkzstd.NewReader(br)
	defer zr.Close()
	want := "$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb)
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(zr, got); err != nil || string(got) != want {
		t.Fatalf("decompressed %q, %v; want the payload", got, err)
	}
	redistest.WaitFor(t, 10*time.Second, "online", func() bool { return r.State() == Online })
	st.Append([]byte("abc"))
	st.Append([]byte("def"))
	got = make([]byte, 6)
	if _, err := io.ReadFull(zr, got); err != nil || string(got) != "abcdef" {
		t.Fatalf("then %q, %v; want the stream", got, err)
	}
	// The writer counts a chunk once its write returned, which may be after
	// the peer read it.
	redistest.WaitFor(t, 10*time.Second, "the chunks counted", func() bool { return r.Compression().Stats.Raw == int64(len(want)+6) })
	ls := r.Compression()
	if ls.Mode != "zstd" || ls.Stats.Raw != int64(len(want)+6) || ls.Stats.Wire == 0 {
		t.Fatalf("Compression() = %+v, want zstd with %d raw bytes", ls, len(want)+6)
	}
	peer.Close()
	<-host.ended
}

// TestReplicaPlainProxyLink: a downstream proxy with a plain link shows
// compression no, and its bytes sent as both raw and wire bytes.
func TestReplicaPlainProxyLink(t *testing.T) {
	e := newTestEnv(t)
	host, peer := e.host, e.peer
	st := e.hist.Stream()
	st.Append([]byte("hello"))
	cur, err := st.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	r := e.replica(Handshake{CapaPSync2: true, CapaReplproxy: true}, history.Plan{Partial: true, ReplID: replid.New(), Cursor: cur})
	go r.Run(context.Background())
	br := bufio.NewReader(peer)
	n := len("+CONTINUE ") + 40 + 2 + len("hello")
	readN(t, br, peer, n)
	redistest.WaitFor(t, 10*time.Second, "the bytes counted", func() bool { return r.Compression().Stats.Raw == int64(n) })
	if ls := r.Compression(); ls.Mode != "no" || ls.Stats.Wire != int64(n) || ls.Stats.CPU != 0 {
		t.Fatalf("Compression() = %+v, want no, %d bytes raw and wire", ls, n)
	}
	peer.Close()
	<-host.ended
}

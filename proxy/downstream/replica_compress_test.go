package downstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/replid"
)

// TestReplicaCompressedFullSync: a downstream proxy whose handshake agreed
// to compression gets the +FULLRESYNC line plain and everything after it
// (payload header, RDB, stream) in linkzstd chunks, each write operation
// flushed, so that every byte arrives without waiting for more; its figures
// count the raw bytes and the chunks, and its encoder's memory until the
// replica ends.
func TestReplicaCompressedFullSync(t *testing.T) {
	e := newTestEnv(t)
	host, peer := e.host, e.peer
	st := e.hist.Stream()
	rdb := linkRDB(t)
	plan := e.fullSyncPlan(t, rdb)
	id := plan.ReplID
	hs := Handshake{CapaEOF: true, CapaPSync2: true, CapaReplproxy: true, Compression: "zstd"}
	r := e.replica(hs, plan)
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
	if got := r.LinkMemory(); got != linkzstd.WriterMemory {
		t.Fatalf("LinkMemory() = %d while streaming; want linkzstd.WriterMemory, %d", got, linkzstd.WriterMemory)
	}
	peer.Close()
	<-host.ended
	if got := r.LinkMemory(); got != 0 {
		t.Fatalf("LinkMemory() = %d once ended; want 0: its encoder is released", got)
	}
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
	if ls := r.Compression(); ls.Mode != "no" || ls.Stats.Wire != int64(n) || ls.Stats.CPU != 0 || r.LinkMemory() != 0 {
		t.Fatalf("Compression() = %+v, LinkMemory() = %d; want no, %d bytes raw and wire, no encoder", ls, r.LinkMemory(), n)
	}
	peer.Close()
	<-host.ended
}

// TestReplicaCompressedStreamCoalesces: on a compressed link, small
// publishes go into one chunk until it holds linkChunkMin raw bytes (the
// coalescing delay is made long here, so that only the size ends the
// chunk), then that chunk goes at once.
func TestReplicaCompressedStreamCoalesces(t *testing.T) {
	e := newTestEnv(t)
	host, peer := e.host, e.peer
	st := e.hist.Stream()
	st.Append([]byte("0123456789"))
	cur, err := st.Attach(11)
	if err != nil {
		t.Fatal(err)
	}
	hs := Handshake{CapaEOF: true, CapaPSync2: true, CapaReplproxy: true, Compression: "zstd"}
	id := replid.New()
	r := e.replica(hs, history.Plan{Partial: true, ReplID: id, Offset: 10, Cursor: cur})
	set := r.set.Load()
	set.LinkCoalesce = time.Hour
	r.set.Store(set)
	go r.Run(context.Background())
	br := bufio.NewReader(peer)
	line := "+CONTINUE " + id + "\r\n"
	if got := readN(t, br, peer, len(line)); string(got) != line {
		t.Fatalf("got %q, want %q plain", got, line)
	}
	// 200 publishes of 100 bytes: 20000 bytes, past linkChunkMin. The rest
	// only once the writer took the first into its chunk: without the
	// coalescing that chunk would go alone.
	var want []byte
	for i := range 200 {
		p := []byte(strconv.Itoa(i%10) + string(make([]byte, 99)))
		want = append(want, p...)
		st.Append(p)
		if i == 0 {
			redistest.WaitFor(t, 10*time.Second, "the first publish sent", func() bool { return r.sent.Load() >= 100 })
		}
	}
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	raw := int(hdr[4])<<24 | int(hdr[5])<<16 | int(hdr[6])<<8 | int(hdr[7])
	if raw < linkChunkMin {
		t.Fatalf("first chunk of %d raw bytes, want all of at least %d coalesced", raw, linkChunkMin)
	}
	zr := linkzstd.NewReader(io.MultiReader(bytes.NewReader(hdr[:]), br))
	defer zr.Close()
	got := make([]byte, raw)
	if _, err := io.ReadFull(zr, got); err != nil || !bytes.Equal(got, want[:raw]) {
		t.Fatalf("the chunk decompressed to %d bytes, %v; want the stream's first %d", len(got), err, raw)
	}
	peer.Close()
	<-host.ended
}

// TestFlushStreamCoalescing: a small chunk of live stream goes at once by
// default, where the stream has nothing more for it; with
// repl-link-compression-coalesce-usec set it waits for more (here the
// wait ends at once, its context already cancelled).
func TestFlushStreamCoalescing(t *testing.T) {
	st := newTestEnv(t).hist.Stream()
	st.Append([]byte("0123456789"))
	cur, err := st.Attach(11)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		coalesce time.Duration
		wantErr  error
		sent     bool
	}{
		{0, nil, true},
		{2 * time.Millisecond, context.Canceled, false},
	} {
		var wire bytes.Buffer
		set := &LiveSettings{}
		set.Store(Settings{LinkCoalesce: c.coalesce})
		w := &writer{r: &Replica{set: set}, z: linkzstd.NewWriter(&wire)}
		w.z.Write([]byte("SET k v"))
		err := w.flushStream(ctx, cur, 7)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("coalesce %v: flushStream = %v, want %v", c.coalesce, err, c.wantErr)
		}
		if sent := wire.Len() > 0; sent != c.sent {
			t.Errorf("coalesce %v: chunk sent %v, want %v", c.coalesce, sent, c.sent)
		}
		w.z.Close()
	}
}

package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// syncLog is a log output that tests read while the link writes it.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// compressTarget is a main link's target that asks for compression.
var compressTarget = Target{Timeout: 5 * time.Second, Compress: true}

// newCompressLink is newTestLink for compressTarget, with a logger the test
// reads.
func newCompressLink(t *testing.T) (*Link, *testHost, *syncLog) {
	t.Helper()
	out := &syncLog{}
	l, h := newTestLink(t, compressTarget, Options{Log: hclog.New(&hclog.LoggerOptions{Output: out})})
	return l, h, out
}

// setCmd is one whole command of the stream.
func setCmd(k string) string {
	return string(wire.AppendCommand(nil, "SET", k, "some value that compresses some value that compresses"))
}

// compressPrimary is a fake primary that answers link-compression with
// reply and, after +FULLRESYNC, sends the payload and the stream through a
// linkzstd.Writer when reply is +OK (plainly otherwise). corrupt, when set,
// is sent after the stream as one more chunk with a byte of its body
// flipped. Each link, once synced, is sent on links.
type compressPrimary struct {
	*redistest.FakePrimary
	reply, stream, corrupt string
	links                  chan *redistest.FakeLink
}

func startCompressPrimary(t *testing.T, reply, stream, corrupt string) *compressPrimary {
	t.Helper()
	c := &compressPrimary{reply: reply, stream: stream, corrupt: corrupt, links: make(chan *redistest.FakeLink, 8)}
	script := func(l *redistest.FakeLink) error {
		err := c.sync(l)
		c.links <- l
		if err != nil {
			return err
		}
		l.AwaitHangup()
		return nil
	}
	c.FakePrimary = redistest.StartFakePrimary(t, redistest.FakeOptions{RDB: testRDB(t), Main: script, Side: script,
		Reply: func(cmd string) (string, bool) {
			if cmd == "REPLCONF link-compression zstd" {
				return reply + "\r\n", true
			}
			return "", false
		}})
	return c
}

// next returns the commands the next link received, once synced.
func (c *compressPrimary) next(t *testing.T) []string {
	t.Helper()
	select {
	case l := <-c.links:
		return l.Got()
	case <-time.After(redistest.FakeIOTimeout):
		t.Fatal("no link synced")
		return nil
	}
}

func (c *compressPrimary) sync(l *redistest.FakeLink) error {
	rdb := l.Primary().RDB()
	if err := l.Write(l.FullResync()); err != nil {
		return err
	}
	rest := "\n$" + strconv.Itoa(len(rdb)) + "\r\n" + string(rdb) + c.stream
	if c.reply != "+OK" {
		return l.Write(rest)
	}
	var wire bytes.Buffer
	z := linkzstd.NewWriter(&wire)
	defer z.Close()
	// As the proxy's writer does: one chunk per write operation.
	for _, part := range []string{"\n", "$" + strconv.Itoa(len(rdb)) + "\r\n", string(rdb), c.stream} {
		z.Write([]byte(part))
		if err := z.Flush(); err != nil {
			return err
		}
	}
	if c.corrupt != "" {
		z.Write([]byte(c.corrupt))
		if err := z.Flush(); err != nil {
			return err
		}
		wire.Bytes()[wire.Len()-1] ^= 0x20 // the chunk's last body byte
	}
	return l.WriteRaw(wire.Bytes())
}

// serveFake runs one session of l with p until the stream reaches want
// (then ends it) or the session fails, and returns Serve's error.
func serveFake(t *testing.T, l *Link, h *testHost, p *compressPrimary, want int64) error {
	t.Helper()
	return serveFakeUntil(t, l, h, p, want, func() bool { return true })
}

// serveFakeUntil is serveFake whose session also waits for more (want >= 0)
// before it ends: a session that continues a stream its host already holds
// reaches want at once, before its handshake is even over.
func serveFakeUntil(t *testing.T, l *Link, h *testHost, p *compressPrimary, want int64, more func() bool) error {
	t.Helper()
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := l.Serve(ctx, conn, l.set().Target)
		done <- err
	}()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if want >= 0 && h.st.Offset() >= want && more() {
				cancel()
				return <-done
			}
		case <-deadline.C:
			t.Fatalf("the stream is at %d, want %d", h.st.Offset(), want)
		}
	}
}

// TestCompressedSession: with repl-link-compression zstd the handshake adds
// link-compression after capa (capa replproxy included); on +OK everything
// after the +FULLRESYNC line is decompressed: the payload, then the stream,
// stored as the primary's raw bytes at the primary's offsets.
func TestCompressedSession(t *testing.T) {
	l, h, _ := newCompressLink(t)
	stream := setCmd("a") + setCmd("b") + setCmd("c")
	p := startCompressPrimary(t, "+OK", stream, "")
	want := int64(redistest.FakeOffset + len(stream))
	err := serveFake(t, l, h, p, want)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "closed") {
		t.Logf("serve ended: %v", err)
	}
	cmds := p.next(t)
	wantCmds := []string{"PING", "REPLCONF listening-port 6380", "REPLCONF capa eof capa psync2 capa replproxy",
		"REPLCONF link-compression zstd", "PSYNC ? -1"}
	if len(cmds) < len(wantCmds) || strings.Join(cmds[:len(wantCmds)], "|") != strings.Join(wantCmds, "|") {
		t.Fatalf("the primary was sent %q, want %q first", cmds, wantCmds)
	}
	if h.installs != 1 || h.st.Offset() != want {
		t.Fatalf("installs %d, stream at %d; want 1, %d", h.installs, h.st.Offset(), want)
	}
	got := readStream(t, h.st, redistest.FakeOffset+1, len(stream))
	if got != stream {
		t.Fatalf("stream %q, want %q", got, stream)
	}
	st, corrupt := l.Compression(), l.counters.LinkCorrupt.Load()
	if st.Mode != "zstd" || st.Stats.Raw <= int64(len(stream)) || st.Stats.Wire == 0 || corrupt != 0 {
		t.Fatalf("Compression() = %+v, corrupt %d; want zstd with every byte after the reply line counted", st, corrupt)
	}
}

// TestCompressionRefusedLoggedOnce: a primary that refuses (a redis-server's
// reply) leaves the link plain, and the refusal is logged once however
// often the link reconnects.
func TestCompressionRefusedLoggedOnce(t *testing.T) {
	l, h, out := newCompressLink(t)
	stream := setCmd("a")
	p := startCompressPrimary(t, "-ERR Unrecognized REPLCONF option: link-compression", stream, "")
	for i := 0; i < 3; i++ {
		// Sessions after the first continue a stream the host holds whole:
		// each ends once the primary has served it too.
		serveFakeUntil(t, l, h, p, int64(redistest.FakeOffset+len(stream)), func() bool { return p.Mains.Load() > int32(i) })
		if got := readStream(t, h.st, redistest.FakeOffset+1, len(stream)); got != stream {
			t.Fatalf("session %d: stream %q, want %q", i, got, stream)
		}
		if st := l.Compression(); st.Mode != "refused" || st.Stats != (linkzstd.Stats{}) {
			t.Fatalf("session %d: Compression() = %+v, want refused, no figures", i, st)
		}
	}
	if n := p.Mains.Load(); n != 3 {
		t.Fatalf("%d sessions reached the primary, want 3", n)
	}
	if n := strings.Count(out.String(), "primary refused link compression, the link stays plain"); n != 1 {
		t.Fatalf("the refusal was logged %d times over 3 sessions, want once:\n%s", n, out.String())
	}
}

// TestCompressedCorruptChunk: a chunk whose body was altered ends the
// session with an error wrapping linkzstd.ErrCorrupt, counted and logged
// once, and none of its bytes reaches the stream.
func TestCompressedCorruptChunk(t *testing.T) {
	l, h, out := newCompressLink(t)
	stream := setCmd("a")
	p := startCompressPrimary(t, "+OK", stream, setCmd("bad"))
	err := serveFake(t, l, h, p, -1)
	if !isCorrupt(err) {
		t.Fatalf("serve = %v, want an error wrapping linkzstd.ErrCorrupt", err)
	}
	if got := h.st.Filled(); got != int64(redistest.FakeOffset+len(stream)) {
		t.Fatalf("the stream was filled to %d, want %d: bytes of the corrupt chunk got in", got, redistest.FakeOffset+len(stream))
	}
	if corrupt := l.counters.LinkCorrupt.Load(); corrupt != 1 || !strings.Contains(out.String(), "compressed link corrupt, resyncing") {
		t.Fatalf("corrupt %d, log:\n%s", corrupt, out.String())
	}
}

// readStream reads n bytes of st from offset from.
func readStream(t *testing.T, st *replbuf.Stream, from int64, n int) string {
	t.Helper()
	cur, err := st.Attach(from)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	var b bytes.Buffer
	for b.Len() < n {
		k, err := cur.Send(&b)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	return b.String()
}

// TestCompressedFetch: a side link (REPLCONF rdb-only) negotiates as the
// main link does, and its snapshot arrives compressed, whole, its figures
// added to FetchCompression once it ended.
func TestCompressedFetch(t *testing.T) {
	p := startCompressPrimary(t, "+OK", "", "")
	rdb := p.RDB()
	target := compressTarget
	target.Addr = p.Addr()
	l, _ := newTestLink(t, target, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sn, err := l.FetchSnapshot(ctx, "", nil, func(*replbuf.Snapshot, int64) (PayloadSink, error) { return nil, nil })
	if err != nil {
		t.Fatalf("FetchSnapshot: %v (%d side links reached the primary)", err, p.Sides.Load())
	}
	defer sn.Release()
	if sn.Size() != int64(len(rdb)) {
		t.Fatalf("snapshot of %d bytes, want %d", sn.Size(), len(rdb))
	}
	if cmds := p.next(t); !slices.Contains(cmds, "REPLCONF link-compression zstd") || !slices.Contains(cmds, "REPLCONF rdb-only 1") {
		t.Fatalf("the side link did not ask for compression: %q", cmds)
	}
	if st := l.FetchCompression(); st.Raw < int64(len(rdb)) || st.Wire == 0 {
		t.Fatalf("FetchCompression() = %+v, want the payload counted", st)
	}
	if st := l.Compression(); st.Stats != (linkzstd.Stats{}) {
		t.Fatalf("the main link's figures %+v, want none: a side link's are its own", st)
	}
}

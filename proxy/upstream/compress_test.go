package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// compressHost is a testHost whose Target asks for a compressed link.
type compressHost struct{ *testHost }

func (h compressHost) Target() Target { return Target{Timeout: 5 * time.Second, Compress: true} }

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

// newCompressLink is newTestLink with a logger the test reads and the
// corrupt-input counter returned.
func newCompressLink(t *testing.T) (*Link, *testHost, *syncLog, *atomic.Int64) {
	t.Helper()
	h := &testHost{st: replbuf.NewStream(0, &replbuf.Config{})}
	t.Cleanup(func() { h.st.Close(nil) })
	var c [11]atomic.Int64
	out := &syncLog{}
	l := New(compressHost{h}, Options{Pool: replbuf.NewPool(0), Log: hclog.New(&hclog.LoggerOptions{Output: out}),
		Counters: Counters{
			Connects: &c[0], FullSyncs: &c[1], PartialSyncs: &c[2], LinkFailures: &c[3], RDBBytes: &c[4],
			ChecksumFails: &c[5], StreamErrors: &c[6], ReplInputBytes: &c[7], FetchBytes: &c[8],
			QueryLimits: &c[9], LinkCorrupt: &c[10],
		}})
	return l, h, out, &c[10]
}

// setCmd is one whole command of the stream.
func setCmd(k string) string {
	return string(wire.AppendCommand(nil, "SET", k, "some value that compresses some value that compresses"))
}

// fakeCompressor is a primary on one end of a pipe that answers the
// handshake, records the commands it was sent, answers link-compression
// with reply, and after +FULLRESYNC sends the payload and the stream through
// a linkzstd.Writer when reply is +OK (plainly otherwise). corrupt, when
// set, is sent after the stream as one more chunk with a byte of its body
// flipped.
type fakeCompressor struct {
	conn    net.Conn
	reply   string
	rdb     []byte
	stream  string
	corrupt string

	mu   sync.Mutex
	cmds []string
}

func (f *fakeCompressor) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func (f *fakeCompressor) run() error {
	rd := wire.NewCommandReader(f.conn, wire.Limits{})
	for {
		cmd, err := rd.ReadCommand()
		if err != nil {
			return err
		}
		var words []string
		for _, a := range cmd.Args {
			words = append(words, string(a))
		}
		line := strings.Join(words, " ")
		f.mu.Lock()
		f.cmds = append(f.cmds, line)
		f.mu.Unlock()
		switch {
		case line == "PING":
			_, err = f.conn.Write([]byte("+PONG\r\n"))
		case line == "REPLCONF link-compression zstd":
			_, err = f.conn.Write([]byte(f.reply + "\r\n"))
		case strings.HasPrefix(line, "REPLCONF ACK"):
		case strings.HasPrefix(line, "REPLCONF"):
			_, err = f.conn.Write([]byte("+OK\r\n"))
		case strings.HasPrefix(line, "PSYNC"):
			err = f.sync()
		}
		if err != nil {
			return err
		}
	}
}

func (f *fakeCompressor) sync() error {
	if _, err := f.conn.Write([]byte("+FULLRESYNC " + linkReplID + " 1000\r\n")); err != nil {
		return err
	}
	rest := "\n$" + strconv.Itoa(len(f.rdb)) + "\r\n" + string(f.rdb) + f.stream
	if f.reply != "+OK" {
		_, err := f.conn.Write([]byte(rest))
		return err
	}
	var wire bytes.Buffer
	z := linkzstd.NewWriter(&wire)
	defer z.Close()
	// As the proxy's writer does: one chunk per write operation.
	for _, part := range []string{"\n", "$" + strconv.Itoa(len(f.rdb)) + "\r\n", string(f.rdb), f.stream} {
		z.Write([]byte(part))
		if err := z.Flush(); err != nil {
			return err
		}
	}
	if f.corrupt != "" {
		z.Write([]byte(f.corrupt))
		if err := z.Flush(); err != nil {
			return err
		}
		wire.Bytes()[wire.Len()-1] ^= 0x20 // the chunk's last body byte
	}
	_, err := f.conn.Write(wire.Bytes())
	return err
}

func testRDB(t *testing.T) []byte {
	t.Helper()
	rdb, err := os.ReadFile("../../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	return rdb
}

// serveFake runs one session of l against f until the stream reaches want
// (then ends it) or the session fails, and returns Serve's error.
func serveFake(t *testing.T, l *Link, h *testHost, f *fakeCompressor, want int64) error {
	t.Helper()
	proxySide, primarySide := net.Pipe()
	f.conn = primarySide
	go f.run()
	defer primarySide.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := l.Serve(ctx, proxySide, l.host.Target())
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
			if want >= 0 && h.st.Offset() >= want {
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
	l, h, _, corrupt := newCompressLink(t)
	stream := setCmd("a") + setCmd("b") + setCmd("c")
	f := &fakeCompressor{reply: "+OK", rdb: testRDB(t), stream: stream}
	want := int64(1000 + len(stream))
	err := serveFake(t, l, h, f, want)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "closed") {
		t.Logf("serve ended: %v", err)
	}
	cmds := f.commands()
	wantCmds := []string{"PING", "REPLCONF listening-port 6380", "REPLCONF capa eof capa psync2 capa replproxy",
		"REPLCONF link-compression zstd", "PSYNC ? -1"}
	if len(cmds) < len(wantCmds) || strings.Join(cmds[:len(wantCmds)], "|") != strings.Join(wantCmds, "|") {
		t.Fatalf("the primary was sent %q, want %q first", cmds, wantCmds)
	}
	if h.installs != 1 || h.st.Offset() != want {
		t.Fatalf("installs %d, stream at %d; want 1, %d", h.installs, h.st.Offset(), want)
	}
	got := readStream(t, h.st, 1001, len(stream))
	if got != stream {
		t.Fatalf("stream %q, want %q", got, stream)
	}
	st := l.Compression()
	if st.Mode != "zstd" || st.Stats.Raw <= int64(len(stream)) || st.Stats.Wire == 0 || corrupt.Load() != 0 {
		t.Fatalf("Compression() = %+v, corrupt %d; want zstd with every byte after the reply line counted", st, corrupt.Load())
	}
}

// TestCompressionRefusedLoggedOnce: a primary that refuses (a redis-server's
// reply) leaves the link plain, and the refusal is logged once however
// often the link reconnects.
func TestCompressionRefusedLoggedOnce(t *testing.T) {
	l, h, out, _ := newCompressLink(t)
	stream := setCmd("a")
	for i := 0; i < 3; i++ {
		f := &fakeCompressor{reply: "-ERR Unrecognized REPLCONF option: link-compression", rdb: testRDB(t), stream: stream}
		serveFake(t, l, h, f, int64(1000+len(stream)))
		if got := readStream(t, h.st, 1001, len(stream)); got != stream {
			t.Fatalf("session %d: stream %q, want %q", i, got, stream)
		}
		if st := l.Compression(); st.Mode != "refused" || st.Stats != (linkzstd.Stats{}) {
			t.Fatalf("session %d: Compression() = %+v, want refused, no figures", i, st)
		}
	}
	if n := strings.Count(out.String(), "primary refused link compression, the link stays plain"); n != 1 {
		t.Fatalf("the refusal was logged %d times over 3 sessions, want once:\n%s", n, out.String())
	}
}

// TestCompressedCorruptChunk: a chunk whose body was altered ends the
// session with an error wrapping linkzstd.ErrCorrupt, counted and logged
// once, and none of its bytes reaches the stream.
func TestCompressedCorruptChunk(t *testing.T) {
	l, h, out, corrupt := newCompressLink(t)
	stream := setCmd("a")
	f := &fakeCompressor{reply: "+OK", rdb: testRDB(t), stream: stream, corrupt: setCmd("bad")}
	err := serveFake(t, l, h, f, -1)
	if !isCorrupt(err) {
		t.Fatalf("serve = %v, want an error wrapping linkzstd.ErrCorrupt", err)
	}
	if got := h.st.Filled(); got != int64(1000+len(stream)) {
		t.Fatalf("the stream was filled to %d, want %d: bytes of the corrupt chunk got in", got, 1000+len(stream))
	}
	if corrupt.Load() != 1 || !strings.Contains(out.String(), "compressed link corrupt, resyncing") {
		t.Fatalf("corrupt %d, log:\n%s", corrupt.Load(), out.String())
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

// fetchHost is a compressHost whose primary is at addr, for side links.
type fetchHost struct {
	compressHost
	addr string
}

func (h fetchHost) Target() Target {
	return Target{Addr: h.addr, Timeout: 5 * time.Second, Compress: true}
}

// TestCompressedFetch: a side link (REPLCONF rdb-only) negotiates as the
// main link does, and its snapshot arrives compressed, whole, its figures
// added to FetchCompression once it ended.
func TestCompressedFetch(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rdb := testRDB(t)
	f := &fakeCompressor{reply: "+OK", rdb: rdb}
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		f.conn = conn
		f.run()
	}()
	h := &testHost{st: replbuf.NewStream(0, &replbuf.Config{})}
	t.Cleanup(func() { h.st.Close(nil) })
	var c [11]atomic.Int64
	l := New(fetchHost{compressHost{h}, ln.Addr().String()}, Options{Pool: replbuf.NewPool(0), Counters: Counters{
		Connects: &c[0], FullSyncs: &c[1], PartialSyncs: &c[2], LinkFailures: &c[3], RDBBytes: &c[4],
		ChecksumFails: &c[5], StreamErrors: &c[6], ReplInputBytes: &c[7], FetchBytes: &c[8],
		QueryLimits: &c[9], LinkCorrupt: &c[10],
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sn, err := l.FetchSnapshot(ctx, func(*replbuf.Snapshot, int64) (PayloadSink, error) { return nil, nil })
	if err != nil {
		t.Fatalf("FetchSnapshot: %v (the primary was sent %q)", err, f.commands())
	}
	defer sn.Release()
	if sn.Size() != int64(len(rdb)) {
		t.Fatalf("snapshot of %d bytes, want %d", sn.Size(), len(rdb))
	}
	if !slices.Contains(f.commands(), "REPLCONF link-compression zstd") {
		t.Fatalf("the side link did not ask for compression: %q", f.commands())
	}
	if st := l.FetchCompression(); st.Raw < int64(len(rdb)) || st.Wire == 0 {
		t.Fatalf("FetchCompression() = %+v, want the payload counted", st)
	}
	if st := l.Compression(); st.Stats != (linkzstd.Stats{}) {
		t.Fatalf("the main link's figures %+v, want none: a side link's are its own", st)
	}
}

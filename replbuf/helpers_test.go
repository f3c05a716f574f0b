package replbuf

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// patternByte is the byte at offset off in the streams tests produce, so that
// any slice can be checked against its offset.
func patternByte(off int64) byte { return byte(off*131 + off>>9 + 7) }

func pattern(from int64, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = patternByte(from + int64(i))
	}
	return p
}

// appendPattern appends n pattern bytes that continue the stream.
func appendPattern(t testing.TB, s *Stream, n int) {
	t.Helper()
	if err := s.Append(pattern(s.Offset()+1, n)); err != nil {
		t.Fatal(err)
	}
}

// drain takes everything pending from c, advancing over all of it.
func drain(t testing.TB, c *Cursor) []byte {
	t.Helper()
	var out []byte
	for {
		bufs, err := c.Pending()
		if err != nil {
			t.Fatalf("pending: %v", err)
		}
		if len(*bufs) == 0 {
			return out
		}
		n := int64(0)
		for _, b := range *bufs {
			out = append(out, b...)
			n += int64(len(b))
		}
		if err := c.Advance(n); err != nil {
			t.Fatalf("advance: %v", err)
		}
	}
}

// checkInvariants verifies the stream's structure: contiguous blocks, every
// block but the tail full, refs equal to the cursors placed on each block,
// accounting that matches the blocks.
func checkInvariants(t testing.TB, s *Stream, cursors ...*Cursor) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.mu.blocks.len()
	if n == 0 {
		t.Fatal("stream has no blocks")
	}
	want := map[*block]int32{}
	for _, c := range cursors {
		if c.closed.Load() || c.gen != s.gen.Load() {
			continue
		}
		if b := c.cur.Load(); b != nil {
			want[b]++
		}
	}
	for i := range n {
		b := s.mu.blocks.at(i)
		if i > 0 {
			prev := s.mu.blocks.at(i - 1)
			if b.start != prev.start+BlockSize || b.id.Load() != prev.id.Load()+1 || prev.next.Load() != b {
				t.Fatalf("block %d (start %d id %d) does not follow block %d (start %d id %d)", i, b.start, b.id.Load(), i-1, prev.start, prev.id.Load())
			}
		}
		if i < n-1 && b.used.Load() != BlockSize {
			t.Fatalf("non-tail block %d holds %d bytes", i, b.used.Load())
		}
		if got := b.refs.Load(); got != want[b] {
			t.Fatalf("block %d has %d refs, cursors hold %d", i, got, want[b])
		}
	}
	tail := s.mu.blocks.at(n - 1)
	if tail != s.tail.Load() {
		t.Fatal("index tail is not the producer's tail")
	}
	if end := tail.start + tail.used.Load() - 1; end != s.end.Load() {
		t.Fatalf("end %d, blocks end at %d", s.end.Load(), end)
	}
	// The filled bytes: past the end, in the tail's free space and then in
	// unpublished blocks that follow the tail but that nothing links to.
	filled := s.filled.Load()
	if filled < s.end.Load() {
		t.Fatalf("filled %d before the published end %d", filled, s.end.Load())
	}
	prev := tail
	for i, b := range s.unpublished {
		if b.start != prev.start+BlockSize || b.id.Load() != prev.id.Load()+1 {
			t.Fatalf("unpublished block %d (start %d id %d) does not follow start %d id %d", i, b.start, b.id.Load(), prev.start, prev.id.Load())
		}
		if b.used.Load() != 0 || b.refs.Load() != 0 || b.next.Load() != nil {
			t.Fatalf("unpublished block %d is visible: used %d refs %d next %v", i, b.used.Load(), b.refs.Load(), b.next.Load())
		}
		prev = b
	}
	if tail.next.Load() != nil {
		t.Fatal("the tail links to a block")
	}
	if pos := filled + 1 - prev.start; pos < 0 || pos > BlockSize || (len(s.unpublished) > 0 && filled < tail.start+BlockSize-1) {
		t.Fatalf("filled %d does not end in the last block (start %d, %d unpublished)", filled, prev.start, len(s.unpublished))
	}
	holding := int64(0) // unpublished blocks that hold a filled byte
	for _, b := range s.unpublished {
		if filled >= b.start {
			holding++
		}
	}
	if got := s.unpublishedBlocksLocked(); got != holding {
		t.Fatalf("Usage counts %d unpublished blocks, the stream has %d holding bytes", got, holding)
	}
	u := usageOf(int64(n), s.mu.blocks.bytes(), s.mu.attached+len(s.mu.pending), s.backlogSize.Load())
	if u.Total != int64(n)*BlockFootprint {
		t.Fatalf("accounted %d for %d blocks", u.Total, n)
	}
	if u.Backlog+u.Replicas != u.Total+u.Index {
		t.Fatalf("backlog %d + replicas %d != total %d + index %d", u.Backlog, u.Replicas, u.Total, u.Index)
	}
	attached := 0
	for _, c := range cursors {
		if !c.closed.Load() && c.gen == s.gen.Load() && c.cur.Load() != nil {
			attached++
		}
	}
	if attached != s.mu.attached {
		t.Fatalf("%d cursors placed, stream counts %d", attached, s.mu.attached)
	}
}

// waitCtx is Wait with a test deadline.
func waitCtx(t testing.TB, c *Cursor, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Wait(ctx)
}

func expectBytes(t testing.TB, what string, got []byte, from int64) {
	t.Helper()
	if want := pattern(from, len(got)); !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes from offset %d differ at offset %d", what, len(got), from, from+int64(i))
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// allocRig is the set-up of the allocation tests: a stream with a backlog of
// four blocks, a cursor from offset 1, and a TCP connection to send to whose
// other end is drained into one preallocated buffer until it closes.
func allocRig(t testing.TB) (*Stream, *Cursor, *net.TCPConn) {
	t.Helper()
	send, recv := redistest.TCPPair(t)
	go func() {
		buf := make([]byte, 256<<10)
		for {
			if _, err := recv.Read(buf); err != nil {
				return
			}
		}
	}()
	// Arrival times kept, as the proxy's stream keeps them: the
	// zero-allocation checks cover dating reads and publishing marks.
	s := NewStream(0, &Config{BacklogSize: 4 * BlockSize, Arrivals: true})
	c, err := s.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c, send
}

// sendAll sends everything c has to send.
func sendAll(t testing.TB, c *Cursor, send *net.TCPConn) {
	t.Helper()
	for c.Lag() > 0 {
		if _, err := c.Send(send); err != nil {
			t.Fatal(err)
		}
	}
}

// expectNoAllocs runs step until the pool and the index reach their sizes,
// then fails the test if step allocates; what names one step.
func expectNoAllocs(t testing.TB, what string, step func()) {
	t.Helper()
	for range 64 {
		step()
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("%v allocations per %s, want 0", n, what)
	}
}

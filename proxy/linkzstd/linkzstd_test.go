package linkzstd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/replproxy/replproxy/internal/cachedata"
)

// chunkRecorder is a Writer's dst that keeps every Write apart, so that a
// test can check each is one whole chunk.
type chunkRecorder struct {
	writes [][]byte
}

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

func (c *chunkRecorder) wire() []byte { return bytes.Join(c.writes, nil) }

// chunks splits wire into its chunks by their headers, failing on a header
// that does not add up.
func chunks(t testing.TB, wire []byte) (out [][]byte) {
	t.Helper()
	for len(wire) > 0 {
		if len(wire) < headerSize {
			t.Fatalf("%d bytes past the last chunk", len(wire))
		}
		c := int(binary.BigEndian.Uint32(wire))
		if c < 1 || c > MaxChunkWire || headerSize+c > len(wire) {
			t.Fatalf("chunk header says %d compressed bytes, %d left", c, len(wire)-headerSize)
		}
		out = append(out, wire[:headerSize+c])
		wire = wire[headerSize+c:]
	}
	return out
}

// encode writes data to a new Writer in writes of the given sizes (cycled),
// flushing after every flushEvery bytes (0: once at the end).
func encode(t testing.TB, data []byte, writeSizes []int, flushEvery int) (*chunkRecorder, Stats) {
	t.Helper()
	rec := &chunkRecorder{}
	w := NewWriter(rec)
	defer w.Close()
	since := 0
	for i := 0; len(data) > 0; i++ {
		n := min(writeSizes[i%len(writeSizes)], len(data))
		if flushEvery > 0 {
			n = min(n, flushEvery-since)
		}
		if m, err := w.Write(data[:n]); err != nil || m != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, m, err)
		}
		data, since = data[n:], since+n
		if flushEvery > 0 && since == flushEvery {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if w.Buffered() != 0 {
				t.Fatalf("Buffered() = %d after Flush", w.Buffered())
			}
			since = 0
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return rec, w.Stats()
}

// decode reads all of wire through a Reader in reads of readSize bytes.
func decode(t testing.TB, wire []byte, readSize int) ([]byte, Stats, error) {
	t.Helper()
	r := NewReader(bytes.NewReader(wire))
	defer r.Close()
	var out []byte
	buf := make([]byte, readSize)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, r.Stats(), err
		}
	}
}

func TestRoundTrip(t *testing.T) {
	cache := cachedata.New(1).FillRESP(1 << 20)
	random := make([]byte, 400<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name       string
		data       []byte
		writes     []int
		flushEvery int
		readSize   int
	}{
		{"1-byte flushes", cache[:5000], []int{1}, 1, 3},
		{"600 B flushes", cache, []int{600}, 600, 16 << 10},
		{"16 KiB flushes", cache, []int{1000, 7, 20000}, 16 << 10, 1},
		{"one large write", cache, []int{len(cache)}, 0, 64 << 10},
		{"writes of MaxChunkRaw", cache, []int{MaxChunkRaw}, 0, 4096},
		{"writes of MaxChunkRaw+1", cache, []int{MaxChunkRaw + 1}, 0, MaxChunkRaw + 7},
		{"128 KiB+ writes, flushed", cache, []int{MaxChunkRaw + 300}, MaxChunkRaw + 300, 100},
		{"incompressible", random, []int{50000, 3, MaxChunkRaw * 2}, 0, 8192},
		{"incompressible 600 B flushes", random[:100<<10], []int{600}, 600, 600},
		{"one byte", cache[:1], []int{1}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, ws := encode(t, tc.data, tc.writes, tc.flushEvery)
			wire := rec.wire()
			cs := chunks(t, wire)
			if len(cs) != len(rec.writes) {
				t.Fatalf("%d chunks in %d dst writes: a Flush wrote a chunk in several writes", len(cs), len(rec.writes))
			}
			var wantWire, wantRaw int64
			for i, c := range cs {
				if !bytes.Equal(c, rec.writes[i]) {
					t.Fatalf("dst write %d is not chunk %d", i, i)
				}
				r := int(binary.BigEndian.Uint32(c[4:]))
				if r < 1 || r > MaxChunkRaw {
					t.Fatalf("chunk %d: raw length %d", i, r)
				}
				wantWire += int64(len(c))
				wantRaw += int64(r)
			}
			if ws.Raw != int64(len(tc.data)) || wantRaw != ws.Raw || ws.Wire != wantWire || ws.Wire != int64(len(wire)) {
				t.Fatalf("writer stats %+v; %d raw bytes written, chunk headers say %d raw and %d on the wire", ws, len(tc.data), wantRaw, wantWire)
			}
			got, rs, err := decode(t, wire, tc.readSize)
			if err != io.EOF {
				t.Fatalf("read ended with %v, want io.EOF", err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Fatalf("read %d bytes that differ from the %d written", len(got), len(tc.data))
			}
			if rs.Raw != ws.Raw || rs.Wire != ws.Wire {
				t.Fatalf("reader stats %+v, writer's %+v", rs, ws)
			}
		})
	}
}

// TestCompresses checks the window carries across chunks: cache-like data
// flushed every 600 B still compresses.
func TestCompresses(t *testing.T) {
	data := cachedata.New(2).FillRESP(2 << 20)
	_, s := encode(t, data, []int{600}, 600)
	if ratio := float64(s.Raw) / float64(s.Wire); ratio < 2 {
		t.Fatalf("ratio %.2f on cache-like data in 600 B flushes", ratio)
	}
}

func TestFlushNothingWritesNothing(t *testing.T) {
	rec := &chunkRecorder{}
	w := NewWriter(rec)
	defer w.Close()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d, %v", n, err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 0 || w.Buffered() != 1 {
		t.Fatalf("%d writes, %d buffered after an empty Flush and a 1-byte Write", len(rec.writes), w.Buffered())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 1 {
		t.Fatalf("%d writes after Flush, Flush: want 1", len(rec.writes))
	}
}

func TestWriteFlushesAtMaxChunkRaw(t *testing.T) {
	rec := &chunkRecorder{}
	w := NewWriter(rec)
	defer w.Close()
	data := cachedata.New(3).FillRESP(3 * MaxChunkRaw)
	if _, err := w.Write(data[:MaxChunkRaw-1]); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 0 || w.Buffered() != MaxChunkRaw-1 {
		t.Fatalf("%d writes, %d buffered below MaxChunkRaw", len(rec.writes), w.Buffered())
	}
	if _, err := w.Write(data[MaxChunkRaw-1 : 2*MaxChunkRaw+10]); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 2 || w.Buffered() != 10 {
		t.Fatalf("%d writes, %d buffered after 2 MaxChunkRaw + 10 bytes: want 2 and 10", len(rec.writes), w.Buffered())
	}
}

// failWriter fails every Write after the first ok ones.
type failWriter struct {
	ok  int
	err error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if f.ok == 0 {
		return 0, f.err
	}
	f.ok--
	return len(p), nil
}

func TestWriterStickyError(t *testing.T) {
	boom := errors.New("boom")
	w := NewWriter(&failWriter{ok: 1, err: boom})
	defer w.Close()
	for i := range 2 {
		if _, err := w.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		err := w.Flush()
		if (i == 0) != (err == nil) {
			t.Fatalf("Flush %d: %v", i, err)
		}
	}
	if _, err := w.Write([]byte("x")); !errors.Is(err, boom) {
		t.Fatalf("Write after a failed Flush: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, boom) {
		t.Fatalf("Flush after a failed Flush: %v", err)
	}
	w.Close()
	w.Close()
	if err := w.Flush(); !errors.Is(err, boom) {
		t.Fatalf("Flush after Close keeps the first error: %v", err)
	}
	w2 := NewWriter(io.Discard)
	w2.Close()
	if _, err := w2.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
}

// wireOf encodes data in flushes of every bytes.
func wireOf(t testing.TB, data []byte, every int) []byte {
	t.Helper()
	rec, _ := encode(t, data, []int{every}, every)
	return rec.wire()
}

func TestReaderEOF(t *testing.T) {
	for _, tc := range []struct {
		name string
		wire []byte
	}{
		{"empty", nil},
		{"whole chunks", wireOf(t, []byte("hello world, hello world"), 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tc.wire))
			defer r.Close()
			if _, err := io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if n, err := r.Read(make([]byte, 10)); n != 0 || err != io.EOF {
					t.Fatalf("Read at the end = %d, %v; want 0, io.EOF (sticky)", n, err)
				}
			}
		})
	}
}

// TestReaderTruncated cuts the wire at every offset: a cut at a chunk
// boundary is io.EOF, any other is io.ErrUnexpectedEOF and ErrCorrupt, and
// in both cases exactly the whole chunks before the cut are returned.
func TestReaderTruncated(t *testing.T) {
	data := cachedata.New(4).FillRESP(2500)
	wire := wireOf(t, data, 600)
	cs := chunks(t, wire)
	ends := map[int]int{0: 0} // wire offset of a chunk boundary -> raw bytes before it
	off, raw := 0, 0
	for _, c := range cs {
		off += len(c)
		raw += int(binary.BigEndian.Uint32(c[4:]))
		ends[off] = raw
	}
	for cut := range len(wire) {
		got, _, err := decode(t, wire[:cut], 333)
		want, boundary := ends[cut]
		if !boundary {
			for o, r := range ends {
				if o < cut && r > want {
					want = r
				}
			}
		}
		switch {
		case boundary && err != io.EOF:
			t.Fatalf("cut at %d (a boundary): %v, want io.EOF", cut, err)
		case !boundary && (!errors.Is(err, ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF)):
			t.Fatalf("cut at %d: %v, want ErrCorrupt and io.ErrUnexpectedEOF", cut, err)
		case !bytes.Equal(got, data[:want]):
			t.Fatalf("cut at %d: %d bytes returned, want the %d of the whole chunks before it", cut, len(got), want)
		}
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReaderDecodesOnDemand: a Reader decodes no faster than its consumer
// reads. Over 500 chunks of 128 KiB of zeros (64 MiB that are a few bytes
// each on the wire, as a hostile primary's payload would be), read 4 KiB
// at a time, it holds at most one chunk's raw bytes not yet returned, and
// has read from its source exactly the chunks whose bytes it has begun to
// return: never the next one before the consumer asks for it.
func TestReaderDecodesOnDemand(t *testing.T) {
	const n = 500
	rec := &chunkRecorder{}
	w := NewWriter(rec)
	zeros := make([]byte, MaxChunkRaw)
	for range n {
		if _, err := w.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	if len(rec.writes) != n {
		t.Fatalf("%d chunks written; want %d", len(rec.writes), n)
	}
	src := &countingReader{r: bytes.NewReader(rec.wire())}
	r := NewReader(src)
	defer r.Close()
	buf := make([]byte, 4<<10)
	read, wantSrc := int64(0), 0
	for {
		k, err := r.Read(buf)
		if k > 0 && read%MaxChunkRaw == 0 {
			wantSrc += len(rec.writes[read/MaxChunkRaw]) // this Read began a chunk
		}
		read += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if r.Buffered() > MaxChunkRaw || src.n != wantSrc {
			t.Fatalf("after %d bytes returned: %d decoded and not returned, %d read from the source; want at most %d and %d",
				read, r.Buffered(), src.n, MaxChunkRaw, wantSrc)
		}
	}
	if read != n*MaxChunkRaw {
		t.Fatalf("%d bytes read; want %d", read, n*MaxChunkRaw)
	}
}

func TestReaderHeaderBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		wire, raw uint32
	}{
		{"no compressed bytes", 0, 10},
		{"no raw bytes", 10, 0},
		{"compressed past MaxChunkWire", MaxChunkWire + 1, 10},
		{"raw past MaxChunkRaw", 10, MaxChunkRaw + 1},
		{"both huge", 1 << 31, 1<<32 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := make([]byte, headerSize, headerSize+MaxChunkWire+100)
			putHeader(h, int(tc.wire), int(tc.raw), 0)
			h = append(h, make([]byte, MaxChunkWire+100)...)
			src := &countingReader{r: bytes.NewReader(h)}
			r := NewReader(src)
			defer r.Close()
			n, err := r.Read(make([]byte, 100))
			if n != 0 || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read = %d, %v; want 0, ErrCorrupt", n, err)
			}
			if src.n != headerSize || r.body.b != nil || r.raw != nil {
				t.Fatalf("%d bytes read from src, buffers allocated %v %v: the header was not refused first", src.n, r.body.b != nil, r.raw != nil)
			}
			if _, err2 := r.Read(make([]byte, 1)); err2 != err {
				t.Fatalf("second Read: %v, want the first error %v", err2, err)
			}
		})
	}
}

// TestReaderRefusesBadChunk alters the second of three chunks in ways a
// decoder alone would not catch: none of its bytes is returned, every
// Read after is the error.
func TestReaderRefusesBadChunk(t *testing.T) {
	data := []byte("first chunk....second chunk...third chunk....")
	wire := wireOf(t, data, 15)
	cs := chunks(t, wire)
	if len(cs) != 3 {
		t.Fatalf("%d chunks", len(cs))
	}
	for _, tc := range []struct {
		name  string
		alter func(c []byte) []byte
	}{
		{"CRC", func(c []byte) []byte { c[8] ^= 1; return c }},
		{"raw length short by one, CRC matching", func(c []byte) []byte {
			binary.BigEndian.PutUint32(c[4:], 14)
			binary.BigEndian.PutUint32(c[8:], crc32.Checksum(data[15:29], castagnoli))
			return c
		}},
		{"raw length long by one", func(c []byte) []byte { binary.BigEndian.PutUint32(c[4:], 16); return c }},
		{"a byte past the blocks", func(c []byte) []byte {
			binary.BigEndian.PutUint32(c[0:], binary.BigEndian.Uint32(c)+1)
			return append(c, 0)
		}},
		{"a body byte flipped", func(c []byte) []byte { c[len(c)-1] ^= 0x40; return c }},
		{"the body cut short, its length matching", func(c []byte) []byte {
			binary.BigEndian.PutUint32(c[0:], binary.BigEndian.Uint32(c)-3)
			return c[:len(c)-3]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := bytes.Join([][]byte{cs[0], tc.alter(bytes.Clone(cs[1])), cs[2]}, nil)
			got, _, err := decode(t, bad, 4)
			// Every chunk arrived whole: corrupt, never a link cut short
			// (which is io.ErrUnexpectedEOF, and not counted as corruption).
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read ended with %v, want ErrCorrupt and not io.ErrUnexpectedEOF", err)
			}
			if !bytes.Equal(got, data[:15]) {
				t.Fatalf("returned %q, want only the first chunk's %q", got, data[:15])
			}
		})
	}
}

// errReader returns its error after its data.
type errReader struct {
	data []byte
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReaderSourceError(t *testing.T) {
	reset := errors.New("connection reset")
	wire := wireOf(t, []byte("0123456789"), 5)
	for _, cut := range []int{0, len(wire) / 4, len(wire) / 2} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			r := NewReader(&errReader{data: wire[:cut], err: reset})
			defer r.Close()
			_, err := io.ReadAll(r)
			if !errors.Is(err, reset) || errors.Is(err, ErrCorrupt) {
				t.Fatalf("read ended with %v, want the source's error, not ErrCorrupt", err)
			}
		})
	}
}

func TestReaderClose(t *testing.T) {
	r := NewReader(bytes.NewReader(wireOf(t, []byte("abcdef"), 3)))
	if n, err := r.Read(make([]byte, 1)); n != 1 || err != nil || r.Buffered() != 2 {
		t.Fatalf("Read = %d, %v, Buffered %d", n, err, r.Buffered())
	}
	r.Close()
	r.Close()
	if n, err := r.Read(make([]byte, 10)); n != 0 || err == nil {
		t.Fatalf("Read after Close = %d, %v", n, err)
	}
}

// TestNoAllocs checks the steady state of Write, Flush and Read allocates
// nothing, at a live stream's small flushes and at full chunks.
func TestNoAllocs(t *testing.T) {
	data := cachedata.New(5).FillRESP(4 << 20)
	for _, every := range []int{600, 16 << 10, MaxChunkRaw} {
		t.Run(fmt.Sprint(every), func(t *testing.T) {
			var wire bytes.Buffer
			wire.Grow(200*every + 1<<20) // never grows inside AllocsPerRun
			w := NewWriter(&wire)
			defer w.Close()
			off := 0
			step := func() {
				if off+every > len(data) {
					off = 0
				}
				w.Write(data[off : off+every])
				w.Flush()
				off += every
			}
			for range 100 { // the encoder's tables and history grow first
				step()
			}
			if a := testing.AllocsPerRun(100, step); a != 0 {
				t.Errorf("Write+Flush: %.1f allocs per run", a)
			}
			r := NewReader(bytes.NewReader(wire.Bytes()))
			defer r.Close()
			buf := make([]byte, every)
			read := func() {
				if _, err := io.ReadFull(r, buf); err != nil {
					t.Fatal(err)
				}
			}
			for range 100 {
				read()
			}
			if a := testing.AllocsPerRun(100, read); a != 0 {
				t.Errorf("Read: %.1f allocs per run", a)
			}
		})
	}
}

// TestStatsCPU checks both halves count CPU when chunks are small (timed
// one in sampleEvery) and large (each timed).
func TestStatsCPU(t *testing.T) {
	data := cachedata.New(6).FillRESP(1 << 20)
	for _, every := range []int{600, MaxChunkRaw} {
		rec, ws := encode(t, data, []int{every}, every)
		_, rs, err := decode(t, rec.wire(), 4096)
		if err != io.EOF || ws.CPU <= 0 || rs.CPU <= 0 {
			t.Errorf("flush every %d: writer CPU %v, reader CPU %v, read ended with %v", every, ws.CPU, rs.CPU, err)
		}
	}
}

// TestWriterMemory: a Writer holds at most WriterMemory, what the proxy
// counts for each compressed link (INFO mem_link_compression), and not much
// less at its largest. The encoder's block buffers grow with the blocks it
// has made, so a Writer's heap depends on its stream: for each pattern, 20
// Writers grow the Go heap by at most 20 × WriterMemory, and the largest
// (cache-like data, then random data, each in flushes of a chunk and a
// half) by at least 85% of it. Before its first chunk a Writer holds at
// most writerMemoryFresh, and at least 85% of it. Memory reports
// writerMemoryFresh until the first chunk, WriterMemory from then to
// Close, and 0 after.
func TestWriterMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("slow under -race (about 25 s): grows 20 Writers per pattern")
	}
	const n = 20
	heapOf := func(make func() []*Writer) (per int64, ws []*Writer) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ws = make()
		runtime.GC()
		runtime.ReadMemStats(&after)
		return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n, ws
	}
	fresh, ws := heapOf(func() []*Writer {
		ws := make([]*Writer, n)
		for i := range ws {
			ws[i] = NewWriter(io.Discard)
		}
		return ws
	})
	t.Logf("a new Writer holds %d bytes; writerMemoryFresh is %d", fresh, writerMemoryFresh)
	if fresh > writerMemoryFresh || fresh < writerMemoryFresh*85/100 {
		t.Errorf("a new Writer holds %d bytes of heap; writerMemoryFresh is %d (want 85%% to 100%% of it)", fresh, writerMemoryFresh)
	}
	for _, w := range ws {
		if got := w.Memory(); got != writerMemoryFresh {
			t.Fatalf("a new Writer's Memory() = %d; want writerMemoryFresh, %d", got, writerMemoryFresh)
		}
		w.Write([]byte("PING"))
		if got := w.Memory(); got != writerMemoryFresh {
			t.Fatalf("a Writer's Memory() = %d before its first chunk; want writerMemoryFresh, %d", got, writerMemoryFresh)
		}
		w.Flush()
		if got := w.Memory(); got != WriterMemory {
			t.Fatalf("a Writer's Memory() = %d after its first chunk; want WriterMemory, %d", got, WriterMemory)
		}
		w.Close()
	}
	cache := cachedata.New(1).FillRESP(4 << 20)
	random := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	largest := int64(0)
	for _, tc := range []struct {
		name  string
		data  [][]byte
		flush int
	}{
		{"cache then random, 200000-byte flushes", [][]byte{cache, random}, 200_000},
		{"random then cache, 16 KiB flushes", [][]byte{random, cache}, 16 << 10},
		{"cache, 600-byte flushes", [][]byte{cache[:1<<20]}, 600},
	} {
		per, ws := heapOf(func() []*Writer {
			ws := make([]*Writer, n)
			for i := range ws {
				ws[i] = NewWriter(io.Discard)
				for _, data := range tc.data {
					for off := 0; off+tc.flush <= len(data); off += tc.flush {
						ws[i].Write(data[off : off+tc.flush])
						if err := ws[i].Flush(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			return ws
		})
		t.Logf("%s: a Writer holds %d bytes; WriterMemory is %d", tc.name, per, WriterMemory)
		if per > WriterMemory {
			t.Errorf("%s: a Writer holds %d bytes of heap; more than WriterMemory, %d", tc.name, per, WriterMemory)
		}
		largest = max(largest, per)
		for _, w := range ws {
			w.Close()
			if got := w.Memory(); got != 0 {
				t.Fatalf("a closed Writer's Memory() = %d; want 0", got)
			}
		}
	}
	if largest < WriterMemory*85/100 {
		t.Errorf("the largest Writer holds %d bytes; WriterMemory, %d, is more than it needs", largest, WriterMemory)
	}
}

// TestFlushChunk: the chunks FlushChunk returns, sent by the caller, read
// back as Flush's do; nothing is written to dst, and an empty Writer
// returns no chunk.
func TestFlushChunk(t *testing.T) {
	var dst bytes.Buffer
	w := NewWriter(&dst)
	defer w.Close()
	if c, err := w.FlushChunk(); err != nil || c != nil {
		t.Fatalf("empty FlushChunk = %d bytes, %v; want none", len(c), err)
	}
	var wire []byte
	for _, p := range []string{"SET k v\r\n", "", "INCR counter\r\n"} {
		w.Write([]byte(p))
		c, err := w.FlushChunk()
		if err != nil {
			t.Fatal(err)
		}
		wire = append(wire, c...)
	}
	if dst.Len() != 0 {
		t.Fatalf("FlushChunk wrote %d bytes to dst", dst.Len())
	}
	got, err := io.ReadAll(NewReader(bytes.NewReader(wire)))
	if err != nil || string(got) != "SET k v\r\nINCR counter\r\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	if s := w.Stats(); s.Raw != 23 || s.Wire != int64(len(wire)) {
		t.Fatalf("stats %+v, want 23 raw and %d wire bytes", s, len(wire))
	}
}

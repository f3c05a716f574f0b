package linkzstd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"testing"

	"github.com/replproxy/replproxy/internal/cachedata"
)

// fuzzAllocBound bounds what one Reader may allocate on any input: its two
// chunk buffers, the decoder's window and history, and the decoder itself
// (its tables), with room for the runtime's rounding.
const fuzzAllocBound = 2*(MaxChunkWire+MaxChunkRaw) + 3*decoderMaxWindow

// readAllVaried reads r to its error in reads of varying sizes, so that
// chunks are served across several Reads.
func readAllVaried(r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 1000)
	for i := 1; ; i++ {
		n, err := r.Read(buf[:1+i*37%len(buf)])
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// FuzzReader feeds arbitrary bytes to a Reader: it never panics, allocates
// within its bounds, and returns only whole chunks whose CRC the input's
// own headers state, in order; io.EOF only at the end of the input.
func FuzzReader(f *testing.F) {
	// Small seeds: each new input the fuzzer finds is minimized, by as many
	// runs as it has bytes.
	data := cachedata.New(11).FillRESP(3 << 10)
	f.Add([]byte{})
	f.Add(wireOf(f, data[:1], 1))
	f.Add(wireOf(f, data, 600))
	f.Add(wireOf(f, data, 1<<10))
	f.Add(wireOf(f, data, 7))
	valid := wireOf(f, data, 600)
	f.Add(valid[:len(valid)-3])
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 0x10
	f.Add(flipped)
	huge := make([]byte, headerSize)
	putHeader(huge, MaxChunkWire, MaxChunkRaw, 0)
	f.Add(huge)

	f.Fuzz(checkReaderInput)
}

// checkReaderInput is FuzzReader's check of one input.
func checkReaderInput(t *testing.T, in []byte) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewReader(bytes.NewReader(in))
	out, err := readAllVaried(r)
	runtime.ReadMemStats(&after)
	r.Close()
	if grew := after.TotalAlloc - before.TotalAlloc; grew > fuzzAllocBound {
		t.Fatalf("a Reader allocated %d bytes on %d bytes of input", grew, len(in))
	}
	if err != io.EOF && !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read ended with %v: neither io.EOF nor ErrCorrupt", err)
	}
	// Walk the input's chunks: out must be their raw bytes, each
	// matching its header's length and CRC.
	wire := in
	for len(out) > 0 {
		if len(wire) < headerSize {
			t.Fatalf("%d bytes returned past the input's whole chunks", len(out))
		}
		c := binary.BigEndian.Uint32(wire[0:4])
		raw := int(binary.BigEndian.Uint32(wire[4:8]))
		sum := binary.BigEndian.Uint32(wire[8:12])
		if raw > len(out) || crc32.Checksum(out[:raw], castagnoli) != sum {
			t.Fatalf("returned bytes that are not a chunk verified by its header (raw %d, %d left)", raw, len(out))
		}
		out, wire = out[raw:], wire[headerSize+int(c):]
	}
	if err == io.EOF && len(wire) != 0 {
		t.Fatalf("io.EOF with %d bytes of input not returned", len(wire))
	}
}

// corruptCases are the raw data and its wire for FuzzCorruptChunk, encoded
// once: cache-like data in several flush patterns, random bytes.
type corruptCase struct{ raw, wire []byte }

func corruptCases(t testing.TB) []corruptCase {
	data := cachedata.New(12).FillRESP(40 << 10)
	random := make([]byte, 4<<10)
	for i := range random {
		random[i] = byte(i*7919 + i>>3*131)
	}
	return []corruptCase{
		{data, wireOf(t, data, 600)},
		{data, wireOf(t, data, 16<<10)},
		{data[:3000], wireOf(t, data[:3000], 1)},
		{random, wireOf(t, random, 1000)},
	}
}

// FuzzCorruptChunk flips one byte of a valid wire: every byte the Reader
// returns is a prefix of the raw data, and reading ends in an error unless
// the output is the raw data whole.
func FuzzCorruptChunk(f *testing.F) {
	cases := corruptCases(f)
	for i, c := range cases {
		for _, pos := range []uint32{0, 3, 5, 8, 11, 12, 16, uint32(len(c.wire) / 2), uint32(len(c.wire) - 1)} {
			f.Add(uint8(i), pos, byte(1<<(pos%8)))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, pos uint32, xor byte) {
		c := cases[int(which)%len(cases)]
		if xor == 0 {
			xor = 0xff
		}
		wire := bytes.Clone(c.wire)
		wire[int(pos)%len(wire)] ^= xor
		r := NewReader(bytes.NewReader(wire))
		defer r.Close()
		out, err := readAllVaried(r)
		if !bytes.HasPrefix(c.raw, out) {
			t.Fatalf("byte %d ^ %#x: %d bytes returned that are not a prefix of the raw data", int(pos)%len(wire), xor, len(out))
		}
		if err == io.EOF && !bytes.Equal(out, c.raw) {
			t.Fatalf("byte %d ^ %#x: io.EOF after %d of %d raw bytes", int(pos)%len(wire), xor, len(out), len(c.raw))
		}
		if err != io.EOF && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read ended with %v: neither io.EOF nor ErrCorrupt", err)
		}
	})
}

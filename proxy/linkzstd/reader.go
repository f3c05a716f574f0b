package linkzstd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// errReaderClosed is a closed Reader's sticky error.
var errReaderClosed = errors.New("linkzstd: reader closed")

// decoderOptions are the Reader's zstd settings.
func decoderOptions() []zstd.DOption {
	return []zstd.DOption{
		// Synchronous: the decoder reads its source (the chunk in memory)
		// only when asked, in the caller's goroutine, and starts none.
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(decoderMaxWindow),
		zstd.WithDecoderMaxMemory(decoderMaxWindow),
	}
}

// Reader reads chunks from src (what the handshake's bufio buffered, then the socket),
// verifies each one's CRC before returning any of its bytes, and returns the raw bytes.
// After the first error every Read returns it (sticky). Owned by the link's reading goroutine.
//
// A clean end of src at a chunk boundary is io.EOF; an end inside a chunk is
// io.ErrUnexpectedEOF and ErrCorrupt (both match with errors.Is); src's other
// errors are returned wrapped, as they are.
type Reader struct {
	src io.Reader
	dec *zstd.Decoder
	// body is the decoder's source: the current chunk's compressed body,
	// read whole from src before the decoder sees a byte of it.
	body chunkSource
	// raw holds the current chunk's verified raw bytes; raw[served:] are
	// not returned yet. Allocated at the first valid header, at its
	// bound (one byte over MaxChunkRaw, to tell a longer block).
	raw    []byte
	served int
	header [headerSize]byte
	err    error

	// rawBytes and wire are Stats: written by the owner, read atomically
	// by anyone; so is cpu's total.
	rawBytes, wire atomic.Int64
	cpu            cpuMeter
}

// chunkSource serves one chunk's body to the decoder and nothing past it:
// past the end it returns io.ErrUnexpectedEOF, since a chunk must hold
// whole blocks.
type chunkSource struct {
	b   []byte
	off int
}

func (c *chunkSource) Read(p []byte) (int, error) {
	if c.off >= len(c.b) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, c.b[c.off:])
	c.off += n
	return n, nil
}

// NewReader returns a Reader of the chunks in src.
func NewReader(src io.Reader) *Reader {
	r := &Reader{src: src}
	dec, err := zstd.NewReader(&r.body, decoderOptions()...)
	if err != nil {
		// The options are constants: an error is a broken invariant.
		panic(fmt.Sprintf("linkzstd: decoder options: %v", err))
	}
	r.dec = dec
	return r
}

// Read returns raw bytes of the current chunk, reading and verifying the
// next one when it is served.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.served == len(r.raw) {
		if r.err != nil {
			return 0, r.err
		}
		if err := r.next(); err != nil {
			r.err = err
			r.raw, r.served = r.raw[:0], 0
			return 0, err
		}
	}
	n := copy(p, r.raw[r.served:])
	r.served += n
	return n, nil
}

// next reads, decodes and verifies the next chunk into r.raw.
func (r *Reader) next() error {
	if r.dec == nil {
		return errReaderClosed
	}
	if _, err := io.ReadFull(r.src, r.header[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return truncated("chunk header", err)
	}
	wire := binary.BigEndian.Uint32(r.header[0:4])
	raw := binary.BigEndian.Uint32(r.header[4:8])
	sum := binary.BigEndian.Uint32(r.header[8:12])
	// Checked before anything is allocated or read.
	if wire < 1 || wire > MaxChunkWire || raw < 1 || raw > MaxChunkRaw {
		return fmt.Errorf("linkzstd: chunk header of %d compressed and %d raw bytes: %w", wire, raw, ErrCorrupt)
	}
	if r.body.b == nil {
		r.body.b = make([]byte, 0, MaxChunkWire)
		r.raw = make([]byte, 0, MaxChunkRaw+1)
	}
	r.body.b, r.body.off = r.body.b[:wire], 0
	if _, err := io.ReadFull(r.src, r.body.b); err != nil {
		return truncated("chunk body", err)
	}

	// Decode exactly raw bytes, asking for one more: the decoder returns
	// what its current block holds without reading the next (its Read
	// decodes a block only when it has returned nothing yet), so a block
	// longer than the header says shows as raw+1 bytes, and one that ends
	// at raw leaves the decoder at a block boundary.
	out := r.raw[:raw+1]
	got := 0
	var err error
	t0, weight := r.cpu.begin(int(raw))
	for got < int(raw) && err == nil {
		var n int
		n, err = r.dec.Read(out[got:])
		got += n
	}
	r.cpu.end(t0, weight)
	switch {
	case err != nil && got < int(raw):
		// The body was read whole: whatever the decoder says, even that it
		// ran out of input (chunkSource's io.ErrUnexpectedEOF), the chunk is
		// corrupt, not cut by the link's end, so its error is not wrapped.
		return fmt.Errorf("linkzstd: decode chunk of %d raw bytes after %d: %v: %w", raw, got, err, ErrCorrupt)
	case got > int(raw):
		return fmt.Errorf("linkzstd: chunk decodes to more than its %d raw bytes: %w", raw, ErrCorrupt)
	case r.body.off != len(r.body.b):
		return fmt.Errorf("linkzstd: chunk of %d compressed bytes decoded from %d: %w", wire, r.body.off, ErrCorrupt)
	}
	if c := crc32.Checksum(out[:raw], castagnoli); c != sum {
		return fmt.Errorf("linkzstd: chunk CRC-32C %08x, header says %08x: %w", c, sum, ErrCorrupt)
	}
	r.raw, r.served = out[:raw], 0
	r.rawBytes.Add(int64(raw))
	r.wire.Add(int64(headerSize) + int64(wire))
	return nil
}

// truncated wraps a read error of src inside a chunk: an end of input
// there is corruption (io.ErrUnexpectedEOF and ErrCorrupt), anything else is
// src's own error.
func truncated(what string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
		return fmt.Errorf("linkzstd: truncated %s: %w: %w", what, io.ErrUnexpectedEOF, ErrCorrupt)
	}
	return fmt.Errorf("linkzstd: read %s: %w", what, err)
}

// Buffered returns the verified raw bytes not yet returned.
func (r *Reader) Buffered() int { return len(r.raw) - r.served }

// Stats returns the Reader's figures; safe from any goroutine.
func (r *Reader) Stats() Stats {
	return Stats{Raw: r.rawBytes.Load(), Wire: r.wire.Load(), CPU: time.Duration(r.cpu.total.Load())}
}

// Close releases the decoder; bytes not yet returned are dropped and every
// later Read returns an error. Idempotent.
func (r *Reader) Close() {
	if r.dec == nil {
		return
	}
	r.dec.Close()
	r.dec = nil
	r.raw, r.served = nil, 0
	r.body.b = nil
	if r.err == nil {
		r.err = errReaderClosed
	}
}

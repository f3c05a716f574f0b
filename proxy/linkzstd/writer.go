package linkzstd

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
)

// errWriterClosed is a closed Writer's sticky error.
var errWriterClosed = errors.New("linkzstd: writer closed")

// encoderOptions are the Writer's zstd settings; the codec benchmark's
// table (bench_test.go) says why these.
func encoderOptions() []zstd.EOption {
	return []zstd.EOption{
		// Synchronous: the work is done in the caller's goroutine, where
		// it is measured, and no goroutine outlives a Flush.
		zstd.WithEncoderConcurrency(1),
		// Each chunk carries its own CRC-32C; the frame's would come only
		// at its end, which an endless frame never reaches.
		zstd.WithEncoderCRC(false),
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithWindowSize(encoderWindow),
		zstd.WithLowerEncoderMem(encoderLowMem),
	}
}

// Writer compresses what is written to it into chunks written to dst. Write only buffers
// (copies into the encoder) unless MaxChunkRaw raw bytes are pending, then it flushes; Flush
// ends the current chunk and writes it to dst with ONE dst.Write. Not safe for concurrent use:
// owned by the one goroutine that writes the replica's socket.
//
// After the first error (dst's, or Close) every Write and Flush returns it.
type Writer struct {
	dst io.Writer
	enc *zstd.Encoder
	// chunk is the chunk being built: headerSize bytes of room for the
	// header, then what the encoder wrote; the encoder's destination.
	chunk chunkBuffer
	// pending and crc are the raw bytes written since the last chunk and
	// their CRC-32C.
	pending int
	crc     uint32
	err     error

	// raw and wire are Stats: written by the owner, read atomically by
	// anyone; so is cpu's total.
	raw, wire atomic.Int64
	cpu       cpuMeter
	// held is Memory's figure: written by the owner, read by anyone.
	held atomic.Int64
}

// chunkBuffer is the encoder's destination: it appends to b.
type chunkBuffer struct{ b []byte }

func (c *chunkBuffer) Write(p []byte) (int, error) {
	c.b = append(c.b, p...)
	return len(p), nil
}

// NewWriter returns a Writer whose chunks go to dst. The first chunk opens
// the connection's one zstd frame; no chunk closes it.
func NewWriter(dst io.Writer) *Writer {
	return newWriter(dst, encoderOptions()...)
}

// newWriter is NewWriter with other encoder options, for the codec
// benchmark's comparisons; the options must keep the encoder synchronous.
func newWriter(dst io.Writer, opts ...zstd.EOption) *Writer {
	w := &Writer{dst: dst}
	w.chunk.b = make([]byte, headerSize, headerSize+MaxChunkWire)
	enc, err := zstd.NewWriter(&w.chunk, opts...)
	if err != nil {
		// The options are constants: an error is a broken invariant.
		panic(fmt.Sprintf("linkzstd: encoder options: %v", err))
	}
	w.enc = enc
	w.held.Store(writerMemoryFresh)
	return w
}

// Write compresses p into the current chunk; when MaxChunkRaw raw bytes are
// pending it ends the chunk and writes it to dst, so one Write may write
// several chunks. It returns len(p) unless an error stops it.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		take := min(len(p), MaxChunkRaw-w.pending)
		w.crc = crc32.Update(w.crc, castagnoli, p[:take])
		var err error
		if w.pending+take == MaxChunkRaw {
			// The encoder's block is MaxChunkRaw: this Write encodes it,
			// so it is measured as Flush's encoding is.
			t0, weight := w.cpu.begin(MaxChunkRaw)
			_, err = w.enc.Write(p[:take])
			w.cpu.end(t0, weight)
		} else {
			_, err = w.enc.Write(p[:take])
		}
		if err != nil {
			w.err = fmt.Errorf("linkzstd: compress: %w", err)
			return n, w.err
		}
		w.pending += take
		n += take
		p = p[take:]
		if w.pending == MaxChunkRaw {
			if err := w.Flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// Flush ends the current chunk and writes it to dst with one dst.Write. With
// nothing pending it writes nothing.
func (w *Writer) Flush() error {
	chunk, err := w.FlushChunk()
	if err != nil || len(chunk) == 0 {
		return err
	}
	if _, err := w.dst.Write(chunk); err != nil {
		// The encoder's window already holds the chunk the peer did not
		// get: the stream cannot go on.
		w.err = fmt.Errorf("linkzstd: write chunk: %w", err)
		return w.err
	}
	return nil
}

// FlushChunk ends the current chunk and returns it whole (header and
// body) for the caller to send, instead of writing it to dst: a sender
// that must not block writes what the socket takes and the rest later, in
// order, before anything this Writer makes next. The slice is the
// Writer's, valid until its next Write, Flush or FlushChunk. With nothing
// pending it returns nothing. The chunk counts as sent in Stats.
func (w *Writer) FlushChunk() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.pending == 0 {
		return nil, nil
	}
	t0, weight := w.cpu.begin(w.pending)
	err := w.enc.Flush()
	w.cpu.end(t0, weight)
	if err != nil {
		w.err = fmt.Errorf("linkzstd: compress: %w", err)
		return nil, w.err
	}
	if w.held.Load() != WriterMemory {
		w.held.Store(WriterMemory) // the encoder made its history
	}
	body := len(w.chunk.b) - headerSize
	if body < 1 || body > MaxChunkWire {
		// A chunk the Reader would refuse is never sent.
		w.err = fmt.Errorf("linkzstd: a chunk of %d raw bytes compressed to %d", w.pending, body)
		return nil, w.err
	}
	putHeader(w.chunk.b, body, w.pending, w.crc)
	chunk := w.chunk.b
	w.raw.Add(int64(w.pending))
	w.wire.Add(int64(len(chunk)))
	w.chunk.b = w.chunk.b[:headerSize]
	w.pending, w.crc = 0, 0
	return chunk, nil
}

// WriterMemory is what a Writer holds, at most: its encoder's history (the
// 256 KiB window and a block, allocated at the first chunk), hash table and
// block buffers, which grow with the blocks it has made, and its chunk
// buffer; TestWriterMemory measures 0.9 to 1.2 MB over cache-like, random
// and small-flush streams. The proxy counts it for each compressed link
// (mem_link_compression).
const WriterMemory = 1280 << 10

// writerMemoryFresh is what a Writer holds before its first chunk: all but
// the encoder's history and grown buffers (TestWriterMemory).
const writerMemoryFresh = 496 << 10

// Memory returns what the Writer holds, counted at its bounds:
// writerMemoryFresh from NewWriter to its first chunk, WriterMemory from
// then to Close, 0 after. Safe from any goroutine.
func (w *Writer) Memory() int64 { return w.held.Load() }

// Buffered returns the raw bytes written and not yet flushed.
func (w *Writer) Buffered() int { return w.pending }

// Stats returns the Writer's figures; safe from any goroutine.
func (w *Writer) Stats() Stats {
	return Stats{Raw: w.raw.Load(), Wire: w.wire.Load(), CPU: time.Duration(w.cpu.total.Load())}
}

// Close releases the encoder; pending bytes are dropped and every later
// Write or Flush returns an error. Idempotent.
func (w *Writer) Close() {
	if w.enc == nil {
		return
	}
	// The encoder is synchronous: it holds no goroutine, only memory,
	// which dropping it returns.
	w.enc = nil
	w.chunk.b = nil
	w.pending = 0
	w.held.Store(0)
	if w.err == nil {
		w.err = errWriterClosed
	}
}

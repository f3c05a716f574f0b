package linkzstd

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// The chunk format; wire format, do not change.
const (
	// MaxChunkRaw bounds a chunk's raw length R: one zstd block's worth,
	// so that a chunk is one block and a Writer's chunk is encoded at once.
	MaxChunkRaw = 128 << 10
	// MaxChunkWire bounds a chunk's compressed body C: a block of
	// MaxChunkRaw stored raw (3 bytes of block header) after the frame
	// header (at most 18 bytes, in the first chunk), with room to spare.
	MaxChunkWire = MaxChunkRaw + 1<<10
	// headerSize is a chunk header's length: C, R and the CRC-32C of the
	// raw bytes, each 4 bytes big-endian.
	headerSize = 12
	// MaxChunk is the longest chunk on the wire, header and body: what a
	// Reader reads whole before it returns a byte of it.
	MaxChunk = headerSize + MaxChunkWire
)

// ErrCorrupt is wrapped by every error of a Reader that is not the source's
// own: a header past the bounds, a body the decoder refuses or does not
// consume whole, a raw length that differs from the header's, a CRC that
// does not match, input truncated inside a chunk.
var ErrCorrupt = errors.New("linkzstd: corrupt compressed link")

// Stats are a link's figures; every field is read atomically from any goroutine.
type Stats struct {
	Raw  int64         // uncompressed bytes through the codec
	Wire int64         // bytes on the wire: chunk headers + compressed bodies
	CPU  time.Duration // CPU time spent inside the zstd encoder (Writer) or decoder (Reader)
}

// castagnoli is CRC-32C's table, built once and only read.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// putHeader writes a chunk header into h.
func putHeader(h []byte, wire, raw int, crc uint32) {
	binary.BigEndian.PutUint32(h[0:4], uint32(wire))
	binary.BigEndian.PutUint32(h[4:8], uint32(raw))
	binary.BigEndian.PutUint32(h[8:12], crc)
}

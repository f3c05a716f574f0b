package replbuf

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"sync/atomic"
	"time"
)

// SnapshotState is where a snapshot is in its life.
type SnapshotState int32

const (
	// SnapshotBuilding: bytes are still arriving; readers may follow them.
	SnapshotBuilding SnapshotState = iota
	// SnapshotComplete: the last byte arrived and the checksum (when not zero) matched.
	SnapshotComplete
	// SnapshotFailed: the transfer broke or the checksum did not match. Never served again.
	SnapshotFailed
)

func (st SnapshotState) String() string {
	switch st {
	case SnapshotBuilding:
		return "building"
	case SnapshotComplete:
		return "complete"
	case SnapshotFailed:
		return "failed"
	}
	return fmt.Sprintf("SnapshotState(%d)", int32(st))
}

// rdbCRCTable is CRC-64/Jones as Redis uses it for RDB files (reflected,
// polynomial 0xad93d23594c935a9, init 0, xorout 0). Read-only.
var rdbCRCTable = crc64.MakeTable(0x95AC9329AC4BC9B5)

// CRC64 updates a Redis CRC-64 (Jones) with p. Start from 0.
// Go's crc64.Update inverts before and after; Redis's variant does neither.
func CRC64(crc uint64, p []byte) uint64 {
	return ^crc64.Update(^crc, rdbCRCTable, p)
}

// rdbTrailer is the RDB checksum's size: the last 8 bytes, little-endian.
const rdbTrailer = 8

// A Snapshot is an RDB payload taken at a point of the replication stream,
// (ReplID, Offset): a full sync sends "+FULLRESYNC ReplID Offset", these bytes,
// and then the stream from Offset+1. It is held in the same blocks as the
// stream (from the same Pool) and read with the same cursors, so readers can
// follow a snapshot while it is still arriving.
//
// One goroutine (the one receiving the RDB) is the producer: ReadOnce,
// Append, Complete and Fail are its methods. Everything else is safe for
// concurrent use.
type Snapshot struct {
	replID  string
	offset  int64
	created time.Time

	s     *Stream
	state atomic.Int32 // a SnapshotState; producer-only writes
	size  atomic.Int64 // bytes so far; producer-only writes
	// windowed: memory keeps only the latest bytes (Window); set by the
	// producer.
	windowed atomic.Bool

	// Owned by the producer: the CRC over every byte that is certainly not
	// part of the trailer (all but the last 8 received), and where it stopped.
	crc    uint64
	crcBlk *block
	crcPos int
}

// NewSnapshot returns an empty snapshot in the building state. The bytes come
// from pool (nil: a private pool); now is its creation time.
func NewSnapshot(replID string, offset int64, pool *Pool, now time.Time) *Snapshot {
	s := NewStream(0, &Config{BacklogSize: -1, Pool: pool})
	sn := &Snapshot{replID: replID, offset: offset, created: now, s: s}
	sn.crcBlk = s.tail.Load()
	return sn
}

// Window makes the snapshot keep in memory only about its latest n bytes
// (at least two blocks, so that the running checksum and the trailer are
// always held): older blocks go back to the pool at once and as new ones
// fill. It is for a payload the producer also writes to a file as it
// arrives, which is then served from that file: a windowed snapshot has no
// readers (NewReader fails), so nothing pins what it lets go. Producer-only,
// while no reader is open.
func (sn *Snapshot) Window(n int64) {
	sn.windowed.Store(true)
	sn.s.SetBacklogSize(max(n, 2*BlockSize))
}

// Windowed reports whether Window was called: the snapshot's bytes are not
// all in memory.
func (sn *Snapshot) Windowed() bool { return sn.windowed.Load() }

// ReplID is the replication ID the snapshot belongs to.
func (sn *Snapshot) ReplID() string { return sn.replID }

// Offset is the stream offset the snapshot was taken at (the last byte it includes).
func (sn *Snapshot) Offset() int64 { return sn.offset }

// Created is when the snapshot was started.
func (sn *Snapshot) Created() time.Time { return sn.created }

// State returns the snapshot's state.
func (sn *Snapshot) State() SnapshotState { return SnapshotState(sn.state.Load()) }

// Size returns the number of bytes received so far (the RDB's size once complete).
func (sn *Snapshot) Size() int64 { return sn.size.Load() }

// Usage returns the memory the snapshot holds.
func (sn *Snapshot) Usage() Usage { return sn.s.Usage() }

// Readers returns the number of open readers.
func (sn *Snapshot) Readers() int { return sn.s.Usage().Cursors }

// ReadOnce does one Read from r straight into the snapshot's blocks, like
// Stream.ReadOnce, and returns the new bytes (valid until the next call).
func (sn *Snapshot) ReadOnce(r io.Reader) ([]byte, error) {
	if sn.State() != SnapshotBuilding {
		return nil, ErrClosed
	}
	p, err := sn.s.ReadOnce(r)
	sn.added(len(p))
	return p, err
}

// Append copies p into the snapshot.
func (sn *Snapshot) Append(p []byte) error {
	if sn.State() != SnapshotBuilding {
		return ErrClosed
	}
	if err := sn.s.Append(p); err != nil {
		return err
	}
	sn.added(len(p))
	return nil
}

// added advances the size and the running checksum, which trails the end by
// the 8 bytes that may turn out to be the trailer.
func (sn *Snapshot) added(n int) {
	if n == 0 {
		return
	}
	size := sn.size.Add(int64(n))
	sn.crcTo(size - rdbTrailer)
}

// crcTo extends the running checksum to cover the first limit bytes.
func (sn *Snapshot) crcTo(limit int64) {
	for {
		b := sn.crcBlk
		done := b.start - 1 + int64(sn.crcPos) // bytes covered so far
		if done >= limit {
			return
		}
		end := min(int64(BlockSize), limit-(b.start-1))
		sn.crc = CRC64(sn.crc, b.buf[sn.crcPos:end])
		sn.crcPos = int(end)
		if sn.crcPos < BlockSize {
			return
		}
		next := b.next.Load()
		if next == nil {
			return
		}
		sn.crcBlk, sn.crcPos = next, 0
	}
}

// Complete marks the last byte received. When the RDB's 8-byte CRC64 trailer
// is not zero (zero means "checksum disabled", as in Redis) it must match the
// bytes before it; if it does not, the snapshot fails with ErrChecksum.
// Readers that follow the snapshot then see io.EOF after its last byte.
func (sn *Snapshot) Complete() error {
	if sn.State() != SnapshotBuilding {
		return ErrClosed
	}
	size := sn.Size()
	if size < rdbTrailer {
		err := fmt.Errorf("%w: %d bytes is too short for an RDB", ErrChecksum, size)
		sn.Fail(err)
		return err
	}
	var trailer [rdbTrailer]byte
	sn.readAt(trailer[:], size-rdbTrailer)
	if want := binary.LittleEndian.Uint64(trailer[:]); want != 0 && want != sn.crc {
		err := fmt.Errorf("%w: trailer %016x, computed %016x", ErrChecksum, want, sn.crc)
		sn.Fail(err)
		return err
	}
	sn.state.Store(int32(SnapshotComplete))
	sn.s.Close(nil)
	return nil
}

// readAt copies the bytes at snapshot position off (0-based) into p. They must
// have been received. Producer-only; used for the trailer.
func (sn *Snapshot) readAt(p []byte, off int64) {
	b := sn.crcBlk // at most one block behind the end: the trailer is near it
	if b.start-1 > off {
		panic("replbuf: snapshot trailer before the checksum position") // crcTo trails the end by 8
	}
	for len(p) > 0 {
		i := int(off - (b.start - 1))
		if i >= BlockSize {
			b = b.next.Load()
			continue
		}
		n := copy(p, b.buf[i:b.used.Load()])
		p, off = p[n:], off+int64(n)
	}
}

// Fail marks the snapshot failed: readers fail with an error wrapping err, and
// it is never served again.
func (sn *Snapshot) Fail(err error) {
	if sn.State() != SnapshotBuilding {
		return
	}
	sn.state.Store(int32(SnapshotFailed))
	sn.s.Close(fmt.Errorf("replbuf: snapshot failed: %w", err))
}

// NewReader returns a cursor over the snapshot's bytes from the first. It
// follows a snapshot that is still arriving; after the last byte of a complete
// snapshot Pending returns io.EOF, and a failed snapshot's error otherwise.
func (sn *Snapshot) NewReader() (*Cursor, error) {
	if sn.State() == SnapshotFailed {
		return nil, fmt.Errorf("replbuf: snapshot failed")
	}
	if sn.Windowed() {
		return nil, ErrWindowed
	}
	return sn.s.Attach(1)
}

// Release gives the snapshot's blocks back. Readers still open fail with
// ErrReleased. Safe to call more than once.
func (sn *Snapshot) Release() {
	sn.s.Release()
}

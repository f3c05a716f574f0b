package replbuf

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/rdbcheck"
)

// SnapshotState is where a snapshot is in its life.
type SnapshotState int32

const (
	// SnapshotBuilding: bytes are still arriving; readers may follow them.
	SnapshotBuilding SnapshotState = iota
	// SnapshotComplete: the last byte arrived and the walk passed the RDB's end.
	SnapshotComplete
	// SnapshotFailed: the transfer broke or the walk refused it. Never served again.
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

// holdBack is how many of the last bytes received a building snapshot
// keeps from its readers: an RDB's end opcode and 8-byte checksum, so that
// no reader has the whole payload before Complete has the walk's verdict
// on its end.
const holdBack = 9

// A Snapshot is an RDB payload taken at a point of the replication stream,
// (ReplID, Offset): a full sync sends "+FULLRESYNC ReplID Offset", these bytes,
// and then the stream from Offset+1. It is held in the same blocks as the
// stream (from the same Pool) and read with the same cursors, so readers can
// follow a snapshot while it is still arriving.
//
// Every byte is walked (rdbcheck) before any reader can see it: a payload
// Redis's loader would refuse fails at the first byte found wrong, and the
// last holdBack bytes received are published only once Complete has the
// walk's verdict on the end marker and the checksum. A reader following a
// payload that fails has only bytes that were walked, and never its end.
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
	size  atomic.Int64 // bytes received so far, walked, published or held back; producer-only writes
	// windowed: memory keeps only the latest bytes (Window); set by the
	// producer.
	windowed atomic.Bool

	walk *rdbcheck.Walker // owned by the producer

	// The last bytes received, which a building snapshot holds back from
	// its readers (at most holdBack); owned by the producer.
	held  [holdBack]byte
	nheld int
}

// NewSnapshot returns an empty snapshot in the building state. The bytes come
// from pool (nil: a private pool); now is its creation time.
func NewSnapshot(replID string, offset int64, pool *Pool, now time.Time) *Snapshot {
	s := NewStream(0, &Config{BacklogSize: -1, Pool: pool})
	return &Snapshot{replID: replID, offset: offset, created: now, s: s, walk: rdbcheck.NewWalker()}
}

// Window makes the snapshot keep in memory only about its latest n bytes
// (at least two blocks, so that the bytes held back are always held):
// older blocks go back to the pool at once and as new ones
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
// Stream.ReadOnce, walks the new bytes and publishes them, but for the
// last holdBack. It returns the new bytes (valid until the next call); a
// walk that fails fails the snapshot, and ReadOnce returns no bytes and
// the walk's error.
func (sn *Snapshot) ReadOnce(r io.Reader) ([]byte, error) {
	if sn.State() != SnapshotBuilding {
		return nil, ErrClosed
	}
	p, err := sn.s.Fill(r)
	if len(p) > 0 {
		if terr := sn.take(p); terr != nil {
			return nil, terr
		}
	}
	return p, err
}

// Append copies p into the snapshot, walks it and publishes it, but for
// the last holdBack bytes; a walk that fails fails the snapshot.
func (sn *Snapshot) Append(p []byte) error {
	if sn.State() != SnapshotBuilding {
		return ErrClosed
	}
	for len(p) > 0 {
		q, err := sn.s.FillCopy(p)
		if err != nil {
			return err
		}
		p = p[len(q):]
		if err := sn.take(q); err != nil {
			return err
		}
	}
	return nil
}

// take walks p, the bytes just filled, and publishes every byte received
// but the last holdBack; or fails the snapshot with the walk's error.
func (sn *Snapshot) take(p []byte) error {
	if _, err := sn.walk.Write(p); err != nil {
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		sn.Fail(err)
		return err
	}
	sn.keepHeld(p)
	size := sn.size.Add(int64(len(p)))
	return sn.s.Publish(max(size-holdBack, sn.s.Offset()))
}

// keepHeld remembers the last holdBack bytes received, p the newest.
func (sn *Snapshot) keepHeld(p []byte) {
	if len(p) >= holdBack {
		sn.nheld = copy(sn.held[:], p[len(p)-holdBack:])
		return
	}
	keep := min(sn.nheld, holdBack-len(p)) // of the bytes before p
	copy(sn.held[:keep], sn.held[sn.nheld-keep:sn.nheld])
	sn.nheld = keep + copy(sn.held[keep:], p)
}

// Held returns the bytes received that readers cannot see yet: the last
// ones, held back until Complete (none after it). For the producer, which
// writes a payload to a file as it arrives: the bytes before these can be
// read, these cannot. The slice is valid until the next producer call.
func (sn *Snapshot) Held() []byte {
	if sn.State() != SnapshotBuilding {
		return nil
	}
	return sn.held[:sn.nheld]
}

// Complete marks the last byte received. The walk must have reached the
// RDB's end with nothing after it (the end opcode, and the checksum, which
// must match unless it is zero: "checksum disabled", as in Redis);
// otherwise the snapshot fails with ErrRefused (and rdbcheck.ErrChecksum
// for a checksum that does not match). Readers that follow the snapshot
// are then given the bytes held back and see io.EOF after its last byte.
func (sn *Snapshot) Complete() error {
	if sn.State() != SnapshotBuilding {
		return ErrClosed
	}
	if err := sn.walk.Close(); err != nil {
		err = fmt.Errorf("%w: %w", ErrRefused, err)
		sn.Fail(err)
		return err
	}
	if err := sn.s.Publish(sn.s.Filled()); err != nil {
		sn.Fail(err)
		return err
	}
	sn.state.Store(int32(SnapshotComplete))
	sn.s.Close(nil)
	return nil
}

// Fail marks the snapshot failed: readers fail with an error wrapping err, and
// it is never served again.
func (sn *Snapshot) Fail(err error) {
	if sn.State() != SnapshotBuilding {
		return
	}
	sn.state.Store(int32(SnapshotFailed))
	sn.walk.Close() // ends the walk's coroutine
	sn.s.Discard()  // what was held back, or not walked, never reaches a reader
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

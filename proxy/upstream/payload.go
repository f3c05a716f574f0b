package upstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replbuf"
)

// deadlineRefresh is how often a busy reader pushes its read deadline out.
const deadlineRefresh = time.Second

// meter is what differs between the main link and a side link while bytes
// arrive: the main link shows its progress in INFO, a side link only counts
// the bytes of the snapshot it fetches.
type meter interface {
	sawIO(now time.Time)              // a reply line arrived
	payloadBegins(size int64)         // the payload header said size (-1: EOF mark)
	payloadRead(n int, now time.Time) // n payload bytes arrived
}

// mainMeter is the main link's meter: last I/O, sync progress, RDB bytes.
type mainMeter struct{ l *Link }

func (m mainMeter) sawIO(now time.Time) { m.l.lastIO.Store(now.UnixNano()) }

func (m mainMeter) payloadBegins(size int64) {
	m.l.syncTotal.Store(size)
	m.l.syncRead.Store(0)
}

func (m mainMeter) payloadRead(n int, now time.Time) {
	m.l.counters.ReplInputBytes.Add(int64(n))
	m.l.lastIO.Store(now.UnixNano())
	m.l.syncRead.Add(int64(n))
	m.l.counters.RDBBytes.Add(int64(n))
}

// sideMeter is a side link's meter: fetched bytes only.
type sideMeter struct{ c Counters }

func (sideMeter) sawIO(time.Time)     {}
func (sideMeter) payloadBegins(int64) {}

func (m sideMeter) payloadRead(n int, _ time.Time) {
	m.c.ReplInputBytes.Add(int64(n))
	m.c.FetchBytes.Add(int64(n))
}

// readPayload reads the payload header ("$<len>" or "$EOF:<mark>") and the
// RDB into a new snapshot, and checks its CRC64. started is called with the
// snapshot and the declared size (-1: EOF mark) before its first byte, so
// that others can follow or count it; an error from it refuses the payload,
// unread. The sink it returns, if any, gets every payload byte as it arrives
// (committed once the CRC64 checked, aborted on any failure). On failure the
// snapshot is failed and left to whoever started saw it. It reports whether
// the payload was EOF-marked.
func (c *session) readPayload(replID string, offset int64, started func(*replbuf.Snapshot, int64) (PayloadSink, error)) (*replbuf.Snapshot, bool, error) {
	// The primary may take long to start the payload (a disk-based sync
	// writes the RDB first), but it sends a newline every second meanwhile,
	// which readLine takes as a renewal: silence fails within repl-timeout.
	c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	header, err := c.readLine()
	if err != nil {
		return nil, false, fmt.Errorf("payload header: %w", err)
	}
	if header[0] == '-' {
		return nil, false, fmt.Errorf("primary aborted the sync: %w", &wire.RefusedError{Command: "the payload", Reply: header})
	}
	size, mark, err := ParsePayloadHeader(header)
	if err != nil {
		return nil, false, err
	}
	sn := replbuf.NewSnapshot(replID, offset, c.l.pool, time.Now())
	sink, err := started(sn, size)
	if err != nil {
		sn.Release()
		return nil, false, err
	}
	c.meter.payloadBegins(size)
	if mark != nil {
		err = c.readEOFPayload(sn, mark, sink)
	} else {
		err = c.readSizedPayload(sn, size, sink)
	}
	if err == nil {
		err = sn.Complete()
	}
	if errors.Is(err, replbuf.ErrRefused) {
		c.l.counters.RDBCheckFails.Add(1)
		if errors.Is(err, rdbcheck.ErrChecksum) {
			c.l.counters.ChecksumFails.Add(1)
		}
	}
	if err == nil && sink != nil {
		if err = sink.Commit(); err != nil {
			err = fmt.Errorf("payload file: %w", err)
		}
		sink = nil // committed, or cleaned up by a failed Commit
	}
	if err != nil {
		if sink != nil {
			sink.Abort()
		}
		sn.Fail(err)
		return nil, false, err
	}
	return sn, mark != nil, nil
}

// toSink writes p, new payload bytes, to sink when there is one.
func toSink(sink PayloadSink, p []byte) error {
	if sink == nil || len(p) == 0 {
		return nil
	}
	if err := sink.Write(p); err != nil {
		return fmt.Errorf("payload file: %w", err)
	}
	return nil
}

// source is where payload and stream bytes come from: what the handshake
// reader has buffered first, then the connection itself, so that once the
// buffer is drained every read goes straight from the socket into a block.
// On a compressed link the connection's place is the decompressing reader,
// which copies each verified chunk into the block (the one copy compression
// costs).
func (c *session) source() io.Reader { return drainThen{c.rd, c.in} }

type drainThen struct {
	rd *wire.CommandReader
	in io.Reader
}

func (d drainThen) Read(p []byte) (int, error) {
	if d.rd.Buffered() > 0 {
		return d.rd.Reader().Read(p)
	}
	return d.in.Read(p)
}

// deadline pushes the read deadline out at most once a second, so that the
// link fails between repl-timeout and repl-timeout+1s after the last byte
// (Redis checks once a second too).
type deadline struct {
	conn    net.Conn
	timeout time.Duration
	set     time.Time
}

// rearm sets the deadline touch last set again, after a shorter one.
func (d *deadline) rearm() {
	d.conn.SetReadDeadline(d.set.Add(d.timeout + deadlineRefresh))
}

func (d *deadline) touch(now time.Time) {
	if now.Sub(d.set) >= deadlineRefresh {
		d.conn.SetReadDeadline(now.Add(d.timeout + deadlineRefresh))
		d.set = now
	}
}

// readSizedPayload reads a "$<len>" payload: exactly n bytes, straight into the
// snapshot's blocks. Whatever follows is already stream.
func (c *session) readSizedPayload(sn *replbuf.Snapshot, n int64, sink PayloadSink) error {
	src := io.LimitReader(c.source(), n)
	dl := deadline{conn: c.conn, timeout: c.timeout}
	for sn.Size() < n {
		now := time.Now()
		dl.touch(now)
		p, err := sn.ReadOnce(src)
		if len(p) > 0 {
			c.meter.payloadRead(len(p), now)
			if werr := toSink(sink, p); werr != nil {
				return werr
			}
		}
		if err == io.EOF && sn.Size() < n {
			return fmt.Errorf("primary closed the link after %d of %d payload bytes: %w", sn.Size(), n, io.ErrUnexpectedEOF)
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// readEOFPayload reads a "$EOF:<mark>" payload: the RDB bytes end with the
// mark, which is not part of them. The last 40 bytes read are held back until
// more arrive, so readers of the snapshot never see the mark.
func (c *session) readEOFPayload(sn *replbuf.Snapshot, mark []byte, sink PayloadSink) error {
	src := c.source()
	buf := make([]byte, 64<<10)
	held := 0 // bytes at the start of buf not yet appended: possibly the mark
	dl := deadline{conn: c.conn, timeout: c.timeout}
	for {
		now := time.Now()
		dl.touch(now)
		n, err := src.Read(buf[held:])
		if n > 0 {
			c.meter.payloadRead(n, now)
			held += n
			// The primary sends nothing after the mark before our ACK, so
			// the mark, when it comes, ends a read.
			if held >= eofMarkLen && bytes.Equal(buf[held-eofMarkLen:held], mark) {
				if err := sn.Append(buf[:held-eofMarkLen]); err != nil {
					return err
				}
				return toSink(sink, buf[:held-eofMarkLen])
			}
			if keep := min(held, eofMarkLen); held > keep {
				if err := sn.Append(buf[:held-keep]); err != nil {
					return err
				}
				if err := toSink(sink, buf[:held-keep]); err != nil {
					return err
				}
				copy(buf, buf[held-keep:held])
				held = keep
			}
		}
		if err == io.EOF {
			return fmt.Errorf("primary closed the link mid-payload after %d bytes: %w", sn.Size(), io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
	}
}

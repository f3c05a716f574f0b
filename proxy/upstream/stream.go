package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

const (
	// ackInterval is how often the proxy sends REPLCONF ACK, as a replica does.
	ackInterval = time.Second
	// ackFirstInterval is the wait before the first ACK of a link.
	ackFirstInterval = 50 * time.Millisecond
	// ackWarmup is how long after the stream starts ACKs are sent even when
	// the policy would keep them quiet (Ack.Quiet): after a diskless payload
	// the primary puts the proxy online only at an ACK (see ackLoop), before
	// any replica of the proxy can have acknowledged anything.
	ackWarmup = 5 * time.Second
)

// streamLoop reads the stream straight into the shared blocks, scans each
// read in place for command boundaries and GETACK, publishes the commands the
// scanner accepted whole, and answers GETACK with the offset before it. It
// returns when the link fails; the bytes filled and not published are left
// for endStream to drop. Main link only.
//
// Publishing up to the scanner's Applied offset, the reploff of a Redis
// replica, is what a chained Redis replica relays too: a command cut across
// reads waits for its end, a MULTI for its EXEC, and a byte the scanner
// refuses never reaches a replica, which would otherwise fail on it,
// reconnect and be sent it again.
func (c *session) streamLoop() error {
	st := c.l.host.Stream()
	src := c.source()
	var fs *flushingSource
	if c.zr == nil { // compressed, the socket's bytes are not the stream's
		fs = newFlushingSource(c.rd, c.conn, c.l.host.Published)
	}
	if fs != nil {
		src = fs
		defer fs.flush()
	}
	dl := deadline{conn: c.conn, timeout: c.timeout}
	if fs != nil {
		fs.coalesce(func() time.Duration { return c.l.set().ReadCoalesce }, &dl)
	}
	var one [1][]byte
	want := replbuf.BlockSize
	now := time.Now()
	for {
		// The deadline is renewed from the time the last read returned:
		// what ran since (scanning, publishing) is far below its refresh.
		dl.touch(now)
		// A plain socket is read with readv into as many blocks as the
		// last read filled, twice over (fillWant); any other source (TLS,
		// a compressed link) one block's room at a time.
		var ps [][]byte
		var err error
		if fs != nil {
			ps, err = st.FillBuffers(fs, want)
			want = fillWant(ps)
		} else {
			one[0], err = st.Fill(src)
			ps = one[:]
		}
		// The read's bytes arrived now, after it returned (it may have
		// waited for them): the stream dates them so (Arrived), for the
		// replicas' delays, and the link's last I/O is now: one clock read
		// per read serves both.
		now = time.Now()
		st.Arrived(now)
		// Each slice is taken as one read's bytes are: scanned, published,
		// a GETACK in it answered.
		for _, p := range ps {
			if terr := c.take(st, fs, p, now); terr != nil {
				return terr
			}
		}
		one[0] = nil
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("primary silent for longer than repl-timeout (%s): %w", c.timeout, err)
			}
			return fmt.Errorf("read stream: %w", err)
		}
	}
}

// fillWant is the room the stream loop's next read offers, given the
// slices the last one filled: twice what it took, from one block to
// replbuf.MaxFillBlocks blocks, so that a dense stream is read in a few
// calls per wake-up and a sparse one costs no more blocks than it uses.
func fillWant(ps [][]byte) int {
	n := 0
	for _, p := range ps {
		n += len(p)
	}
	return min(max(2*n, replbuf.BlockSize), replbuf.MaxFillBlocks*replbuf.BlockSize)
}

// take scans the stream bytes p, filled at now and not yet published (the
// last filled, or followed by others of the same read), publishes the
// commands the scanner accepted whole, and answers a GETACK among them.
func (c *session) take(st *replbuf.Stream, fs *flushingSource, p []byte, now time.Time) error {
	if len(p) == 0 {
		return nil
	}
	l := c.l
	l.lastIO.Store(now.UnixNano())
	l.counters.ReplInputBytes.Add(int64(len(p)))
	ev, serr := l.scanner.Feed(p)
	applied := l.scanner.Applied()
	before := st.Offset()
	if perr := st.Publish(applied); perr != nil {
		return fmt.Errorf("publish stream up to %d: %w", applied, perr)
	}
	l.applied.Store(applied)
	if applied > before {
		if fs != nil {
			fs.published(applied - before) // told before the next read waits
		} else {
			l.host.Published()
		}
	}
	if ev.GetAck {
		if werr := c.ack(ev.GetAckOffset, false); werr != nil {
			return fmt.Errorf("answer GETACK: %w", werr)
		}
	}
	// What the scanner holds back: the bytes scanned (the stream up to
	// p's end, which the scanner has taken) past what it applied.
	if held := l.scanner.Offset() - applied; serr == nil && held > 0 {
		if limit := l.set().QueryLimit; limit > 0 && held > limit {
			l.counters.QueryLimits.Add(1)
			l.log.Error("unpublished stream from primary over master-query-buffer-limit",
				"unpublished-bytes", held, "limit-bytes", limit, "repl-offset", applied)
			return fmt.Errorf("%w: %d bytes after offset %d", ErrQueryBufferLimit, held, applied)
		}
	}
	if serr != nil {
		l.counters.StreamErrors.Add(1)
		bad := int64(-1)
		if pe := (*wire.ProtocolError)(nil); errors.As(serr, &pe) {
			bad = pe.Offset
		}
		l.log.Error("malformed stream from primary", "error", serr, "error-offset", bad, "repl-offset", applied)
		return fmt.Errorf("%w: %w", ErrStreamProtocol, serr)
	}
	return nil
}

// ackLoop sends REPLCONF ACK <applied offset> once a second, as a replica
// does, until ctx ends (nil) or a write fails (that error). The offset is
// what the ack-policy allows (ack); when the host says it has risen
// (Link.AckChanged) it is sent at once, if it did.
//
// The first ACKs come sooner, at 50 ms doubling up to the second: after a
// diskless payload Redis starts the stream only at an ACK that arrives once
// it has reaped its RDB child, and the one sent right after the payload may
// come before that. A real replica's first ACK comes after loading the RDB,
// which hides this; ours would otherwise hold the stream back for a second.
func (c *session) ackLoop(ctx context.Context) error {
	c.writeMu.Lock()
	c.warmEnd = time.Now().Add(ackWarmup)
	c.writeMu.Unlock()
	wait := ackFirstInterval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := c.ack(c.l.applied.Load(), false); err != nil {
				return fmt.Errorf("send ACK: %w", err)
			}
			wait = min(2*wait, ackInterval)
			t.Reset(wait)
		case <-c.l.ackCh:
			if err := c.ack(c.l.applied.Load(), true); err != nil {
				return fmt.Errorf("send ACK: %w", err)
			}
		}
	}
}

// ack sends REPLCONF ACK for applied, the offset the link has applied, as
// the host's ack-policy allows (Host.AckOffset). An offset the policy holds
// back is raised to the highest this session acknowledged before, so the
// primary never sees it go back, and it is never above what was received
// (the policy caps it at applied, and so was every earlier one). With
// onlyIfRisen, nothing is sent unless the offset rose.
//
// When the policy says Quiet (too few replicas acknowledged lately), nothing
// is sent, so that the primary's min-replicas-max-lag sees the proxy's ACKs
// age as its replicas' do; except during the warm-up after the stream
// starts, and once per half repl-timeout as a keepalive, since a primary
// drops a replica whose last ACK is older than its repl-timeout (assumed to
// equal the proxy's).
//
// Without a policy (ack-policy received) the offset is applied itself, as
// before: a GETACK answer, the offset before the GETACK, may then be below
// a periodic ACK the ACK goroutine sent a moment earlier, which the primary
// ignores (it keeps the highest).
func (c *session) ack(applied int64, onlyIfRisen bool) error {
	a := c.l.host.AckOffset(applied)
	off := a.Off
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if a.Held {
		off = max(off, c.acked)
	}
	if onlyIfRisen && off <= c.acked {
		return nil
	}
	now := time.Now()
	if a.Held && a.Quiet && now.After(c.warmEnd) && now.Sub(c.lastAck) < c.timeout/2 {
		return nil
	}
	c.acked = max(c.acked, off)
	c.lastAck = now
	return c.sendLocked("REPLCONF", "ACK", strconv.FormatInt(off, 10))
}

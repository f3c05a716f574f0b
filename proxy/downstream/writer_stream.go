package downstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/streamlog"
)

// The write loop's stream after the payload or +CONTINUE: from the
// replica's cursor in memory (stream), and from the stream log (sendLog)
// while the replica is behind what memory holds or out of the memory
// window.

// writeSlice bounds each write of the memory stream while the stream log
// runs: a replica that stops reading is noticed within it, and moved to the
// log before its cursor pins more than the memory window and what arrives
// in one slice.
const writeSlice = 20 * time.Millisecond

// stream sends the stream from plan's cursor until an error: the
// connection, a new generation (ErrReset), or the server stopping. While the
// stream log runs, a replica further behind than the memory window
// (Host.MemoryWindow) is sent from the log instead, if the log holds its position
// (its cursor's generation and offset), until it is back within half the
// window: writes then last at most writeSlice each, and only repl-timeout
// without progress ends the replica, as one long write would. plan.Cursor is
// the cursor in use (nil while on the log), for release to close.
//
// Caught up, it parks: with a Fanout and a TCP socket (a compressed link's
// or a TLS replica's too) it lends the socket to the producer's inline
// sender (inlineSender.park) and waits to be handed it back, then sends
// what the socket did not take of a compressed chunk or of TLS records
// (sendRest); otherwise it waits on its cursor.
func (w *writer) stream(ctx context.Context, plan *history.Plan) error {
	r := w.r
	defer r.cursor.Store(nil)
	r.startStream(plan.Cursor.Offset())
	st := r.hist.Stream()
	var in *inlineSender
	tc, overTLS := w.conn.(*tls.Conn)
	switch {
	case r.fanout == nil:
	case w.z != nil:
		in = newCompressedInlineSender(r.conn, w.z, func() time.Duration { return r.set.Load().LinkCoalesce }, w.out)
	case overTLS:
		in = newTLSInlineSender(tc, w.out)
	default:
		in = newInlineSender(w.conn, w.out)
	}
	if in != nil {
		in.sent = &r.sent
		in.delays, in.st = r.count.Delays, st
	}
	if in != nil {
		r.inline.Store(in)
		r.fanout.add(in)
		defer r.fanout.remove(in) // the socket is the write loop's again by now (park)
	}
	var stalled time.Time // since when writes have made no progress
	for {
		cur := plan.Cursor
		r.cursor.Store(cur)
		live := r.host.LogLive()
		if window := r.set.Load().MemoryWindow; live && cur.Lag() > window {
			gen, off := cur.Generation(), cur.Offset()
			if rd := r.hist.LogReaderAt(gen, off); rd != nil {
				r.cursor.Store(nil)
				cur.Close() // the blocks it pinned may go now
				plan.Cursor = nil
				r.count.ToDisk.Add(1)
				r.log.Debug("replica out of the memory window: sending from the stream log", "offset", off)
				next, err := w.sendLog(ctx, rd, gen, window/2)
				if err != nil {
					return err
				}
				plan.Cursor, stalled = next, time.Time{}
				r.log.Debug("replica back in the memory window", "offset", next.Offset())
				continue
			}
		}
		// Not over TLS: a tls.Conn whose write timed out is broken for good
		// (crypto/tls), so a TLS replica's writes keep repl-timeout and it is
		// moved to the log only between writes.
		// Nor compressed: a chunk cut by a deadline cannot be resumed.
		sliced := live && !overTLS && w.z == nil
		timeout := w.timeout
		if sliced {
			timeout = min(timeout, writeSlice)
		}
		w.conn.SetWriteDeadline(time.Now().Add(timeout))
		if in != nil {
			in.enter()
		}
		from := cur.Offset()
		n, err := cur.Send(w.conn)
		if in != nil {
			in.leave()
		}
		if n > 0 {
			r.count.Delays.wrote(WriteLoop, st, cur.Generation(), from)
		}
		w.count(n)
		if err == nil {
			err = w.flushStream(ctx, cur, n)
		}
		if n > 0 {
			stalled = time.Time{}
		}
		if err != nil && sliced && isTimeout(err) {
			// A slice ran out: go round again (the window check first)
			// unless nothing has moved for repl-timeout.
			if stalled.IsZero() {
				stalled = time.Now()
			}
			if time.Since(stalled) < w.timeout {
				continue
			}
		}
		if err != nil {
			return err
		}
		if n == 0 {
			if in != nil {
				if err = in.park(ctx, w.conn, cur); err == nil {
					err = w.sendRest(in)
				}
			} else {
				err = cur.Wait(ctx)
			}
			if err != nil {
				return err
			}
		}
	}
}

// isTimeout reports whether err is a deadline expiry.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// logGapWait bounds how long a replica reading the stream log waits at its
// end for memory to hold the next byte (the follower appends within
// milliseconds); past it the log has a gap and the replica must resync.
const logGapWait = 2 * time.Second

// errLogGap ends a replica the stream log cannot take to the memory stream.
var errLogGap = errors.New("the stream log ends before the memory stream begins")

// sendLog sends the stream log from rd's offset, in verified records
// (sendfile to a plain TCP connection), until the offset is in memory
// again, within within bytes of the end (-1: anywhere), and returns a cursor
// there: a replica behind the memory backlog pins nothing while it reads
// from disk. gen is the stream generation rd's bytes are of (the log
// followed it when rd was made, and rd fails once the log resets); the
// cursor must be of the same one, or the replica has nothing to continue
// into. At the log's end it waits for the follower's next append (or the
// log's stop), never polling, up to logGapWait. A record that no longer
// matches its checksum ends the replica, whose bytes stop before it.
func (w *writer) sendLog(ctx context.Context, rd *streamlog.Reader, gen uint64, within int64) (*replbuf.Cursor, error) {
	defer rd.Close()
	r := w.r
	st := r.hist.Stream()
	r.startStream(rd.Offset())
	r.diskGen.Store(gen)
	r.diskOff.Store(rd.Offset())
	r.onDisk.Store(true)
	defer r.onDisk.Store(false)
	var gap *time.Timer // while the reader waits at the log's end
	defer func() {
		if gap != nil {
			gap.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Taken before the log is looked at: an append in between closes it.
		appended := r.host.LogAppended()
		// Memory is looked at once per call of up to a MiB: Backlog takes
		// the stream's lock.
		if within < 0 || st.Offset()+1-rd.Offset() <= within {
			if first, _ := st.Backlog(); rd.Offset() >= first {
				if cur, err := st.Attach(rd.Offset()); err == nil {
					if cur.Generation() != gen {
						cur.Close()
						return nil, history.ErrGenerationMoved
					}
					return cur, nil
				}
			}
		}
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
		from := rd.Offset()
		n, err := rd.WriteTo(w.conn, 1<<20)
		if n > 0 {
			r.count.Delays.wrote(WriteLog, st, gen, from)
		}
		w.count(n)
		if ferr := w.flush(); ferr != nil {
			return nil, fmt.Errorf("send from the stream log: %w", ferr)
		}
		r.diskOff.Store(rd.Offset())
		switch {
		case err == nil:
			if gap != nil {
				gap.Stop()
				gap = nil
			}
		case errors.Is(err, io.EOF):
			if gap == nil {
				gap = time.NewTimer(logGapWait)
			}
			select {
			case <-appended:
			case <-gap.C:
				return nil, errLogGap
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case errors.Is(err, streamlog.ErrCorrupt):
			r.host.LogCorrupt(err)
			return nil, err
		default:
			return nil, fmt.Errorf("send from the stream log: %w", err)
		}
	}
}

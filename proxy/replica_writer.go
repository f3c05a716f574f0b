package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// The writer half of a downstream replica (runReplica starts it): it sends
// the sync reply and the payload, then the stream from the replica's cursor
// with writev, until the connection or the stream ends.

// writeReplica sends a replica its +CONTINUE or +FULLRESYNC, the payload, and
// then the stream until the connection or the stream ends.
func (s *Server) writeReplica(ctx context.Context, r *replica, plan history.Plan) (err error) {
	// The cursors and the file are owned by this goroutine; r.cursor only
	// lets others read the stream cursor's figures.
	cur, rd := plan.Cursor, plan.Reader
	defer func() {
		r.cursor.Store(nil)
		if cur != nil {
			cur.Close()
		}
		if rd != nil {
			rd.Close()
		}
		if plan.File != nil {
			plan.File.Close()
		}
		if plan.FromLog != nil {
			plan.FromLog.Close() // sendLog's, when it was not reached (Close is idempotent)
		}
	}()
	timeout := s.config().ReplTimeout
	w := &replicaWriter{s: s, conn: r.c.conn, timeout: timeout}
	if plan.Partial {
		line := "+CONTINUE\r\n"
		if r.hs.capaPSync2 {
			line = "+CONTINUE " + plan.ReplID + "\r\n"
		}
		if err := w.write([]byte(line)); err != nil {
			return err
		}
		if plan.FromLog != nil {
			if cur, err = w.sendLog(ctx, r, plan.FromLog, plan.Gen, -1); err != nil {
				return err
			}
		}
		return w.stream(ctx, r, cur, plan.Gen)
	}
	file := plan.File
	sn := plan.Snapshot
	if sn == nil && file == nil {
		if err := s.awaitFetch(ctx, w, &plan); err != nil {
			return fullSyncError{err}
		}
		sn, rd, cur = plan.Snapshot, plan.Reader, plan.Cursor
	}
	if !r.legacy {
		if err := w.write([]byte("+FULLRESYNC " + plan.ReplID + " " + strconv.FormatInt(plan.Offset, 10) + "\r\n")); err != nil {
			return err
		}
	}
	r.state.Store(int32(replicaSendBulk))
	r.cursor.Store(cur) // from now on its pinned stream counts as its output buffer
	if f := plan.Fetch; f != nil && f.ToDisk() && sn == nil {
		// A fetched payload that may go to dir: sent once it has ended,
		// from the file or from memory (history.Fetch.ToDisk).
		if err := s.awaitFetched(ctx, w, f, &plan); err != nil {
			return fullSyncError{err}
		}
		sn, rd, file = plan.Snapshot, plan.Reader, plan.File
	}
	var eof bool
	var size int64
	if file != nil {
		size = plan.Spilled.Size
		err = w.sendFile(ctx, file, size)
	} else {
		size = sn.Size()
		eof, err = w.sendSnapshot(ctx, r, sn, rd)
	}
	if err != nil {
		return fullSyncError{fmt.Errorf("sending snapshot: %w", err)}
	}
	// The payload is sent: let the snapshot (or its file) go now, not when
	// the replica disconnects, so that eviction may take it.
	if rd != nil {
		rd.Close()
		rd = nil
	}
	if plan.File != nil {
		plan.File.Close()
		plan.File = nil
	}
	if r.hs.rdbOnly {
		r.close(closeSnapshotSent, nil)
		return nil
	}
	if eof {
		// After an EOF-marked payload the replica loads it and ACKs; the
		// stream must wait for that first ACK (PROTOCOL §2.1).
		if err := s.awaitFirstAck(ctx, r, timeout); err != nil {
			return err
		}
	}
	r.ackTime.Store(time.Now().UnixNano())
	r.state.Store(int32(replicaOnline))
	r.log.Info("replica online", "offset", plan.Offset, "snapshot-bytes", size, "from-disk", file != nil)
	gen := plan.Gen
	if gen == 0 { // a fetched snapshot's plan: the generation now, which its cursor is of
		gen = w.s.hist.Stream().Generation()
	}
	if plan.FromLog != nil {
		// A snapshot whose stream memory no longer holds: the stream log
		// up to memory first (planFullLocked, attachSnapshotLocked).
		if cur, err = w.sendLog(ctx, r, plan.FromLog, plan.Gen, -1); err != nil {
			return err
		}
	}
	return w.stream(ctx, r, cur, gen)
}

// errNoFirstAck ends a replica that never acknowledged its EOF-marked payload.
var errNoFirstAck = errors.New("timeout: no REPLCONF ACK after the payload for longer than repl-timeout")

// awaitFirstAck waits for the replica's first REPLCONF ACK after an
// EOF-marked payload, as long as it is not silent for longer than timeout:
// the newlines a replica sends while it loads the payload renew it, as in
// Redis (whose replicationCron applies repl-timeout to such a replica). On
// expiry the replica is dropped and counted.
func (s *Server) awaitFirstAck(ctx context.Context, r *replica, timeout time.Duration) error {
	r.ackTime.Store(time.Now().UnixNano()) // the silence starts with the payload's end
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-r.firstAck:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			idle := now.Sub(time.Unix(0, r.ackTime.Load()))
			if idle < timeout {
				t.Reset(timeout - idle)
				continue
			}
			s.stats.replicasDropped.Add(1)
			r.close(closeReplicaTimeout, errNoFirstAck)
			return errNoFirstAck
		}
	}
}

// sendFile sends a snapshot spilled to disk as "$<size>" and the file.
// (*net.TCPConn).ReadFrom sends an *os.File under a LimitReader with
// sendfile(2): the bytes go from the page cache to the socket. Chunks give
// each its own write deadline.
func (w *replicaWriter) sendFile(ctx context.Context, f *os.File, size int64) error {
	if err := w.write([]byte("$" + strconv.FormatInt(size, 10) + "\r\n")); err != nil {
		return err
	}
	for n := int64(0); n < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
		k, err := io.Copy(w.conn, io.LimitReader(f, min(spillChunk, size-n)))
		n += k
		w.s.stats.replOutputBytes.Add(k)
		if err != nil {
			return err
		}
		if k == 0 {
			return fmt.Errorf("%s ended after %d of %d bytes", f.Name(), n, size)
		}
	}
	return nil
}

// logGapWait bounds how long a replica reading the stream log waits at its
// end for memory to hold the next byte (the follower appends within
// milliseconds); past it the log has a gap and the replica must resync.
const logGapWait = 2 * time.Second

// errLogGap ends a replica the stream log cannot take to the memory stream.
var errLogGap = errors.New("the stream log ends before the memory stream begins")

// sendLog sends the stream log from rd's offset, one verified record at a
// time (sendfile to a plain TCP connection), until the offset is in memory
// again, within within bytes of the end (-1: anywhere), and returns a cursor
// there: a replica behind the memory backlog pins nothing while it reads
// from disk. A record that no longer matches its checksum ends the replica,
// whose bytes stop before it.
func (w *replicaWriter) sendLog(ctx context.Context, r *replica, rd *streamlog.Reader, gen uint64, within int64) (*replbuf.Cursor, error) {
	defer rd.Close()
	st := w.s.hist.Stream()
	r.diskOff.Store(rd.Offset())
	r.onDisk.Store(true)
	defer r.onDisk.Store(false)
	var atEnd time.Time // when the reader first found the log's end
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Look at memory every 64 records and at the log's end, not at every
		// record: Backlog takes the stream's lock.
		near := within < 0 || st.Offset()+1-rd.Offset() <= within
		if near && (i%64 == 0 || !atEnd.IsZero()) {
			if first, _ := st.Backlog(); rd.Offset() >= first {
				if cur, err := st.Attach(rd.Offset()); err == nil {
					if st.Generation() != gen {
						cur.Close()
						return nil, errGenerationMoved
					}
					return cur, nil
				}
			}
		}
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
		n, err := rd.WriteTo(w.conn, 1<<20)
		w.s.stats.replOutputBytes.Add(n)
		r.diskOff.Store(rd.Offset())
		switch {
		case err == nil:
			atEnd = time.Time{}
		case errors.Is(err, io.EOF):
			if atEnd.IsZero() {
				atEnd = time.Now()
			} else if time.Since(atEnd) > logGapWait {
				return nil, errLogGap
			}
			time.Sleep(time.Millisecond)
		case errors.Is(err, streamlog.ErrCorrupt):
			w.s.durable.lg.Error("stream log: corrupt record, not sent", "error", err)
			return nil, err
		default:
			return nil, fmt.Errorf("send from the stream log: %w", err)
		}
	}
}

// replicaWriter writes to one replica with a deadline per write.
type replicaWriter struct {
	s       *Server
	conn    net.Conn
	timeout time.Duration
}

func (w *replicaWriter) write(p []byte) error {
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.conn.Write(p)
	w.s.stats.replOutputBytes.Add(int64(n))
	return err
}

// send writes one batch of a cursor with writev.
func (w *replicaWriter) send(c *replbuf.Cursor) (int64, error) {
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := c.Send(w.conn)
	w.s.stats.replOutputBytes.Add(n)
	return n, err
}

// writeSlice bounds each write of the memory stream while the stream log
// runs: a replica that stops reading is noticed within it, and moved to the
// log before its cursor pins more than the memory window and what arrives
// in one slice.
const writeSlice = 20 * time.Millisecond

// stream sends the stream from cur until an error: the connection, a new
// generation (ErrReset), or the server stopping. While the stream log runs,
// a replica further behind than the memory window (durable.go) is sent from
// the log instead, if the log holds its offset, until it is back within half
// the window: writes then last at most writeSlice each, and only
// repl-timeout without progress ends the replica, as one long write would.
func (w *replicaWriter) stream(ctx context.Context, r *replica, cur *replbuf.Cursor, gen uint64) error {
	first := cur // the caller's, which it closes
	defer func() {
		r.cursor.Store(nil)
		if cur != first {
			cur.Close()
		}
	}()
	var stalled time.Time // since when writes have made no progress
	for {
		r.cursor.Store(cur)
		live := w.s.logLive()
		if window := w.s.memoryWindow(); live && cur.Lag() > window {
			if rd := w.s.hist.LogReaderAt(cur.Offset()); rd != nil {
				off := cur.Offset()
				r.cursor.Store(nil)
				cur.Close() // the blocks it pinned may go now
				w.s.stats.replicasToDisk.Add(1)
				r.log.Debug("replica out of the memory window: sending from the stream log", "offset", off)
				next, err := w.sendLog(ctx, r, rd, gen, window/2)
				if err != nil {
					return err
				}
				cur, stalled = next, time.Time{}
				r.log.Debug("replica back in the memory window", "offset", cur.Offset())
				continue
			}
		}
		// Not over TLS: a tls.Conn whose write timed out is broken for good
		// (crypto/tls), so a TLS replica's writes keep repl-timeout and it is
		// moved to the log only between writes.
		_, overTLS := w.conn.(*tls.Conn)
		sliced := live && !overTLS
		timeout := w.timeout
		if sliced {
			timeout = min(timeout, writeSlice)
		}
		w.conn.SetWriteDeadline(time.Now().Add(timeout))
		n, err := cur.Send(w.conn)
		w.s.stats.replOutputBytes.Add(n)
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
			if err := cur.Wait(ctx); err != nil {
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

// sendSnapshot sends the payload: "$<len>" and the bytes when the snapshot is
// complete; "$EOF:<mark>", the bytes as they arrive and the mark when it is
// still arriving and the replica takes EOF marks; otherwise it waits for the
// end, sending keepalive newlines. It reports whether the EOF form was used.
func (w *replicaWriter) sendSnapshot(ctx context.Context, r *replica, sn *replbuf.Snapshot, rd *replbuf.Cursor) (eof bool, err error) {
	if sn.State() == replbuf.SnapshotBuilding && !r.hs.capaEOF {
		t := time.NewTicker(keepaliveInterval)
		defer t.Stop()
		for sn.State() == replbuf.SnapshotBuilding {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-t.C:
				if err := w.write([]byte("\n")); err != nil {
					return false, err
				}
			}
		}
	}
	var mark string
	switch st := sn.State(); {
	case st == replbuf.SnapshotComplete:
		err = w.write([]byte("$" + strconv.FormatInt(sn.Size(), 10) + "\r\n"))
	case st == replbuf.SnapshotFailed || !r.hs.capaEOF:
		// A replica without capa eof cannot parse "$EOF:": it gets no
		// payload header at all and is dropped, to sync again.
		return false, errSnapshotFailed
	default:
		eof, mark = true, replid.New()
		err = w.write([]byte("$EOF:" + mark + "\r\n"))
	}
	if err != nil {
		return false, err
	}
	for {
		n, err := w.send(rd)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, err
		}
		if n == 0 {
			if err := rd.Wait(ctx); err != nil {
				return false, err
			}
		}
	}
	if eof {
		if err := w.write([]byte(mark)); err != nil {
			return false, err
		}
	}
	return eof, nil
}

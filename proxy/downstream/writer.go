package downstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// The write loop of a downstream replica (Replica.Run starts it): it sends
// the sync reply and the payload by the plan's sync path, then the stream
// from the replica's cursor with writev, until the connection or the
// stream ends.

// spillChunk is how much of a spilled snapshot one sendfile call may send
// under one write deadline.
const spillChunk = 4 << 20

// errSnapshotFailed ends the sync of a replica whose snapshot failed before
// its payload could start.
var errSnapshotFailed = errors.New("proxy: snapshot failed before its payload was sent")

// keepaliveInterval is how often a replica waiting for its payload gets a
// newline, as Redis sends them (only before the payload starts).
const keepaliveInterval = time.Second

// writeLoop serves plan on its sync path: the reply (+CONTINUE or
// +FULLRESYNC), the payload, and then the stream until the connection or the
// stream ends.
func (r *Replica) writeLoop(ctx context.Context, plan history.Plan) error {
	w := &writer{r: r, conn: r.conn, timeout: r.host.ReplTimeout(), out: r.count.OutputBytes}
	if r.IsProxy() {
		w.pace = newPacer(r.conn, r.host.SyncRateLimit, w.timeout, &r.throttled)
	}
	defer w.release(&plan)
	defer w.endCompression()
	return w.serve(ctx, &plan)
}

// A syncPath is one way a replica is served, chosen from its plan
// (choosePath); each has one function of writer.
type syncPath int

const (
	pathPartialMemory  syncPath = iota // +CONTINUE, then the stream from memory
	pathPartialLog                     // +CONTINUE, then the stream log up to memory
	pathFullMemory                     // +FULLRESYNC, a snapshot in memory, the stream
	pathFullFile                       // +FULLRESYNC, a snapshot file in dir (sendfile), the stream
	pathAwaitFetch                     // keepalives until the shared fetch starts, then its path
	pathFetchedPayload                 // +FULLRESYNC, keepalives until a fetched payload that may go to dir ends, then its path
)

func (p syncPath) String() string {
	switch p {
	case pathPartialMemory:
		return "partial_memory"
	case pathPartialLog:
		return "partial_log"
	case pathFullMemory:
		return "full_memory"
	case pathFullFile:
		return "full_file"
	case pathAwaitFetch:
		return "await_fetch"
	case pathFetchedPayload:
		return "fetched_payload"
	}
	return "unknown"
}

// choosePath says how plan is to be served now. A fetch's plan changes as
// the fetch goes (awaitFetch, fetchedPayload complete it), and is chosen
// again each time.
func choosePath(plan *history.Plan) syncPath {
	switch {
	case plan.Partial && plan.FromLog != nil:
		return pathPartialLog
	case plan.Partial:
		return pathPartialMemory
	case plan.File != nil:
		return pathFullFile
	case plan.Snapshot != nil:
		return pathFullMemory
	case plan.Cursor != nil || plan.FromLog != nil:
		// The fetch started and its stream is pinned, but its payload may
		// go to dir: it is sent once it has ended (history.Fetch.ToDisk).
		return pathFetchedPayload
	}
	return pathAwaitFetch
}

// serve runs plan's sync path: the one dispatch.
func (w *writer) serve(ctx context.Context, plan *history.Plan) error {
	if w.r.hs.Filtered && !plan.Partial && plan.Snapshot == nil {
		return w.filtered(ctx, plan) // then pathFullMemory
	}
	switch choosePath(plan) {
	case pathPartialMemory:
		return w.partialFromMemory(ctx, plan)
	case pathPartialLog:
		return w.partialFromLog(ctx, plan)
	case pathFullMemory:
		return w.fullFromMemory(ctx, plan)
	case pathFullFile:
		return w.fullFromFile(ctx, plan)
	case pathFetchedPayload:
		return w.fetchedPayload(ctx, plan)
	}
	return w.awaitFetch(ctx, plan)
}

// writer is the write loop's state: it writes to one replica with a
// deadline per write. Owned by the write loop.
type writer struct {
	r         *Replica
	conn      net.Conn
	timeout   time.Duration // repl-timeout when the loop started
	out       *atomic.Int64 // total_net_repl_output_bytes
	announced bool          // +FULLRESYNC sent (or not due: SYNC)
	// z compresses what conn is sent once the PSYNC reply line went out on
	// a link whose handshake agreed to it (compress); nil for a plain link.
	// Every write operation of the writer ends with flush, so that nothing
	// it sent waits in the encoder, except the stream's, which may wait up
	// to linkCoalesce for more (flushStream); coalesceUntil is when the
	// chunk being filled must go, zero while none is.
	z             *linkzstd.Writer
	coalesceUntil time.Time
	// pace, for a downstream proxy, paces its payloads (ratelimit.go):
	// between payloadStart and payloadEnd it is conn on a plain link, and
	// it is always the encoder's destination on a compressed one (z). Nil
	// for a real replica.
	pace *pacer
}

// payloadStart marks the start of a full-sync payload, its "$" header
// next: a downstream proxy's bytes are paced from here to payloadEnd.
func (w *writer) payloadStart(ctx context.Context) {
	if w.pace == nil {
		return
	}
	w.pace.begin(ctx)
	// On a compressed link the pacer is under the encoder already
	// (compress), pacing wire bytes; on a plain one it takes the socket's
	// place.
	if w.z == nil {
		w.conn = w.pace
	}
}

// payloadEnd marks the end of a payload (sent or failed): the stream after
// it is never paced, and goes to the socket itself (writev, sendfile, the
// inline sender).
func (w *writer) payloadEnd() {
	if w.pace == nil {
		return
	}
	w.pace.end()
	if w.z == nil {
		w.conn = w.pace.Conn
	}
}

// release closes what plan still holds open: the write loop owns the
// cursors, readers and file of its plan, which each path leaves in plan
// while it uses them; r.cursor only lets others read the stream cursor's
// figures.
func (w *writer) release(plan *history.Plan) {
	w.r.cursor.Store(nil)
	if plan.Cursor != nil {
		plan.Cursor.Close()
	}
	if plan.Reader != nil {
		plan.Reader.Close()
	}
	if plan.File != nil {
		plan.File.Close()
	}
	if plan.FromLog != nil {
		plan.FromLog.Close() // Close is idempotent
	}
}

// partialFromMemory: +CONTINUE, then the stream from the plan's cursor.
func (w *writer) partialFromMemory(ctx context.Context, plan *history.Plan) error {
	if err := w.sendContinue(plan); err != nil {
		return err
	}
	return w.stream(ctx, plan)
}

// partialFromLog: +CONTINUE, then the stream log from the replica's offset
// (older than memory holds) up to memory, then the stream.
func (w *writer) partialFromLog(ctx context.Context, plan *history.Plan) error {
	if err := w.sendContinue(plan); err != nil {
		return err
	}
	return w.tail(ctx, plan)
}

// sendContinue writes +CONTINUE, with the replid to a psync2 replica.
func (w *writer) sendContinue(plan *history.Plan) error {
	line := "+CONTINUE\r\n"
	if w.r.hs.CapaPSync2 {
		line = "+CONTINUE " + plan.ReplID + "\r\n"
	}
	if err := w.write([]byte(line)); err != nil {
		return err
	}
	w.compress()
	return nil
}

// fullFromMemory: +FULLRESYNC, a snapshot in memory ("$<len>", or
// "$EOF:<mark>" while it still arrives), then the stream.
func (w *writer) fullFromMemory(ctx context.Context, plan *history.Plan) error {
	if err := w.announce(plan); err != nil {
		return err
	}
	eof, err := w.sendSnapshot(ctx, plan.Snapshot, plan.Reader)
	if err != nil {
		return fullSyncError{fmt.Errorf("sending snapshot: %w", err)}
	}
	return w.online(ctx, plan, eof, plan.Snapshot.Size(), false)
}

// fullFromFile: +FULLRESYNC, a snapshot file in dir (sendfile), then the
// stream.
func (w *writer) fullFromFile(ctx context.Context, plan *history.Plan) error {
	if err := w.announce(plan); err != nil {
		return err
	}
	if err := w.sendFile(ctx, plan.File, plan.Spilled.Size); err != nil {
		return fullSyncError{fmt.Errorf("sending snapshot: %w", err)}
	}
	return w.online(ctx, plan, false, plan.Spilled.Size, true)
}

// awaitFetch waits for plan's shared fetch to start, sending keepalive
// newlines (allowed before +FULLRESYNC), then completes plan with a reader
// of the fetched snapshot (none yet for a payload that may go to dir: see
// Fetch.ToDisk) and the stream from just after its offset
// (History.AttachFetched), and serves it on the path that makes.
func (w *writer) awaitFetch(ctx context.Context, plan *history.Plan) error {
	f := plan.Fetch
	if err := w.keepaliveUntil(ctx, f.Ready()); err != nil {
		return fullSyncError{err}
	}
	if f.Err() != nil {
		return fullSyncError{fmt.Errorf("snapshot fetch: %w", f.Err())}
	}
	if err := w.r.hist.AttachFetched(f, plan); err != nil {
		return fullSyncError{err}
	}
	return w.serve(ctx, plan)
}

// fetchedPayload serves a replica of fetch f whose payload may go to dir
// (Fetch.ToDisk): +FULLRESYNC at once, then keepalive newlines until the payload
// has ended (a replica takes them between +FULLRESYNC and the payload, and
// they renew its repl-timeout, as a primary's while its BGSAVE runs). plan
// is then completed with what to send: the file in dir, or a reader of the
// snapshot when it stayed in memory (History.FetchedPayload), and served on
// that path.
func (w *writer) fetchedPayload(ctx context.Context, plan *history.Plan) error {
	if err := w.announce(plan); err != nil {
		return err
	}
	f := plan.Fetch
	if err := w.keepaliveUntil(ctx, f.Done()); err != nil {
		return fullSyncError{err}
	}
	if f.DoneErr() != nil {
		return fullSyncError{fmt.Errorf("snapshot fetch: %w", f.DoneErr())}
	}
	if err := w.r.hist.FetchedPayload(f, plan); err != nil {
		return fullSyncError{err}
	}
	return w.serve(ctx, plan)
}

// filtered serves a replica that asked for a filtered RDB (REPLCONF
// rdb-filter-only, as redis-cli --functions-rdb and --replica send): the
// proxy holds none, so the primary makes it on a side link with the same
// filter (one fork, as the replica attached to it directly costs) while the
// replica gets keepalive newlines; plan is then completed with it and, for a
// replica that is not rdb-only, the stream from just after its offset
// (History.AttachFiltered), and served from memory. Whatever the primary
// refuses, the replica is refused with the primary's own reply.
func (w *writer) filtered(ctx context.Context, plan *history.Plan) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var sn *replbuf.Snapshot
	var err error
	go func() {
		defer close(done)
		sn, err = w.r.host.FetchFiltered(fctx, w.r.hs.Filter)
	}()
	if kerr := w.keepaliveUntil(ctx, done); kerr != nil {
		cancel()
		<-done
		err = kerr
	}
	if sn != nil {
		// Not the history's: released when the replica ends (a few blocks
		// at most: FetchFiltered bounds it).
		defer sn.Release()
	}
	if err == nil {
		err = w.r.hist.AttachFiltered(sn, plan, w.r.hs.RDBOnly)
	}
	if err != nil {
		var refused Refusal
		if errors.As(err, &refused) {
			w.write([]byte(refused.PrimaryReply() + "\r\n"))
		}
		return fullSyncError{fmt.Errorf("filtered snapshot: %w", err)}
	}
	return w.serve(ctx, plan)
}

// announce writes +FULLRESYNC (not to a SYNC replica), once: the replica is
// then receiving its payload, and the stream its plan pins counts as its
// output buffer.
func (w *writer) announce(plan *history.Plan) error {
	if w.announced {
		return nil
	}
	w.announced = true
	r := w.r
	if !r.legacy {
		if err := w.write([]byte("+FULLRESYNC " + plan.ReplID + " " + strconv.FormatInt(plan.Offset, 10) + "\r\n")); err != nil {
			return err
		}
		w.compress()
	}
	r.state.Store(int32(SendBulk))
	r.cursor.Store(plan.Cursor)
	return nil
}

// online follows a sent payload: the snapshot (or its file) is let go now,
// not when the replica disconnects, so that eviction may take it; an
// rdb-only replica is done; after an EOF-marked payload the stream waits for
// the replica's first ACK (PROTOCOL §2.1). The replica is then online, and
// gets the stream.
func (w *writer) online(ctx context.Context, plan *history.Plan, eof bool, size int64, fromDisk bool) error {
	r := w.r
	if plan.Reader != nil {
		plan.Reader.Close()
		plan.Reader = nil
	}
	if plan.File != nil {
		plan.File.Close()
		plan.File = nil
	}
	if r.hs.RDBOnly {
		r.Close(CloseSnapshotSent, nil)
		return nil
	}
	if eof {
		if err := w.awaitFirstAck(ctx); err != nil {
			return err
		}
	}
	r.ackTime.Store(time.Now().UnixNano())
	r.state.Store(int32(Online))
	r.log.Info("replica online", "offset", plan.Offset, "snapshot-bytes", size, "from-disk", fromDisk)
	return w.tail(ctx, plan)
}

// tail sends the stream after the payload or +CONTINUE: first the stream
// log up to memory when plan starts where only the log holds the stream
// (History.PlanPartial, PlanFull, AttachFetched), then the stream.
func (w *writer) tail(ctx context.Context, plan *history.Plan) error {
	if rd := plan.FromLog; rd != nil {
		plan.FromLog = nil // sendLog closes it
		cur, err := w.sendLog(ctx, rd, plan.Gen, -1)
		if err != nil {
			return err
		}
		plan.Cursor = cur
	}
	return w.stream(ctx, plan)
}

// errNoFirstAck ends a replica that never acknowledged its EOF-marked payload.
var errNoFirstAck = errors.New("timeout: no REPLCONF ACK after the payload for longer than repl-timeout")

// awaitFirstAck waits for the replica's first REPLCONF ACK after an
// EOF-marked payload, as long as it is not silent for longer than
// repl-timeout: the newlines a replica sends while it loads the payload
// renew it, as in Redis (whose replicationCron applies repl-timeout to such
// a replica). On expiry the replica is dropped and counted.
func (w *writer) awaitFirstAck(ctx context.Context) error {
	r, timeout := w.r, w.timeout
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
			r.count.Dropped.Add(1)
			r.Close(CloseReplicaTimeout, errNoFirstAck)
			return errNoFirstAck
		}
	}
}

// keepaliveUntil sends a keepalive newline every keepaliveInterval until
// done is closed (nil), a write fails or ctx ends (their error).
func (w *writer) keepaliveUntil(ctx context.Context, done <-chan struct{}) error {
	t := time.NewTicker(keepaliveInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
			if err := w.write([]byte("\n")); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sendFile sends a snapshot spilled to disk as "$<size>" and the file.
// (*net.TCPConn).ReadFrom sends an *os.File under a LimitReader with
// sendfile(2): the bytes go from the page cache to the socket. Chunks give
// each its own write deadline. A downstream proxy's payload under a rate
// limit goes through its pacer's buffer instead (pacer.ReadFrom), since
// sendfile's bytes cannot be paced; unlimited, by sendfile still, the
// limit looked at again for each chunk.
func (w *writer) sendFile(ctx context.Context, f *os.File, size int64) error {
	w.payloadStart(ctx)
	defer w.payloadEnd()
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
		w.count(k)
		if err == nil {
			err = w.flush()
		}
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
		n, err := rd.WriteTo(w.conn, 1<<20)
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

func (w *writer) write(p []byte) error {
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := w.conn.Write(p)
	w.count(int64(n))
	if err != nil {
		return err
	}
	return w.flush()
}

// send writes one batch of a cursor with writev.
func (w *writer) send(c *replbuf.Cursor) (int64, error) {
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	n, err := c.Send(w.conn)
	w.count(n)
	if err == nil {
		err = w.flush()
	}
	return n, err
}

// count adds n bytes sent to the server's replication output and to the
// replica's own (Replica.Compression's figures of a plain link).
func (w *writer) count(n int64) {
	w.out.Add(n)
	w.r.sent.Add(n)
}

// compress makes everything written after the PSYNC reply line, just sent,
// go through a zstd encoder when the replica's handshake agreed to it
// (Handshake.Compression): from here to the connection's end, keepalives,
// the payload header, the payload, the EOF mark and the stream. Not for a
// SYNC replica, which has no reply line (no proxy sends SYNC).
func (w *writer) compress() {
	if w.r.hs.Compression != "zstd" || w.z != nil {
		return
	}
	// A downstream proxy's pacer sits under the encoder, so that a capped
	// payload is counted in bytes on the wire; off, it is the socket.
	var dst net.Conn = w.r.conn
	if w.pace != nil {
		dst = w.pace
	}
	w.z = linkzstd.NewWriter(dst)
	w.conn = &compressedConn{Conn: w.r.conn, z: w.z}
	w.r.zw.Store(w.z)
}

// flush ends the compressed chunk the last write operation filled and
// sends it, under that operation's write deadline; a plain link has
// nothing to flush. One chunk per operation keeps the latency what a
// plain link's is, and the ratio barely suffers: the encoder's window
// spans chunks. The stream loop's small chunks wait a little for more
// (flushStream).
func (w *writer) flush() error {
	if w.z == nil {
		return nil
	}
	return w.z.Flush()
}

// On a compressed link the stream loop ends a chunk smaller than
// linkChunkMin only once linkCoalesce passed without more to send. A live
// stream of small commands would otherwise make one chunk per publish (a
// few hundred bytes): zstd then costs about three times its CPU per byte of
// 16 KiB chunks on both ends (the codec benchmark: 25.8 against 8.1 CPU-s
// per GB compressing cache-like data on this project's 2-core machine),
// and the ratio drops (3.2 against 4.5). A link across regions has tens of
// milliseconds of round trip; 2 ms more is what it costs to halve the CPU.
const (
	linkChunkMin = 16 << 10
	linkCoalesce = 2 * time.Millisecond
)

// flushStream ends the compressed chunk the stream loop is filling once it
// holds linkChunkMin raw bytes or linkCoalesce passed since its first byte
// and cur has nothing more; until then it waits for more (returning nil
// when cur has some, for the loop to send into the same chunk). A send of
// nothing (n 0) flushes at once: the loop is about to park. A plain link
// has nothing to flush.
func (w *writer) flushStream(ctx context.Context, cur *replbuf.Cursor, n int64) error {
	if w.z == nil {
		return nil
	}
	if n > 0 && w.z.Buffered() > 0 && w.z.Buffered() < linkChunkMin {
		now := time.Now()
		if w.coalesceUntil.IsZero() {
			w.coalesceUntil = now.Add(w.r.coalesce)
		}
		if d := w.coalesceUntil.Sub(now); d > 0 {
			wctx, cancel := context.WithTimeout(ctx, d)
			err := cur.Wait(wctx)
			cancel()
			if err == nil {
				return nil // more to send into this chunk
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	w.coalesceUntil = time.Time{}
	return w.z.Flush()
}

// endCompression releases the encoder once the write loop is done with
// the connection; its figures stay readable (Replica.Compression).
func (w *writer) endCompression() {
	if w.z != nil {
		w.z.Close()
	}
}

// compressedConn is a replica's connection once its link is compressed:
// Write goes to the encoder, which writes whole chunks to the connection;
// Read, deadlines and Close are the connection's. It is neither a
// *net.TCPConn nor a syscall.Conn, so sendfile does not apply to it and it
// never joins the inline Fanout, as a TLS connection does not.
type compressedConn struct {
	net.Conn
	z *linkzstd.Writer
}

func (c *compressedConn) Write(p []byte) (int, error) { return c.z.Write(p) }

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
// Caught up, it parks: with a Fanout and a plain TCP socket it lends the
// socket to the producer's inline sender (inlineSender.park) and waits to
// be handed it back, otherwise it waits on its cursor.
func (w *writer) stream(ctx context.Context, plan *history.Plan) error {
	r := w.r
	defer r.cursor.Store(nil)
	var in *inlineSender
	if r.fanout != nil {
		in = newInlineSender(w.conn, w.out)
	}
	if in != nil {
		in.sent = &r.sent
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
		if window := r.host.MemoryWindow(); live && cur.Lag() > window {
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
		_, overTLS := w.conn.(*tls.Conn)
		sliced := live && !overTLS && w.z == nil
		timeout := w.timeout
		if sliced {
			timeout = min(timeout, writeSlice)
		}
		w.conn.SetWriteDeadline(time.Now().Add(timeout))
		if in != nil {
			in.enter()
		}
		n, err := cur.Send(w.conn)
		if in != nil {
			in.leave()
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
				err = in.park(ctx, w.conn, cur)
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

// sendSnapshot sends the payload: "$<len>" and the bytes when the snapshot is
// complete; "$EOF:<mark>", the bytes as they arrive and the mark when it is
// still arriving and the replica takes EOF marks; otherwise it waits for the
// end, sending keepalive newlines. It reports whether the EOF form was used.
func (w *writer) sendSnapshot(ctx context.Context, sn *replbuf.Snapshot, rd *replbuf.Cursor) (eof bool, err error) {
	capaEOF := w.r.hs.CapaEOF
	if sn.State() == replbuf.SnapshotBuilding && !capaEOF {
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
	w.payloadStart(ctx)
	defer w.payloadEnd()
	var mark string
	switch st := sn.State(); {
	case st == replbuf.SnapshotComplete:
		err = w.write([]byte("$" + strconv.FormatInt(sn.Size(), 10) + "\r\n"))
	case st == replbuf.SnapshotFailed || !capaEOF:
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

package downstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// The write loop of a downstream replica (Replica.Run starts it): it sends
// the sync reply and the payload by the plan's sync path, then the stream
// from the replica's cursor with writev, until the connection or the
// stream ends. This file holds the loop, its sync paths (choosePath, serve)
// and its writes; the payload is writer_payload.go's, the stream after it
// writer_stream.go's (from memory, and from the stream log for a replica
// memory does not hold), and a compressed link's encoder
// writer_compress.go's.

// keepaliveInterval is how often a replica waiting for its payload gets a
// newline, as Redis sends them (only before the payload starts).
const keepaliveInterval = time.Second

// writeLoop serves plan on its sync path: the reply (+CONTINUE or
// +FULLRESYNC), the payload, and then the stream until the connection or the
// stream ends.
func (r *Replica) writeLoop(ctx context.Context, plan history.Plan) error {
	w := &writer{r: r, conn: r.conn, timeout: r.set.Load().ReplTimeout, out: r.count.OutputBytes}
	if r.IsProxy() {
		w.pace = newPacer(r.conn, func() int64 { return r.set.Load().SyncRateLimit }, w.timeout, &r.throttled)
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
	// to repl-link-compression-coalesce-usec for more (flushStream);
	// coalesceUntil is when the chunk being filled must go, zero while
	// none is.
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
		sn, err = w.r.snaps.FetchFiltered(fctx, w.r.hs.Filter)
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
		var refused *wire.RefusedError
		if errors.As(err, &refused) {
			w.write([]byte(refused.Reply + "\r\n"))
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
		r.snaps.FullSyncEnded(true)
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

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/replid"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// replicaState is a downstream replica's state, named as INFO names it.
type replicaState int32

const (
	replicaWaitBgsave replicaState = iota // waiting for a snapshot to be fetched
	replicaSendBulk                       // receiving the snapshot
	replicaOnline                         // streaming
)

func (st replicaState) String() string {
	switch st {
	case replicaWaitBgsave:
		return "wait_bgsave"
	case replicaSendBulk:
		return "send_bulk"
	}
	return "online"
}

// spillChunk is how much of a spilled snapshot one sendfile call may send
// under one write deadline.
const spillChunk = 4 << 20

// errSnapshotFailed ends the sync of a replica whose snapshot failed before
// its payload could start.
var errSnapshotFailed = errors.New("proxy: snapshot failed before its payload was sent")

// keepaliveInterval is how often a replica waiting for its payload gets a
// newline, as Redis sends them (only before the payload starts).
const keepaliveInterval = time.Second

// replicaHandshake is what a client said with REPLCONF before PSYNC or SYNC.
// Owned by the client's goroutine.
type replicaHandshake struct {
	port       int    // listening-port
	ip         string // ip-address
	capaEOF    bool
	capaPSync2 bool
	rdbOnly    bool
}

// A replica is a client that sent PSYNC or SYNC. Its client goroutine reads
// its ACKs; its writer goroutine sends the payload and the stream. The
// monitor and INFO read the atomics.
type replica struct {
	c      *client
	hs     replicaHandshake
	legacy bool   // SYNC: no +FULLRESYNC line, no ACK timeout
	fetch  *fetch // the snapshot fetch its plan joined, if any: counted in its waiters
	epoch  uint64 // the history's epoch its plan was made in
	ip     string // for INFO: ip-address, else the peer's address
	log    hclog.Logger

	state    atomic.Int32                   // a replicaState
	ackOff   atomic.Int64                   // highest offset ACKed
	ackTime  atomic.Int64                   // unix nanos of the last ACK (or of going online)
	cursor   atomic.Pointer[replbuf.Cursor] // the stream cursor, once the writer has one
	reason   atomic.Int32                   // a closeReason: why it was closed, first cause only
	firstAck chan struct{}                  // closed at the first ACK
	ackOnce  sync.Once

	softSince time.Time // owned by the monitor: since when over the soft limit
}

func (r *replica) State() replicaState { return replicaState(r.state.Load()) }

// ack records a REPLCONF ACK.
func (r *replica) ack(off int64) {
	for {
		old := r.ackOff.Load()
		if off <= old || r.ackOff.CompareAndSwap(old, off) {
			break
		}
	}
	r.ackTime.Store(time.Now().UnixNano())
	r.ackOnce.Do(func() { close(r.firstAck) })
}

// close disconnects the replica. The first reason is kept, logged (with err,
// which may be nil) and counted; later ones are dropped.
func (r *replica) close(reason closeReason, err error) {
	if firstReason(&r.reason, reason) {
		r.c.srv.stats.replicaCloses.add(reason)
		if err != nil {
			r.log.Info("replica disconnected", "reason", reason.String(), "error", err)
		} else {
			r.log.Info("replica disconnected", "reason", reason.String())
		}
	}
	r.c.conn.Close()
}

// closed reports whether the replica was closed for a reason.
func (r *replica) closed() bool { return closeReason(r.reason.Load()) != closeNone }

func (s *Server) cmdReplconf(c *client, args [][]byte) bool {
	if len(args)%2 == 0 {
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return false
	}
	for i := 1; i < len(args); i += 2 {
		opt, val := strings.ToLower(string(args[i])), string(args[i+1])
		switch opt {
		case "listening-port":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > 65535 {
				c.out = wire.AppendError(c.out, "ERR value is not an integer or out of range")
				return false
			}
			c.hs.port = n
		case "ip-address":
			if len(val) >= 256 {
				c.out = wire.AppendError(c.out, "ERR REPLCONF ip-address provided by replica instance is too long: 256 bytes or more")
				return false
			}
			if !validReplicaIP(val) {
				// It is shown in INFO's "slaveN:ip=...,port=..." lines.
				c.out = wire.AppendError(c.out, "ERR REPLCONF ip-address cannot contain spaces, newlines, ',', '=' or special characters")
				return false
			}
			c.hs.ip = val
		case "capa":
			switch strings.ToLower(val) {
			case "eof":
				c.hs.capaEOF = true
			case "psync2":
				c.hs.capaPSync2 = true
			}
		case "ack":
			// No reply, ever; ignored unless the client is a replica.
			if r := c.asReplica.Load(); r != nil {
				if off, ok := replid.ParseOffset(val); ok {
					r.ack(off)
				}
			}
			return false
		case "getack":
			return false // we are no replica of our replicas
		case "rdb-only":
			c.hs.rdbOnly = val == "1"
		case "rdb-filter-only":
			c.out = wire.AppendError(c.out, "ERR replproxy does not filter snapshots (rdb-filter-only)")
			return false
		case "version":
		default:
			c.out = wire.AppendError(c.out, "ERR Unrecognized REPLCONF option: "+clip(opt, 64))
			return false
		}
	}
	c.out = wire.AppendSimple(c.out, "OK")
	return false
}

func (s *Server) cmdPSync(c *client, args [][]byte) bool {
	if c.replicaSet() {
		return false // already a replica: ignored without a reply, as in Redis
	}
	if len(args) == 4 {
		c.out = wire.AppendError(c.out, "ERR PSYNC FAILOVER is not supported by replproxy")
		return false
	}
	off, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil {
		c.out = wire.AppendError(c.out, "ERR value is not an integer or out of range")
		return false
	}
	s.beginSync(c, string(args[1]), off, false)
	return false
}

func (s *Server) cmdSync(c *client, _ [][]byte) bool {
	if c.replicaSet() {
		return false
	}
	s.beginSync(c, "?", -1, true)
	return false
}

// beginSync decides how a new replica is served: a partial resync from the
// backlog when its replid and offset allow (even with the upstream link
// down), else a full sync from a snapshot. It registers the replica; the
// client goroutine then runs it (runReplica).
func (s *Server) beginSync(c *client, replID string, off int64, legacy bool) {
	if err := c.flush(); err != nil {
		return
	}
	plan, ok := s.hist.planPartial(replID, off, legacy)
	if !ok {
		if s.up.State() != upstream.StateConnected {
			c.out = wire.AppendError(c.out, "NOMASTERLINK Can't SYNC while not connected with my master")
			return
		}
		var err error
		plan, err = s.planFull()
		if err != nil {
			c.out = wire.AppendError(c.out, "ERR "+err.Error())
			return
		}
		s.stats.syncFull.Add(1)
		if !legacy && replID != "?" {
			s.stats.syncPartialErr.Add(1)
		}
	} else {
		s.stats.syncPartialOK.Add(1)
	}
	r := &replica{c: c, hs: c.hs, legacy: legacy, fetch: plan.fetch, epoch: plan.epoch, firstAck: make(chan struct{})}
	r.ip = c.hs.ip
	if r.ip == "" {
		r.ip, _, _ = net.SplitHostPort(c.addr)
	}
	r.log = c.log.With("replica-port", c.hs.port)
	r.ackTime.Store(time.Now().UnixNano())
	if plan.partial {
		r.state.Store(int32(replicaOnline))
	} else {
		r.state.Store(int32(replicaWaitBgsave))
	}
	c.plan = plan
	c.asReplica.Store(r)
	s.clients.addReplica(r)
	if plan.partial {
		r.log.Info("partial resync accepted", "replid", plan.replID, "offset", off,
			"backlog-bytes", s.hist.stream().Offset()+1-off)
	} else {
		r.log.Info("full sync", "replid", plan.replID, "offset", plan.offset, "fetching", plan.fetch != nil, "asked-replid", replID)
	}
}

// planFull plans a full sync: from the newest servable snapshot, else
// from the one snapshot fetch, started on the background group if need be.
func (s *Server) planFull() (syncPlan, error) {
	return s.hist.planFull(func(f *fetch) bool {
		return s.goBackground(func(ctx context.Context) { s.runFetch(ctx, f) })
	})
}

// runReplica serves a client that became a replica: its writer goroutine
// sends, this goroutine reads ACKs, and whichever ends first ends both.
func (s *Server) runReplica(ctx context.Context, c *client) {
	r := c.asReplica.Load()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := s.writeReplica(ctx, r, c.plan)
		c.conn.Close()
		done <- err
	}()
	readErr := s.readReplica(r)
	cancel()
	c.conn.Close()
	werr := <-done
	// The registry first, then the fetch's waiters in the history: one lock
	// at a time.
	s.clients.removeReplica(r)
	s.hist.leaveFetch(r.fetch)
	switch {
	case r.closed():
	case werr != nil && !errors.Is(werr, context.Canceled) && !errors.Is(werr, net.ErrClosed):
		r.close(writeCloseReason(werr), werr)
	case readErr != nil && !errors.Is(readErr, net.ErrClosed):
		r.close(readCloseReason(readErr), readErr)
	default:
		// Neither side failed on its own: the connection was closed under
		// them, and every other closer records its reason first.
		r.close(closeServerShutdown, nil)
	}
}

// readReplica reads what a replica sends (REPLCONF ACK, newlines) until the
// connection fails. Replies to a replica are never written: its connection
// carries only the stream.
func (s *Server) readReplica(r *replica) error {
	c := r.c
	for {
		cmd, err := c.rd.ReadCommand()
		if err != nil {
			return err
		}
		if len(cmd.Args) == 0 {
			r.ackTime.Store(time.Now().UnixNano()) // a loading replica's newline
			continue
		}
		s.dispatch(c, cmd.Args)
		c.out = c.out[:0]
	}
}

// writeReplica sends a replica its +CONTINUE or +FULLRESYNC, the payload, and
// then the stream until the connection or the stream ends.
func (s *Server) writeReplica(ctx context.Context, r *replica, plan syncPlan) (err error) {
	// The cursors and the file are owned by this goroutine; r.cursor only
	// lets others read the stream cursor's figures.
	cur, rd := plan.cursor, plan.reader
	defer func() {
		r.cursor.Store(nil)
		if cur != nil {
			cur.Close()
		}
		if rd != nil {
			rd.Close()
		}
		if plan.file != nil {
			plan.file.Close()
		}
	}()
	timeout := s.config().ReplTimeout
	w := &replicaWriter{s: s, conn: r.c.conn, timeout: timeout}
	if plan.partial {
		line := "+CONTINUE\r\n"
		if r.hs.capaPSync2 {
			line = "+CONTINUE " + plan.replID + "\r\n"
		}
		if err := w.write([]byte(line)); err != nil {
			return err
		}
		return w.stream(ctx, r, cur)
	}
	file := plan.file
	sn := plan.snapshot
	if sn == nil && file == nil {
		if sn, rd, cur, err = s.awaitFetch(ctx, w, plan.fetch); err != nil {
			return fullSyncError{err}
		}
		plan.offset = sn.Offset()
	}
	if !r.legacy {
		if err := w.write([]byte("+FULLRESYNC " + plan.replID + " " + strconv.FormatInt(plan.offset, 10) + "\r\n")); err != nil {
			return err
		}
	}
	r.state.Store(int32(replicaSendBulk))
	r.cursor.Store(cur) // from now on its pinned stream counts as its output buffer
	var eof bool
	var size int64
	if file != nil {
		size = plan.spilled.size
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
	if plan.file != nil {
		plan.file.Close()
		plan.file = nil
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
	r.log.Info("replica online", "offset", plan.offset, "snapshot-bytes", size, "from-disk", file != nil)
	return w.stream(ctx, r, cur)
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

// stream sends the stream from cur until an error: the connection, a new
// generation (ErrReset), or the server stopping.
func (w *replicaWriter) stream(ctx context.Context, r *replica, cur *replbuf.Cursor) error {
	r.cursor.Store(cur)
	for {
		n, err := w.send(cur)
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

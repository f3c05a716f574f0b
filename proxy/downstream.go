package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
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
	legacy bool           // SYNC: no +FULLRESYNC line, no ACK timeout
	fetch  *history.Fetch // the snapshot fetch its plan joined, if any: counted in its waiters
	epoch  uint64         // the history's epoch its plan was made in
	ip     string         // for INFO: ip-address, else the peer's address
	log    hclog.Logger

	state   atomic.Int32                   // a replicaState
	ackOff  atomic.Int64                   // highest offset ACKed
	ackTime atomic.Int64                   // unix nanos of the last ACK (or of going online)
	cursor  atomic.Pointer[replbuf.Cursor] // the stream cursor, once the writer has one
	// With the stream log, a replica that fell out of the memory window is
	// sent from the log (replicaWriter.stream): onDisk meanwhile, and
	// diskOff its next offset there, for the monitor's limits.
	onDisk   atomic.Bool
	diskOff  atomic.Int64
	reason   atomic.Int32  // a closeReason: why it was closed, first cause only
	firstAck chan struct{} // closed at the first ACK
	ackOnce  sync.Once

	softSince time.Time // owned by the monitor: since when over the soft limit
}

func (r *replica) State() replicaState { return replicaState(r.state.Load()) }

// ack records a REPLCONF ACK, and reports whether it raised the offset.
func (r *replica) ack(off int64) (raised bool) {
	for {
		old := r.ackOff.Load()
		if off <= old {
			break
		}
		if r.ackOff.CompareAndSwap(old, off) {
			raised = true
			break
		}
	}
	r.ackTime.Store(time.Now().UnixNano())
	r.ackOnce.Do(func() { close(r.firstAck) })
	return raised
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
				if off, ok := replid.ParseOffset(val); ok && r.ack(off) {
					s.replicaAcked()
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
	plan, refused := s.hist.PlanPartial(replID, off, legacy)
	if refused != history.PartialAccepted {
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
		s.stats.fullSyncs[refused].Add(1)
		if !legacy && replID != "?" {
			s.stats.syncPartialErr.Add(1)
		}
	} else {
		s.stats.syncPartialOK.Add(1)
		if plan.FromLog != nil {
			s.stats.logPartialSyncs.Add(1)
		}
	}
	r := &replica{c: c, hs: c.hs, legacy: legacy, fetch: plan.Fetch, epoch: plan.Epoch, firstAck: make(chan struct{})}
	r.ip = c.hs.ip
	if r.ip == "" {
		r.ip, _, _ = net.SplitHostPort(c.addr)
	}
	r.log = c.log.With("replica-port", c.hs.port)
	r.ackTime.Store(time.Now().UnixNano())
	if plan.Partial {
		r.state.Store(int32(replicaOnline))
	} else {
		r.state.Store(int32(replicaWaitBgsave))
	}
	c.plan = plan
	c.asReplica.Store(r)
	s.clients.addReplica(r)
	if plan.Partial {
		r.log.Info("partial resync accepted", "replid", plan.ReplID, "offset", off,
			"backlog-bytes", s.hist.Stream().Offset()+1-off, "from-log", plan.FromLog != nil)
	} else {
		r.log.Info("full sync", "reason", refused, "replid", plan.ReplID, "offset", plan.Offset, "fetching", plan.Fetch != nil, "asked-replid", replID)
	}
}

// planFull plans a full sync: from the newest servable snapshot, else
// from the one snapshot fetch, started on the background group (after the
// history's lock is released) if the plan recorded a new one. A fetch that
// cannot start, the server stopping, is undone and the sync refused.
func (s *Server) planFull() (history.Plan, error) {
	plan, start := s.hist.PlanFull()
	if start != nil && !s.goBackground(func(ctx context.Context) { s.runFetch(ctx, start) }) {
		s.hist.FetchNotStarted(start)
		s.hist.LeaveFetch(start)
		return history.Plan{}, history.ErrShuttingDown
	}
	return plan, nil
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
	s.hist.LeaveFetch(r.fetch)
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

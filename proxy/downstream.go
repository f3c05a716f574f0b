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

// A replica is a client that sent PSYNC or SYNC. From then on it owns the
// connection: its read loop (readLoop) reads its ACKs and newlines, its
// write loop (writeLoop, replica_writer.go) sends the payload and the
// stream, and whichever ends first records the cause, closes the connection
// and so ends the other (exit, as yamux's stream). It sees the server only
// through host and hist; the monitor and INFO read the atomics.
type replica struct {
	c      *client
	host   replicaHost
	hist   *history.History
	count  replicaCounters
	hs     replicaHandshake
	legacy bool           // SYNC: no +FULLRESYNC line, no ACK timeout
	fetch  *history.Fetch // the snapshot fetch its plan joined, if any: counted in its waiters
	epoch  uint64         // the history's epoch its plan was made in
	ip     string         // for INFO: ip-address, else the peer's address
	log    hclog.Logger
	// replconf is the command table's name of REPLCONF, which CLIENT LIST
	// shows as a replica's last command; set at creation.
	replconf *string

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
	// cancel ends the write loop's context (a wait on the stream does not
	// end with the connection); owned by run, which sets it before either
	// loop starts, and called by exit.
	cancel context.CancelFunc

	softSince time.Time // owned by the monitor: since when over the soft limit
}

// A replicaHost is what a replica needs of the server beyond the history:
// the configuration in force, the stream log's state, the ack policy, the
// admin commands and the registry. *Server implements it (replica_host.go).
// Both of a replica's loops call it, at the same time.
type replicaHost interface {
	// replTimeout is repl-timeout in force.
	replTimeout() time.Duration
	// memoryWindow is how far behind the stream's end a replica may be and
	// still be sent from memory while the stream log runs.
	memoryWindow() int64
	// logLive reports whether the stream log follows the stream now.
	logLive() bool
	// logAppended returns a channel closed when the stream log next grows
	// or stops following the stream. Only with the stream log open.
	logAppended() <-chan struct{}
	// logCorrupt reports a record of the stream log that failed its check.
	logCorrupt(err error)
	// replicaAcked is told that an ACK raised a replica's offset.
	replicaAcked()
	// replicaCommand runs a command other than REPLCONF that a replica
	// sent, as the client it was; its reply is never sent.
	replicaCommand(c *client, args [][]byte)
	// replicaEnded is told once both loops of r have ended.
	replicaEnded(r *replica)
}

// replicaCounters are the server's counters a replica adds to (INFO's),
// handed over at PSYNC; each is atomic.
type replicaCounters struct {
	outputBytes *atomic.Int64 // total_net_repl_output_bytes
	closes      *closeCounts  // replicas_closed_<reason>
	dropped     *atomic.Int64 // replicas dropped by a limit or timeout
	toDisk      *atomic.Int64 // replicas moved from memory to the stream log
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
// which may be nil) and counted; later ones are dropped. Any goroutine: the
// monitor, CLIENT KILL and a change of identity close replicas so, and the
// replica's own loops through exit. Closing the connection ends both loops:
// the read loop's read fails, and so the write loop's context ends too.
func (r *replica) close(reason closeReason, err error) {
	if firstReason(&r.reason, reason) {
		r.count.closes.add(reason)
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

// exit ends the replica for the error that ended one of its loops: the
// first loop to end is the cause, recorded (reason) before the connection is
// closed, so that the other loop, ended by that close, finds a reason
// recorded and adds none. An error that is only the consequence of a close
// (net.ErrClosed, the context's end, or none) records nothing when a reason
// is already there; with none, the connection was closed under the replica
// by the server stopping, since every other closer records first.
func (r *replica) exit(reason closeReason, err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) {
		reason, err = closeServerShutdown, nil
	}
	r.close(reason, err)
	r.cancel()
}

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
			// No reply, ever; from a client that is not a replica, ignored
			// (a replica's are read by its own loop: replica.replconf).
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
	r := &replica{c: c, host: s, hist: s.hist, count: s.replicaCounters(), hs: c.hs, legacy: legacy,
		fetch: plan.Fetch, epoch: plan.Epoch, replconf: s.commands["replconf"].name, firstAck: make(chan struct{})}
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

// runReplica serves a client that became a replica, on the client's
// goroutine, until the replica ends (replica.run).
func (s *Server) runReplica(ctx context.Context, c *client) {
	c.asReplica.Load().run(ctx, c.plan)
}

// run serves the replica: its write loop on a goroutine of its own, its
// read loop on this one; whichever ends first ends both (exit), and run
// returns once both have, the host told.
func (r *replica) run(ctx context.Context, plan history.Plan) {
	ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := r.writeLoop(ctx, plan)
		r.exit(writeCloseReason(err), err)
	}()
	err := r.readLoop()
	r.exit(readCloseReason(err), err)
	<-done
	r.host.replicaEnded(r)
}

// readLoop reads what a replica sends until the connection fails: newlines
// while it loads a payload, REPLCONF ACK (replconf), and anything else,
// which the host runs as an admin command would be. Nothing is replied: the
// connection carries only the stream.
func (r *replica) readLoop() error {
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
		if !strings.EqualFold(string(cmd.Args[0]), "replconf") {
			r.host.replicaCommand(c, cmd.Args)
			continue
		}
		c.lastCmd.Store(r.replconf)
		if off, ok := replconfAck(cmd.Args); ok && r.ack(off) {
			r.host.replicaAcked()
		}
	}
}

// replconfAck returns the offset of a REPLCONF ACK among args (REPLCONF and
// its option pairs), read as cmdReplconf reads options: in order, up to the
// first that ends the command (ACK, GETACK, or one refused), so that what
// counts as an ACK is what it was when ACKs went through the command table.
func replconfAck(args [][]byte) (off int64, ok bool) {
	if len(args)%2 == 0 {
		return 0, false
	}
	for i := 1; i < len(args); i += 2 {
		val := string(args[i+1])
		switch strings.ToLower(string(args[i])) {
		case "ack":
			return replid.ParseOffset(val)
		case "listening-port":
			if n, err := strconv.Atoi(val); err != nil || n < 0 || n > 65535 {
				return 0, false
			}
		case "ip-address":
			if len(val) >= 256 || !validReplicaIP(val) {
				return 0, false
			}
		case "capa", "rdb-only", "version":
		default: // getack, rdb-filter-only, unknown options
			return 0, false
		}
	}
	return 0, false
}

package downstream

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// State is a downstream replica's state, named as INFO names it.
type State int32

const (
	WaitBgsave State = iota // waiting for a snapshot to be fetched
	SendBulk                // receiving the snapshot
	Online                  // streaming
)

func (st State) String() string {
	switch st {
	case WaitBgsave:
		return "wait_bgsave"
	case SendBulk:
		return "send_bulk"
	}
	return "online"
}

// A Host is what a replica needs of the server beyond the history, the
// snapshot work and the settings in force: the stream log's state, and the
// client it was.
// The proxy implements it, one value per replica. Both of a replica's loops
// call it, at the same time.
type Host interface {
	// LogLive reports whether the stream log follows the stream now.
	LogLive() bool
	// LogAppended returns a channel closed when the stream log next grows
	// or stops following the stream (a LogSignal's Wait). Only with the
	// stream log open.
	LogAppended() <-chan struct{}
	// LogCorrupt reports a record of the stream log that failed its check.
	LogCorrupt(err error)
	// Acked is told that an ACK raised the replica's offset.
	Acked()
	// Replconf is told that the replica sent REPLCONF (CLIENT LIST's last
	// command).
	Replconf()
	// Command runs a command other than REPLCONF that the replica sent, as
	// the client it was; its reply is never sent.
	Command(args [][]byte)
	// Ended is told once both loops of r have ended, before r leaves its
	// fetch's waiters.
	Ended(r *Replica)
}

// Counters are the server's counters a replica adds to (INFO's), handed
// over at PSYNC; each is atomic.
type Counters struct {
	OutputBytes *atomic.Int64 // total_net_repl_output_bytes
	Closes      *CloseCounts  // replicas_closed_<reason>
	Dropped     *atomic.Int64 // replicas dropped by a limit or timeout
	ToDisk      *atomic.Int64 // replicas moved from memory to the stream log
	Delays      *WriteDelays  // time from a byte's arrival to its write, by path (delay.go); nil: not observed
	Syncs       SyncCounters  // the syncs Accept plans
}

// Config is what a client hands over when PSYNC or SYNC makes it a replica.
type Config struct {
	ID        int64               // the client's id (CLIENT LIST, the order INFO lists replicas in)
	Conn      net.Conn            // the client's connection: the replica's from now on
	Reader    *wire.CommandReader // the client's command reader, with what it buffered after PSYNC
	Addr      string              // the peer's address, for INFO when the handshake named no ip-address
	Handshake Handshake
	Legacy    bool         // SYNC: no +FULLRESYNC line, no ACK timeout
	Plan      history.Plan // how it is to be served; Run hands it to the write loop
	Hist      *history.History
	Host      Host
	Snapshots Snapshots     // the snapshot work: plans, fetches, how full syncs end
	Settings  *LiveSettings // the directives in force
	Link      PrimaryLink   // the upstream link, asked by Accept whether it is up
	Counters  Counters
	Log       hclog.Logger // the replica's: the client's, naming its address (ip:listening-port)
	// Fanout, when not nil, is the set of replicas the stream's producer
	// sends to inline, which this one joins while it streams from memory
	// over plain TCP (inline.go). Nil: its write loop sends everything.
	Fanout *Fanout
}

// A Replica is a client that sent PSYNC or SYNC. From then on it owns the
// connection: its read loop (readLoop) reads its ACKs and newlines, its
// write loop (writeLoop, writer.go) sends the payload and the stream, and
// whichever ends first records the cause, closes the connection and so ends
// the other (exit, as yamux's stream). It sees the server only through host
// and hist; the monitor, INFO and the registry read its atomics through its
// methods.
type Replica struct {
	id     int64
	conn   net.Conn
	rd     *wire.CommandReader // owned by the read loop
	host   Host
	snaps  Snapshots
	set    *LiveSettings
	hist   *history.History
	count  Counters
	hs     Handshake
	legacy bool           // SYNC: no +FULLRESYNC line, no ACK timeout
	fetch  *history.Fetch // the snapshot fetch its plan joined, if any: counted in its waiters
	epoch  uint64         // the history's epoch its plan was made in
	ip     string         // for INFO: ip-address, else the peer's address
	log    hclog.Logger
	plan   history.Plan // set by New, handed by Run to the write loop, which owns it
	fanout *Fanout      // nil: no inline sending

	inline atomic.Pointer[inlineSender] // set by the write loop once it streams with inline sending
	// zw is the link's encoder once its link is compressed (writer.compress),
	// for Compression's figures; sent is every byte the write loop and the
	// inline sender sent, before compression. Both written by whoever holds
	// the socket, read by INFO and the metrics.
	zw      atomic.Pointer[linkzstd.Writer]
	sent    atomic.Int64
	started time.Time // when the replica was made (its link's age); read-only

	state   atomic.Int32                   // a State
	ackOff  atomic.Int64                   // highest offset ACKed
	ackTime atomic.Int64                   // unix nanos of the last ACK (or of going online)
	cursor  atomic.Pointer[replbuf.Cursor] // the stream cursor, once the writer has one
	// With the stream log, a replica that fell out of the memory window is
	// sent from the log (writer.stream): onDisk meanwhile, and diskOff its
	// next offset there, for the monitor's limits.
	onDisk  atomic.Bool
	diskOff atomic.Int64
	diskGen atomic.Uint64 // the stream generation of diskOff, stored before onDisk
	// streamFrom is the offset of the first stream byte this connection
	// is sent (after its payload or +CONTINUE), 0 until the write loop
	// starts the stream: Delay's unacked bytes begin there until an ACK
	// says more.
	streamFrom atomic.Int64
	reason     atomic.Int32  // a CloseReason: why it was closed, first cause only
	firstAck   chan struct{} // closed at the first ACK
	fullSync   bool          // the replica asked for (or needed) a full sync; set by New
	ackOnce    sync.Once
	// cancel ends the write loop's context (a wait on the stream does not
	// end with the connection); owned by Run, which sets it before either
	// loop starts, and called by exit.
	cancel context.CancelFunc

	// throttled is the time the write loop's pacer slept in payloads, in
	// nanoseconds (INFO's throttled_ms); written by the write loop alone.
	throttled atomic.Int64

	softSince time.Time // owned by the monitor (OverLimit): since when over the soft limit
}

// New makes the replica cfg describes: online at once for a partial
// resync, else waiting for its snapshot. It starts nothing: Run serves it.
func New(cfg Config) *Replica {
	r := &Replica{id: cfg.ID, conn: cfg.Conn, rd: cfg.Reader, host: cfg.Host, snaps: cfg.Snapshots, set: cfg.Settings, hist: cfg.Hist, count: cfg.Counters,
		hs: cfg.Handshake, legacy: cfg.Legacy, fetch: cfg.Plan.Fetch, epoch: cfg.Plan.Epoch, plan: cfg.Plan,
		fanout: cfg.Fanout, ip: cfg.Handshake.IP, firstAck: make(chan struct{})}
	if r.ip == "" {
		r.ip, _, _ = net.SplitHostPort(cfg.Addr)
	}
	if r.log = cfg.Log; r.log == nil {
		r.log = hclog.NewNullLogger()
	}
	r.started = time.Now()
	r.ackTime.Store(r.started.UnixNano())
	if cfg.Plan.Partial {
		r.state.Store(int32(Online))
	} else {
		r.state.Store(int32(WaitBgsave))
	}
	r.fullSync = !cfg.Plan.Partial
	return r
}

// ID is the id of the client the replica was.
func (r *Replica) ID() int64 { return r.id }

// IP is the replica's address for INFO: its ip-address, else the peer's.
func (r *Replica) IP() string { return r.ip }

// Port is its listening-port.
func (r *Replica) Port() int { return r.hs.Port }

// IsProxy reports whether the replica is a downstream proxy (it sent capa
// replproxy): traffic control and INFO's Links section single those out.
func (r *Replica) IsProxy() bool { return r.hs.CapaReplproxy }

// LinkStatus is a replica link's compression at one moment.
type LinkStatus struct {
	Mode string // "zstd" when its handshake agreed to it, else "no"
	// Stats: the bytes given to the link (Raw), those on the wire (Wire),
	// and the encoder's CPU time; a plain link's Raw and Wire are the bytes
	// it was sent, and CPU zero.
	Stats linkzstd.Stats
	// Since is when the replica connected: its figures are since then.
	Since time.Time
}

// Compression returns the link's compression figures; any goroutine.
func (r *Replica) Compression() LinkStatus {
	st := LinkStatus{Mode: "no", Since: r.started}
	if r.hs.Compression == "zstd" {
		st.Mode = "zstd"
	}
	if z := r.zw.Load(); z != nil {
		st.Stats = z.Stats()
	} else if st.Mode == "no" {
		n := r.sent.Load()
		st.Stats = linkzstd.Stats{Raw: n, Wire: n}
	}
	return st
}

// LinkMemory is what its link's encoder holds (linkzstd.Writer.Memory):
// linkzstd.WriterMemory from the PSYNC reply of a compressed link until
// the write loop releases it, 0 for a plain link. Any goroutine.
func (r *Replica) LinkMemory() int64 {
	if z := r.zw.Load(); z != nil {
		return z.Memory()
	}
	return 0
}

// Throttled is the time its full-sync payloads were held back by
// repl-link-sync-rate-limit, in all (0 for a replica that is no proxy).
func (r *Replica) Throttled() time.Duration { return time.Duration(r.throttled.Load()) }

// Legacy reports whether it came by SYNC: it sends no ACKs.
func (r *Replica) Legacy() bool { return r.legacy }

// Epoch is the history's epoch its plan was made in: a change of identity
// disconnects the replicas of older epochs.
func (r *Replica) Epoch() uint64 { return r.epoch }

// State is where its sync is.
func (r *Replica) State() State { return State(r.state.Load()) }

// AckOffset is the highest offset it acknowledged.
func (r *Replica) AckOffset() int64 { return r.ackOff.Load() }

// SyncCompleted reports whether the replica's sync completed: a partial
// resync at once; a full sync once the replica acknowledged an offset after
// its payload (a Redis replica sends its first REPLCONF ACK once it has
// loaded it: being sent the payload is not loading it); an rdb-only
// replica's once it was sent its snapshot.
func (r *Replica) SyncCompleted() bool {
	switch {
	case !r.fullSync:
		return true
	case r.hs.RDBOnly:
		return r.Reason() == CloseSnapshotSent
	}
	return r.Acked()
}

// Acked reports whether it has acknowledged an offset on this connection:
// until then AckOffset is 0, not where the replica is, so that a lag
// computed from it would be the whole stream.
func (r *Replica) Acked() bool {
	select {
	case <-r.firstAck:
		return true
	default:
		return false
	}
}

// AckTime is when it last acknowledged (or went online, or sent a newline
// while loading its payload), in unix nanoseconds.
func (r *Replica) AckTime() int64 { return r.ackTime.Load() }

// Cursor is the stream cursor its writer sends from, or nil (syncing, or
// reading the stream log). The writer owns it: callers only read its
// figures (Offset, Lag, OutputBufferSize), which are safe from any
// goroutine.
func (r *Replica) Cursor() *replbuf.Cursor { return r.cursor.Load() }

// Reason is why it was closed: CloseNone while open.
func (r *Replica) Reason() CloseReason { return CloseReason(r.reason.Load()) }

// AckedIn returns its ACK (the offset, and when in unix nanoseconds) for
// ack-policy replicas, and whether it counts there: only an online replica
// that sends ACKs (not rdb-only), still open, and planned in epoch, since a
// replica of another epoch acknowledges other offsets.
func (r *Replica) AckedIn(epoch uint64) (off, at int64, ok bool) {
	if r.epoch != epoch || r.hs.RDBOnly || r.State() != Online || r.Closed() {
		return 0, 0, false
	}
	return r.ackOff.Load(), r.ackTime.Load(), true
}

// ack records a REPLCONF ACK, and reports whether it raised the offset.
func (r *Replica) ack(off int64) (raised bool) {
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
	r.ackOnce.Do(func() {
		close(r.firstAck)
		if r.fullSync && !r.hs.RDBOnly {
			r.snaps.FullSyncEnded(true)
		}
	})
	return raised
}

// Close disconnects the replica. The first reason is kept, logged (with
// err, which may be nil) and counted; later ones are dropped. Any
// goroutine: the monitor, CLIENT KILL and a change of identity close
// replicas so, and the replica's own loops through exit. Closing the
// connection ends both loops: the read loop's read fails, and so the write
// loop's context ends too.
func (r *Replica) Close(reason CloseReason, err error) {
	if FirstReason(&r.reason, reason) {
		r.count.Closes.Add(reason)
		if err != nil {
			r.log.Info("replica disconnected", "reason", reason.String(), "error", err)
		} else {
			r.log.Info("replica disconnected", "reason", reason.String())
		}
	}
	r.conn.Close()
}

// Closed reports whether the replica was closed for a reason.
func (r *Replica) Closed() bool { return r.Reason() != CloseNone }

// exit ends the replica for the error that ended one of its loops: the
// first loop to end is the cause, recorded (reason) before the connection is
// closed, so that the other loop, ended by that close, finds a reason
// recorded and adds none. An error that is only the consequence of a close
// (net.ErrClosed, the context's end, or none) records nothing when a reason
// is already there; with none, the connection was closed under the replica
// by the server stopping, since every other closer records first.
func (r *Replica) exit(reason CloseReason, err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, net.ErrClosed) {
		reason, err = CloseServerShutdown, nil
	}
	r.Close(reason, err)
	r.cancel()
}

// Run serves the replica, on the goroutine of the client it was: its write
// loop on a goroutine of its own, its read loop on this one; whichever ends
// first ends both (exit). It returns once both have, the host told and the
// plan's fetch left.
func (r *Replica) Run(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()
	plan := r.plan
	r.plan = history.Plan{} // the write loop's now
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := r.writeLoop(ctx, plan)
		r.exit(writeCloseReason(err), err)
	}()
	err := r.readLoop()
	r.exit(ReadCloseReason(err), err)
	<-done
	// A full sync that failed holds back the next snapshot fetch, so that
	// replicas failing their full syncs over and over do not cost a fork
	// each time a new snapshot is needed. One lock at a time: the
	// snapshot work's, the host's registry, then the history.
	if !r.SyncCompleted() && fullSyncFailure(r.Reason()) {
		r.snaps.FullSyncEnded(false)
	}
	r.host.Ended(r)
	r.hist.LeaveFetch(r.fetch)
}

// fullSyncFailure reports whether a replica closed during its full sync for
// reason failed it: not the server's own doing (a kill, a shutdown, a new
// replid or stream generation), which asks for a new sync and is no sign of
// trouble.
func fullSyncFailure(reason CloseReason) bool {
	switch reason {
	case CloseKilled, CloseServerShutdown, CloseReplIDChanged, CloseGenerationChanged, CloseSnapshotSent:
		return false
	}
	return true
}

// readLoop reads what a replica sends until the connection fails: newlines
// while it loads a payload, REPLCONF ACK (replconfAck), and anything else,
// which the host runs as an admin command would be. Nothing is replied: the
// connection carries only the stream.
func (r *Replica) readLoop() error {
	for {
		cmd, err := r.rd.ReadCommand()
		if err != nil {
			return err
		}
		if len(cmd.Args) == 0 {
			r.ackTime.Store(time.Now().UnixNano()) // a loading replica's newline
			continue
		}
		if wire.Lower(string(cmd.Args[0])) != "replconf" {
			r.host.Command(cmd.Args)
			continue
		}
		r.host.Replconf()
		if off, ok := replconfAck(cmd.Args); ok && r.ack(off) {
			r.host.Acked()
		}
	}
}

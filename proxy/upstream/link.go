// Package upstream is replproxy's link to its primary: the proxy in the
// replica role. A Link keeps one connection to the primary named by
// replicaof (the main link), syncs from it, and produces the stream the
// proxy's replicas read; it also opens side links that fetch one snapshot
// (REPLCONF rdb-only) for replicas needing a full sync; the snapshot work
// (package snapshots) retries a fetch by the main link's backoff rule
// (NextBackoff).
//
// # What it needs
//
// The link knows the rest of the proxy only through two interfaces it
// declares and the Settings it is given (Configure: the primary to follow
// and its credentials, the port to announce, the directives it reads as it
// goes). Host: the history (the stream it produces into, the identity a
// PSYNC continues from, a new generation after a full sync, a new replid
// after a partial one). Snapshots: the snapshot work (package snapshots'
// Keeper, handed over by DeliverTo), which a full sync's payload goes to
// while it arrives and which runs a seed from the snapshot source. Counters
// are atomics the proxy owns and the link only adds to.
//
// # Files and goroutines
//
//   - run.go: Run, the main link's loop (connect, sync, stream, reconnect
//     with backoff), one session per connection, and FetchSnapshot, a side
//     link's one session.
//   - handshake.go: dial, then PING, AUTH, REPLCONF and PSYNC, shared by the
//     main and the side links, and the parsers of the primary's replies.
//     REPLCONF capa always says replproxy (Redis ignores it: an upstream
//     replproxy learns its replica is a proxy), and under
//     repl-link-compression zstd (Target.Compress) one more REPLCONF asks
//     for link-compression zstd: on +OK everything after the PSYNC reply
//     line is read through a linkzstd.Reader (decompress), so that the
//     payload readers and the stream loop read raw bytes as on a plain
//     link, and ACKs still go plain; on a refusal the link stays plain and
//     the refusal is logged once per primary and reply
//     (compressionRefused). A chunk that fails its check ends the link
//     (LinkCorrupt), none of its bytes used, and it resyncs.
//   - seed.go: the main link's sync from the snapshot source
//     (snapshot-from, Snapshots.Seed): the primary's INFO replication read
//     before PSYNC (which positions it continues), and a PSYNC at the
//     source's position while its snapshot still arrives over a side link.
//     A side link to a source is checked the same way before it is asked.
//   - payload.go: the RDB payload of a sync, read into a new snapshot.
//   - stream.go: the stream loop and the ACK loop, and what they
//     acknowledge (Host.AckOffset: the ack-policy).
//
// Run's goroutine owns the main link's connection, its scanner and the
// stream's producer side; a session's ACK goroutine only writes ACKs, under
// the session's write lock. A side link is owned by the goroutine that
// called FetchSnapshot. The link takes no lock of the proxy's: it calls Host
// and Snapshots with none of its own held, and their methods take what they
// need. The compression figures' mutex (Link.figures) is a leaf, held only
// to read or add figures and to note a refusal, never across I/O or a call
// out; the log line of a refusal is written after it is released.
package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// Host is what the link needs from the rest of the proxy. Its methods are
// called from the link's goroutines, with no lock of the link's held.
type Host interface {
	// Stream is the stream the main link produces into: it is its one
	// producer.
	Stream() *replbuf.Stream
	// ResumeID returns the replid a PSYNC may continue from, and false when
	// the history holds nothing to continue (before the first sync).
	ResumeID() (replID string, ok bool)
	// Install makes sn, the payload of a full sync, the newest snapshot and
	// starts a new generation of the stream at its offset; the replicas of
	// the generation it replaces are disconnected.
	Install(sn *replbuf.Snapshot)
	// ContinueAs takes the replid of a +CONTINUE: a new one ("" is none)
	// moves the old one to replid2 as of the stream's end.
	ContinueAs(newID string) (oldID string, secondOffset int64, changed bool)
	// AckOffset returns what to acknowledge to the primary (REPLCONF ACK,
	// and the answer to GETACK) when the link has applied applied.
	AckOffset(applied int64) Ack

	// Published is told, on the link's goroutine, that publishes made new
	// stream bytes visible, so that the host may send them to replicas from
	// this goroutine; it must never block. On a plain TCP link it is told
	// when the primary's socket has nothing more to read (before the link
	// waits) or flushBudget bytes are held (flushingSource), elsewhere after
	// every publish.
	Published()
}

// Snapshots is the snapshot work as the main link's syncs use it: where a
// full sync's payload goes while it arrives, and the seed from the
// snapshot source. Package snapshots' Keeper is one, handed to the link
// before Run (DeliverTo). Its methods are called on the link's goroutine,
// with no lock of the link's held.
type Snapshots interface {
	// PayloadStarted is told of the payload of a main link's full sync once
	// its header arrived (size -1: EOF-marked, size unknown), before its
	// first byte, so that sn's memory is counted while it arrives. It
	// returns where the payload is also written as it arrives (nil: memory
	// only), or an error that refuses the payload before any of it is read
	// (the sync fails; the link retries with backoff).
	PayloadStarted(sn *replbuf.Snapshot, size int64) (PayloadSink, error)
	// PayloadFailed is told that the payload PayloadStarted accepted
	// failed; the link releases sn afterwards. A payload that succeeds is
	// given to Host.Install instead.
	PayloadFailed(sn *replbuf.Snapshot)
	// Seed starts a snapshot from the snapshot source for a main link the
	// primary cannot continue, and returns once the source's +FULLRESYNC
	// named its position (see Seed), the payload still to come; the main
	// link then begins or aborts it. check, when not nil, is the primary's
	// rule for a position it continues: the source is asked where it
	// stands first, and not asked for a snapshot (a fork) from a position
	// check refuses. When the source fails first, err says why (counted
	// and logged by the snapshot work) and fallback whether to ask the
	// primary for a full sync instead (snapshot-from-fallback). A nil seed
	// and no error: no source is configured.
	Seed(ctx context.Context, check func(replID string, offset int64) error) (seed Seed, fallback bool, err error)
}

// A PayloadSink receives a sync payload as it arrives (the snapshot work's
// file): a main link's full sync, or a snapshot fetched over a side link.
// Write is called with every payload byte, in order, from the link's
// goroutine; p is valid only during the call. Then exactly one of
// Commit (the payload arrived whole and its CRC64 checked: invariant 7) and
// Abort (it failed, or Write or Commit did) is called. An error from Write
// or Commit fails the sync.
type PayloadSink interface {
	Write(p []byte) error
	Commit() error
	Abort()
}

// Ack is what a host's ack-policy lets the main link acknowledge.
type Ack struct {
	// Off is the offset to acknowledge. Held false: applied itself, what
	// any replica acknowledges (ack-policy received). Held true: the offset
	// the policy allows, never more than applied, -1 for nothing (ack-policy
	// replicas); the session then never lets what it acknowledges go back,
	// and also sends it when the host calls [Link.AckChanged].
	Off  int64
	Held bool
	// Quiet, with Held, says that fewer replicas than the policy needs have
	// acknowledged lately. The session then sends no ACK at all, beyond a
	// keepalive (session.ack): a primary judges min-replicas-to-write by
	// the age of a replica's last ACK, not its offset, so the proxy's ACKs
	// must stop when its replicas' do.
	Quiet bool
}

// Target is the primary to connect to, as the configuration names it.
type Target struct {
	Addr       string // host:port; "" when replicaof names no primary
	User, Pass string // masteruser and masterauth; Pass "" sends no AUTH
	Timeout    time.Duration
	// TLS, when not nil, is the client config to dial the primary with
	// (tls-replication); the handshake is part of the dial, within Timeout.
	TLS *tls.Config
	// BindSource is bind-source-addr: the local IP address or host name
	// every dial for this Target is made from, the snapshot source's
	// included (fetch copies the Target), resolved at each dial so that a
	// name follows its DNS. "" lets the kernel choose.
	BindSource string
	// Compress is repl-link-compression zstd: the handshake asks the
	// primary (REPLCONF link-compression zstd) to compress what it sends
	// after the PSYNC reply line; a refusal leaves the link plain.
	Compress bool
	// Source says the side link asks a snapshot source (snapshot-from),
	// not the primary: its handshake adds capa replproxy-source, which a
	// peer replproxy answers with any snapshot it would serve a replica
	// (Redis ignores it). Never set in the Target of Settings.
	Source bool
}

// Counters are the proxy's counters the link adds to. Every one is an atomic
// the proxy owns (and may reset); none may be nil.
type Counters struct {
	Connects       *atomic.Int64 // connections made to the primary
	FullSyncs      *atomic.Int64 // +FULLRESYNC received and completed
	PartialSyncs   *atomic.Int64 // +CONTINUE received
	LinkFailures   *atomic.Int64 // link attempts or links that ended with an error
	RDBBytes       *atomic.Int64 // payload bytes received by the main link
	ChecksumFails  *atomic.Int64 // snapshots whose CRC64 did not match
	RDBCheckFails  *atomic.Int64 // snapshots the RDB check refused (those of ChecksumFails included)
	StreamErrors   *atomic.Int64 // links dropped for stream bytes the scanner refused
	QueryLimits    *atomic.Int64 // links dropped for unpublished bytes past Host.QueryLimit
	ReplInputBytes *atomic.Int64 // every byte from the primary, main and side links
	FetchBytes     *atomic.Int64 // payload bytes received by side links
	LinkCorrupt    *atomic.Int64 // links, main or side, ended by corrupt compressed input
}

// Options are what New needs besides the Host.
type Options struct {
	Pool     *replbuf.Pool // holds the snapshots the link receives
	Counters Counters
	Log      hclog.Logger
}

// State is the main link's state, named as ROLE names a replica's.
type State int32

const (
	StateNone       State = iota // no replicaof configured
	StateConnect                 // waiting to connect (backoff)
	StateConnecting              // dialling
	StateHandshake               // PING, AUTH, REPLCONF, PSYNC
	StateSync                    // receiving the RDB of a full sync
	StateConnected               // streaming
)

func (st State) String() string {
	switch st {
	case StateNone:
		return "none"
	case StateConnect:
		return "connect"
	case StateConnecting:
		return "connecting"
	case StateHandshake:
		return "handshake"
	case StateSync:
		return "sync"
	case StateConnected:
		return "connected"
	}
	return "unknown"
}

// ErrTryLater is the primary's -NOMASTERLINK or -LOADING answer to PSYNC.
var ErrTryLater = errors.New("primary cannot serve a sync right now")

// ErrStreamProtocol ends a link whose stream the scanner refused. Nothing
// from the refused command on was published, so the stream stays resumable
// from the last whole command; the link is retried with backoff, since the
// primary is likely to send the same bytes again.
var ErrStreamProtocol = errors.New("malformed replication stream from the primary")

// ErrQueryBufferLimit ends a link that held more unpublished stream bytes
// than Settings.QueryLimit allows: a command, or a MULTI, longer than the limit.
// The bytes are dropped, none was published, and the link is retried with
// backoff from the last whole command, as after ErrStreamProtocol.
var ErrQueryBufferLimit = errors.New("unpublished stream from the primary over master-query-buffer-limit")

// A Link is the link to the primary. Its run goroutine owns the main link's
// connection, the scanner and the stream's producer side. The atomics are
// read by INFO and ROLE (Status).
type Link struct {
	host Host
	// snaps is where the main link's syncs deliver their snapshots: set
	// before Run (DeliverTo), read by the run goroutine.
	snaps    Snapshots
	pool     *replbuf.Pool
	counters Counters
	log      hclog.Logger
	// settings are the directives in force (Configure); any goroutine
	// stores, the link's goroutines load.
	settings atomic.Pointer[Settings]

	state     atomic.Int32 // a State
	lastIO    atomic.Int64 // unix nanos of the last byte from the primary
	downSince atomic.Int64 // unix nanos the link went down; 0 if it was never up
	applied   atomic.Int64 // offset of the last complete command outside MULTI
	syncTotal atomic.Int64 // RDB size during a full sync (-1 when unknown: EOF mark)
	syncRead  atomic.Int64 // RDB bytes received so far

	mode atomic.Int32 // the main link's compression (a LinkMode): set by its handshake

	// The compressed links' figures: the main link's sessions that ended
	// (mainDone) plus the one in progress (mainZR, nil when plain), and the
	// side links' (fetched). Its mutex makes a session's move from mainZR to
	// mainDone one step for Compression's readers; a leaf, held only to read
	// or add figures.
	figures struct {
		sync.Mutex
		mainZR    *linkzstd.Reader
		mainSince time.Time // when mainZR's session began
		mainDone  linkzstd.Stats
		fetched   linkzstd.Stats
		refusals  map[string]bool // primary + reply pairs logged once (compressionRefused)
	}

	retargetCh chan struct{} // capacity 1: replicaof or its credentials changed
	lostCh     chan struct{} // capacity 1: an attempt failed or a link went down (Lost)
	ackCh      chan struct{} // capacity 1: what the host would acknowledge may have risen

	// Owned by the run goroutine (or by Serve's caller).
	scanner *wire.StreamScanner
	// resumable says the stream holds the primary's bytes in a state a PSYNC
	// can continue (false before the first sync and during a full one). A
	// scanner error leaves it true: only whole commands were published.
	resumable bool
}

// New returns a link that serves host once Run is called; DeliverTo names
// where its syncs' snapshots go before then.
func New(host Host, opts Options) *Link {
	log := opts.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	l := &Link{host: host, pool: opts.Pool, counters: opts.Counters, log: log,
		retargetCh: make(chan struct{}, 1), lostCh: make(chan struct{}, 1), ackCh: make(chan struct{}, 1), scanner: wire.NewStreamScanner(0)}
	l.syncTotal.Store(-1)
	l.settings.Store(&Settings{})
	return l
}

// DeliverTo says, before Run, where the main link's syncs deliver their
// snapshots: a full sync's payload while it arrives, and the seed from the
// snapshot source. The snapshot work takes the link as its Source in turn,
// so that one of the two is handed the other after both are made.
func (l *Link) DeliverTo(snaps Snapshots) { l.snaps = snaps }

// ResumeFrom says, before Run, that the host's stream was recovered (from
// disk) up to offset, a command's end: the first PSYNC asks for the bytes
// after it, under the host's ResumeID.
func (l *Link) ResumeFrom(offset int64) {
	l.scanner.Reset(offset)
	l.applied.Store(offset)
	l.resumable = true
}

// Status is the main link as INFO and ROLE show it, at one moment.
type Status struct {
	State     State
	LastIO    int64 // unix nanos of the last byte from the primary
	DownSince int64 // unix nanos the link went down; 0 if it was never up
	Applied   int64 // offset of the last complete command outside MULTI (reploff)
	SyncTotal int64 // RDB size during a full sync (-1 when unknown: EOF mark)
	SyncRead  int64 // RDB bytes received so far
}

// Connected reports whether the main link streams from the primary.
func (l *Link) Connected() bool { return l.State() == StateConnected }

// State returns the main link's state.
func (l *Link) State() State { return State(l.state.Load()) }

// Applied returns the offset of the last complete command outside MULTI
// received from the primary: what the link acknowledges.
func (l *Link) Applied() int64 { return l.applied.Load() }

// Status returns the main link's figures.
func (l *Link) Status() Status {
	return Status{
		State:     l.State(),
		LastIO:    l.lastIO.Load(),
		DownSince: l.downSince.Load(),
		Applied:   l.applied.Load(),
		SyncTotal: l.syncTotal.Load(),
		SyncRead:  l.syncRead.Load(),
	}
}

// AckChanged tells the main link that what Host.AckOffset holds back may
// have risen (a replica acknowledged more): the session sends it at once,
// not at the next periodic ACK, so a WAIT on the primary is not held for up
// to a second. Calls made while one is pending are merged; it never blocks.
func (l *Link) AckChanged() {
	select {
	case l.ackCh <- struct{}{}:
	default:
	}
}

// Retarget makes the main link drop its current primary and look at the
// configuration again.
func (l *Link) Retarget() {
	select {
	case l.retargetCh <- struct{}{}:
	default:
	}
}

// Lost returns a channel that receives when the main link's attempt to
// connect fails or a link that was up goes down (not when a retarget or
// Run's end closes it), so that a caller who decides what the link follows
// (the cluster follower) looks again at once. Losses while one is pending
// are merged into it: the channel has room for one, and the link never
// waits for its reader. One reader at a time.
func (l *Link) Lost() <-chan struct{} { return l.lostCh }

// lost tells Lost's reader of a failed attempt or a lost link.
func (l *Link) lost() {
	select {
	case l.lostCh <- struct{}{}:
	default:
	}
}

// A LinkMode is the main link's compression, as INFO's upstream_link line
// names it.
type LinkMode int32

const (
	LinkPlain   LinkMode = iota // repl-link-compression no: not asked
	LinkZstd                    // asked and agreed: compressed after the PSYNC reply line
	LinkRefused                 // asked and refused (a redis-server, allow no): plain
)

func (m LinkMode) String() string {
	switch m {
	case LinkZstd:
		return "zstd"
	case LinkRefused:
		return "refused"
	}
	return "no"
}

// LinkStatus is a link's compression at one moment: its mode and the
// codec's figures.
type LinkStatus struct {
	Mode string // "zstd", "no" or "refused"
	// Stats are the main link's decompressed (Raw) and received (Wire)
	// bytes and the decoder's CPU time, over every compressed session since
	// the link was made, the current one included, so that they only grow
	// (the metrics are counters); zero while no session was compressed.
	Stats linkzstd.Stats
	// Session are the current session's figures alone, and Since when it
	// began (zero when the current session is plain or there is none): the
	// link's throughput is Session.Wire over the time since.
	Session linkzstd.Stats
	Since   time.Time
}

// Compression returns the main link's compression: the current session's
// mode and the figures of its compressed sessions.
func (l *Link) Compression() LinkStatus {
	st := LinkStatus{Mode: LinkMode(l.mode.Load()).String()}
	l.figures.Lock()
	defer l.figures.Unlock()
	st.Stats = l.figures.mainDone
	if zr := l.figures.mainZR; zr != nil {
		st.Session, st.Since = zr.Stats(), l.figures.mainSince
		st.Stats = addStats(st.Stats, st.Session)
	}
	return st
}

// FetchCompression returns the side links' figures (snapshot fetches,
// filtered fetches) over every compressed one that ended.
func (l *Link) FetchCompression() linkzstd.Stats {
	l.figures.Lock()
	defer l.figures.Unlock()
	return l.figures.fetched
}

func addStats(a, b linkzstd.Stats) linkzstd.Stats {
	return linkzstd.Stats{Raw: a.Raw + b.Raw, Wire: a.Wire + b.Wire, CPU: a.CPU + b.CPU}
}

// maxRefusals bounds the refusals remembered for logging once: primaries
// and their replies are few, and past the bound a new one is logged again
// rather than held forever.
const maxRefusals = 64

// compressionRefused logs a primary's refusal of link compression once per
// primary and reply, not at every reconnect: a redis-server always refuses,
// and the directive is meant to be set everywhere.
func (l *Link) compressionRefused(primary, reply string) {
	reply = clip(reply, 120)
	key := primary + "\x00" + reply
	l.figures.Lock()
	seen := l.figures.refusals[key]
	if !seen {
		if l.figures.refusals == nil || len(l.figures.refusals) >= maxRefusals {
			l.figures.refusals = make(map[string]bool)
		}
		l.figures.refusals[key] = true
	}
	l.figures.Unlock()
	if !seen {
		l.log.Info("primary refused link compression, the link stays plain", "primary", primary, "reply", reply)
	}
}

// mainSession records zr, the compressed reader of the main link's new
// session (nil: plain), as the one Compression reads.
func (l *Link) mainSession(zr *linkzstd.Reader) {
	l.figures.Lock()
	defer l.figures.Unlock()
	l.figures.mainZR, l.figures.mainSince = zr, time.Now()
}

// sessionEnded adds the figures of a compressed session that ended to the
// totals, main or side link, and releases its decoder.
func (l *Link) sessionEnded(zr *linkzstd.Reader, main bool) {
	if zr == nil {
		return
	}
	l.figures.Lock()
	if main {
		l.figures.mainDone = addStats(l.figures.mainDone, zr.Stats())
		if l.figures.mainZR == zr {
			l.figures.mainZR = nil
		}
	} else {
		l.figures.fetched = addStats(l.figures.fetched, zr.Stats())
	}
	l.figures.Unlock()
	zr.Close()
}

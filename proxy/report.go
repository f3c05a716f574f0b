package proxy

import (
	"runtime"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/streamlog"
)

// A report is the server's figures at one moment, read once from their
// sources (the configuration, the upstream link, the history, the registry,
// the stats, the stream log, the memory report) and rendered twice: as
// INFO's text (info.go) and as the monitoring server's metrics.Figures
// (figures, below). A figure either shows that is derived from others (the
// backlog zeroed without a history, a replica's lag, the log's fsync lag,
// input bytes with replication's) is derived here, once, so the two never
// disagree on how.
//
// A report is a plain value owned by the goroutine that read it (an admin
// client's, or a scrape's); reading one takes each source's own lock in
// turn, never two at once.
type report struct {
	now   time.Time
	cfg   *config.Config
	up    upstream.Status
	id    history.Identity
	stats counters

	// The stream.
	offset       int64  // master_repl_offset
	filled       int64  // slave_read_repl_offset: a cut command or an open MULTI included
	backlogFirst int64  // repl_backlog_first_byte_offset; 0 without a history, as INFO shows it
	backlogLen   int64  // repl_backlog_histlen; 0 without a history
	generation   uint64 // stream_generation

	replicas []replicaFigures // in the order they connected
	upLink   upstreamLinkFigures
	clients  int // connected_clients, replicas included

	snapshot *snapshotFigures // the newest snapshot in memory; nil when none
	pool     replbuf.PoolStats

	// streamSince is the stream's bytes after the snapshot a full sync
	// would be served from now (History.HeldOffset), -1 when none is.
	streamSince int64

	// Read only with reportDisk.
	log    logReport
	onDisk *diskSnapshotFigures // the snapshot on disk; nil when none

	// Read only with reportMemory.
	mem           eviction.Report
	peakMemory    int64
	overMaxMemory bool
}

// reportParts names the parts of a report that cost more than loads of
// atomics and a lock or two, so that an INFO section that does not show
// them does not read them.
type reportParts uint8

const (
	reportMemory reportParts = 1 << iota // the memory report (walks the replicas and snapshots)
	reportDisk                           // the stream log's figures and the snapshot on disk

	reportAll = reportMemory | reportDisk
)

// A replicaFigures is one replica as INFO's slaveN line and the
// replproxy_replica_ series show it.
type replicaFigures struct {
	id       int64  // client id
	ip       string // ip-address, else the peer's address
	port     int    // listening-port
	state    downstream.State
	offset   int64 // highest offset ACKed
	lag      int64 // seconds since its last ACK; 0 until it is online
	lagBytes int64 // master_repl_offset minus offset, at least 0
	// hasLag: online and acknowledged on this connection. Before its
	// first ACK offset is 0, not where the replica is, so lagBytes would
	// be the whole stream: /metrics shows no lag until then (INFO shows
	// offset and lag as Redis does).
	hasLag bool
	link   *linkFigures // a downstream proxy's link (INFO's linkN); nil for other replicas
}

// A linkFigures is one link's compression as INFO's Links section and the
// replproxy_*_link_ series show it.
type linkFigures struct {
	compression string  // zstd, no, or (the upstream link) refused
	raw, wire   int64   // bytes before and after compression
	cpu         float64 // seconds of CPU in the encoder or decoder
	kbps        float64 // KiB/s on the wire since the link (session) began
	// throttled is the time traffic control slept pacing the link's
	// full-sync payloads (repl-link-sync-rate-limit), for linkN's
	// throttled_ms.
	throttled time.Duration
}

// ratio is raw over wire bytes, 1 while nothing was compressed.
func (l linkFigures) ratio() float64 {
	if l.wire == 0 {
		return 1
	}
	return float64(l.raw) / float64(l.wire)
}

// An upstreamLinkFigures is INFO's upstream_link line: the main link's
// figures and those of its side links (fetch).
type upstreamLinkFigures struct {
	linkFigures
	fetchRaw, fetchWire int64
	fetchCPU            float64
}

// kbps is KiB per second of wire bytes over the time since since.
func kbps(wire int64, since, now time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	secs := now.Sub(since).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(wire) / 1024 / secs
}

// A snapshotFigures is the newest snapshot in memory.
type snapshotFigures struct {
	replID string
	offset int64
	size   int64
	state  string
	age    int64 // seconds since it was taken
	memory int64 // its blocks' usage
}

// A diskSnapshotFigures is the snapshot on disk (spilled, or written for
// the stream log).
type diskSnapshotFigures struct {
	replID string
	offset int64
	size   int64
	age    int64 // seconds since it was taken
}

// logReport is the stream log's state.
type logReport struct {
	enabled bool   // repl-log-size > 0
	open    bool   // the log was opened; the fields below are read only then
	openErr string // why it could not be opened at start, when enabled and not open
	live    bool   // following the stream (status ok), not down
	size    int64  // repl-log-size
	fsync   string // repl-log-fsync
	window  int64  // repl-log-window as it applies (Server.logBehindLimit)
	replID  string
	stats   streamlog.Stats
	syncAge int64 // seconds since the last fsync; -1 before the first
	errors  int64
	lastErr string
	// lagBytes and lagSeconds are how far the log is behind the published
	// stream (history.Follower.Lag); restarts counts its restarts for it.
	lagBytes   int64
	lagSeconds float64
	restarts   int64

	partialSyncs, movedToDisk int64 // from the server's stats
	recovered, cut            int64 // what recovery verified and cut at start
}

// fsyncLag is the bytes written to the log and not yet fsynced.
func (r logReport) fsyncLag() int64 { return max(r.stats.Last-r.stats.Synced, 0) }

// report reads the server's figures: every part but the costly ones not in
// parts.
func (s *Server) report(parts reportParts) *report {
	now := time.Now()
	r := &report{now: now, cfg: s.config(), up: s.up.Status(), id: s.identity(), stats: s.stats.read()}
	r.stats.fetches = s.snaps.Counts()

	stream := s.hist.Stream()
	r.offset, r.filled, r.generation = stream.Offset(), stream.Filled(), stream.Generation()
	if r.id.History {
		r.backlogFirst, r.backlogLen = stream.Backlog()
	}

	for _, rp := range s.clients.replicaList() {
		// Acked is read before the offset: an ACK arriving between the two
		// then counts as not yet acknowledged, never as an acknowledged 0.
		acked := rp.Acked()
		f := replicaFigures{id: rp.ID(), ip: rp.IP(), port: rp.Port(), state: rp.State(), offset: rp.AckOffset()}
		if f.state == downstream.Online {
			f.lag = int64(now.Sub(time.Unix(0, rp.AckTime())) / time.Second)
			f.hasLag = acked
		}
		f.lagBytes = max(r.offset-f.offset, 0)
		if rp.IsProxy() {
			ls := rp.Compression()
			f.link = &linkFigures{compression: ls.Mode, raw: ls.Stats.Raw, wire: ls.Stats.Wire,
				cpu: ls.Stats.CPU.Seconds(), kbps: kbps(ls.Stats.Wire, ls.Since, now), throttled: rp.Throttled()}
		}
		r.replicas = append(r.replicas, f)
	}
	r.clients = s.clients.count()
	ls, fetched := s.up.Compression(), s.up.FetchCompression()
	r.upLink = upstreamLinkFigures{
		linkFigures: linkFigures{compression: ls.Mode, raw: ls.Stats.Raw, wire: ls.Stats.Wire,
			cpu: ls.Stats.CPU.Seconds(), kbps: kbps(ls.Session.Wire, ls.Since, now)},
		fetchRaw: fetched.Raw, fetchWire: fetched.Wire, fetchCPU: fetched.CPU.Seconds(),
	}

	if sn := s.Snapshot(); sn != nil {
		r.snapshot = &snapshotFigures{
			replID: sn.ReplID(), offset: sn.Offset(), size: sn.Size(), state: sn.State().String(),
			age: int64(now.Sub(sn.Created()) / time.Second), memory: sn.Usage().Total,
		}
	}
	r.streamSince = -1
	if off, ok := s.hist.HeldOffset(); ok {
		r.streamSince = max(r.offset-off, 0)
	}
	r.pool = s.pool.Stats()

	if parts&reportDisk != 0 {
		r.log = s.logReport(now)
		if sp := s.hist.SpilledSnapshot(); sp != nil {
			r.onDisk = &diskSnapshotFigures{
				replID: sp.ReplID, offset: sp.Offset, size: sp.Size,
				age: int64(now.Sub(sp.Created) / time.Second),
			}
		}
	}
	if parts&reportMemory != 0 {
		r.mem = s.memoryReport() // raises the peak first
		r.peakMemory = s.peakMemory.Load()
		r.overMaxMemory = s.overMaxMemory.Load()
	}
	return r
}

// logReport reads the stream log's state.
func (s *Server) logReport(now time.Time) logReport {
	d := s.durable
	cfg := s.config()
	r := logReport{enabled: cfg.ReplLogSize > 0, openErr: s.logOpenErr}
	if d == nil {
		return r
	}
	r.open, r.live = true, !d.follow.Down()
	r.size, r.fsync, r.window = cfg.ReplLogSize, string(cfg.ReplLogFsync), s.logBehindLimit()
	r.replID = d.log.Identity().ReplID
	r.stats = d.log.Stats()
	r.syncAge = -1
	if !r.stats.LastSync.IsZero() {
		r.syncAge = int64(now.Sub(r.stats.LastSync) / time.Second)
	}
	r.errors, r.lastErr = d.follow.Errors(), d.follow.LastError()
	lag, age := d.follow.Lag(now)
	r.lagBytes, r.lagSeconds, r.restarts = lag, age.Seconds(), d.follow.Restarts()
	r.partialSyncs, r.movedToDisk = s.stats.logPartialSyncs.Load(), s.stats.replicasToDisk.Load()
	r.recovered, r.cut = d.rec.Verified, d.rec.Cut
	return r
}

// figures is the report as the monitoring server renders it.
func (r *report) figures() metrics.Figures {
	st := &r.stats
	u := r.up
	f := metrics.Figures{
		Version: Version, Revision: vcsRevision(), GoVersion: runtime.Version(),

		UpstreamLinkUp:    u.State == upstream.StateConnected,
		UpstreamLinkState: u.State.String(),

		UpstreamConnects:              st.upstreamConnects,
		UpstreamFullSyncs:             st.upstreamFullSyncs,
		UpstreamPartialSyncs:          st.upstreamPartialSyncs,
		UpstreamLinkFailures:          st.upstreamLinkFailures,
		UpstreamRDBBytes:              st.upstreamRDBBytes,
		UpstreamChecksumFailures:      st.upstreamChecksumFails,
		UpstreamStreamErrors:          st.upstreamStreamErrors,
		UpstreamQueryBufferLimitDrops: st.upstreamQueryLimits,

		UpstreamLinkCompressed:           r.upLink.compression == "zstd",
		UpstreamLinkRawBytes:             r.upLink.raw,
		UpstreamLinkWireBytes:            r.upLink.wire,
		UpstreamLinkDecompressCPUSeconds: r.upLink.cpu,
		UpstreamLinkCorrupt:              st.upstreamLinkCorrupt,

		MasterReplOffset:       r.offset,
		SlaveReplOffset:        u.Applied,
		SlaveReadReplOffset:    r.filled,
		BacklogFirstByteOffset: r.backlogFirst,
		BacklogHistlen:         r.backlogLen,
		StreamGeneration:       int64(r.generation),

		ReplicasDropped: st.replicasDropped,

		SyncFull:                        st.syncFull,
		SyncPartialOK:                   st.syncPartialOK,
		SyncPartialErr:                  st.syncPartialErr,
		ReplInputBytes:                  st.replInputBytes,
		ReplOutputBytes:                 st.replOutputBytes,
		NetInputBytes:                   st.netInputBytes,
		NetOutputBytes:                  st.netOutputBytes,
		ConnectionsReceived:             st.connectionsReceived,
		RejectedConnections:             st.rejectedConnections,
		CommandsProcessed:               st.commandsProcessed,
		ConnectedClients:                int64(r.clients),
		ACLAccessDeniedAuth:             st.aclDeniedAuth,
		TLSConnectionsReceived:          st.tlsConnectionsReceived,
		TLSHandshakeFailures:            st.tlsHandshakeFailures,
		QueryBufferLimitDisconnections:  st.queryLimitDisconnects,
		OutputBufferLimitDisconnections: st.outputLimitDisconnects,
		LinkSyncRateLimit:               r.cfg.ReplLinkSyncRateLimit,

		SnapshotFetches:       st.fetches.Fetches,
		SnapshotFetchFailures: st.fetches.Failures,
		SnapshotFetchBytes:    st.snapshotFetchBytes,
		EvictedSnapshots:      st.evictedSnapshots,
		EvictedBytes:          st.evictedBytes,

		LogEnabled: r.log.enabled,
		LogUp:      r.log.open && r.log.live,

		UsedMemory:     r.mem.UsedMemory,
		UsedMemoryPeak: r.peakMemory,
		MaxMemory:      r.cfg.MaxMemory,
		OverMaxMemory:  r.overMaxMemory,
	}
	for state := upstream.StateNone; state <= upstream.StateConnected; state++ {
		f.UpstreamLinkStates = append(f.UpstreamLinkStates, state.String())
	}
	if lastIO, ok := r.upstreamLastIO(); ok {
		f.UpstreamLastIOSeconds, f.HasUpstreamLastIO = lastIO, true
	}
	if down, ok := r.upstreamDown(); ok && u.DownSince != 0 {
		f.UpstreamLinkDownSeconds, f.HasUpstreamLinkDown = down, true
	}
	f.ConnectedReplicas, f.Replicas = int64(len(r.replicas)), replicaSeries(r.replicas)
	for st := downstream.WaitBgsave; st <= downstream.Online; st++ {
		f.ReplicaStates = append(f.ReplicaStates, st.String())
	}
	for cr := downstream.CloseNone; cr < downstream.NumCloseReasons; cr++ {
		if cr.AppliesToReplicas() {
			f.ReplicasClosed = append(f.ReplicasClosed, metrics.Count{Label: cr.String(), Value: st.replicaCloses[cr]})
		}
		if cr.AppliesToClients() {
			f.ClientsClosed = append(f.ClientsClosed, metrics.Count{Label: cr.String(), Value: st.clientCloses[cr]})
		}
	}
	for fr := history.PartialAccepted + 1; fr < history.NumFullSyncReasons; fr++ {
		f.FullSyncs = append(f.FullSyncs, metrics.Count{Label: fr.String(), Value: st.fullSyncs[fr]})
	}
	for fr := history.FetchReason(0); fr < history.NumFetchReasons; fr++ {
		f.SnapshotFetchesByReason = append(f.SnapshotFetchesByReason, metrics.Count{Label: fr.String(), Value: st.fetches.ByReason[fr]})
	}
	if sn := r.snapshot; sn != nil {
		f.Snapshot = &metrics.Snapshot{Size: sn.size, AgeSeconds: sn.age, Offset: sn.offset}
	}
	if l := r.log; l.open {
		f.Log = &metrics.Log{
			First: l.stats.First, Last: l.stats.Last, Bytes: l.stats.Bytes, Segments: int64(l.stats.Segments),
			Synced: l.stats.Synced, FsyncLagBytes: l.fsyncLag(), LastFsyncAgeSeconds: l.syncAge,
			Errors: l.errors, PartialSyncs: l.partialSyncs, ReplicasMovedToDisk: l.movedToDisk,
			LagBytes: l.lagBytes, LagSeconds: l.lagSeconds, Restarts: l.restarts,
			RecoveredBytes: l.recovered, RecoveryCutBytes: l.cut,
		}
	}
	if sp := r.onDisk; sp != nil {
		f.SnapshotOnDisk = &metrics.DiskSnapshot{Size: sp.size, Offset: sp.offset, AgeSeconds: sp.age}
	}
	// used_memory's parts, each once (eviction.Account adds up the same
	// ones): sum(replproxy_memory_bytes) is replproxy_used_memory_bytes.
	// The figures that overlap them or are not in used_memory are
	// metrics of their own.
	m := r.mem
	f.Memory = []metrics.Count{
		{Label: "replication_backlog", Value: m.ReplicationBacklog},
		{Label: "clients_replicas", Value: m.ClientsSlaves},
		{Label: "clients_normal", Value: m.ClientsNormal},
		{Label: "snapshots", Value: m.Snapshots},
		{Label: "free_blocks", Value: m.FreeBlocks},
		{Label: "runtime", Value: m.Runtime},
		{Label: "repl_log_index", Value: m.LogIndex},
		{Label: "link_compression", Value: m.LinkCompression},
	}
	f.ReplicationBuffers, f.SnapshotsOnDisk = m.TotalReplicationBuffers, m.SnapshotsOnDisk
	f.MemoryNotCountedForEvict, f.MemoryCountedForEvict = m.NotCountedForEvict, m.Counted
	return f
}

// replicaSeries is the replicas as /metrics labels them: by the address
// and listening port they announced, one connection per identity. Two
// connections share one while a replica reconnects before its old
// connection is closed (or two replicas on one host announce no port):
// the newest, the last in connection order, is the one shown, so that a
// series never repeats and follows the connection that is live.
func replicaSeries(rs []replicaFigures) []metrics.Replica {
	out := make([]metrics.Replica, 0, len(rs))
	seen := make(map[[2]string]int, len(rs)) // identity (ip, port) -> index in out
	for _, rp := range rs {
		m := metrics.Replica{
			IP: rp.ip, Port: strconv.Itoa(rp.port), State: rp.state.String(),
			HasLag: rp.hasLag, Offset: rp.offset, LagSeconds: rp.lag, LagBytes: rp.lagBytes,
		}
		if l := rp.link; l != nil {
			m.Link = &metrics.ReplicaLink{RawBytes: l.raw, WireBytes: l.wire, CompressCPUSeconds: l.cpu,
				ThrottledSeconds: l.throttled.Seconds()}
		}
		key := [2]string{m.IP, m.Port}
		if i, ok := seen[key]; ok {
			out[i] = m
			continue
		}
		seen[key] = len(out)
		out = append(out, m)
	}
	return out
}

// upstreamLastIO is master_last_io_seconds_ago: seconds since the last byte
// from the primary, known (ok) only while the link is connected or syncing.
func (r *report) upstreamLastIO() (secs int64, ok bool) {
	if st := r.up.State; st != upstream.StateConnected && st != upstream.StateSync {
		return -1, false
	}
	return int64(r.now.Sub(time.Unix(0, r.up.LastIO)) / time.Second), true
}

// upstreamDown is master_link_down_since_seconds: seconds the link has been
// down; ok while it is not up (the figure is -1 if it never was).
func (r *report) upstreamDown() (secs int64, ok bool) {
	if r.up.State == upstream.StateConnected {
		return 0, false
	}
	if r.up.DownSince == 0 {
		return -1, true
	}
	return int64(r.now.Sub(time.Unix(0, r.up.DownSince)) / time.Second), true
}

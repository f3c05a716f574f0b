package report

import (
	"time"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/streamlog"
)

// A Report is the server's figures at one moment, read once from their
// sources (the configuration, the upstream link, the history, the clients,
// the counters, the stream log, the memory report) and rendered twice: as
// INFO's text (WriteInfoSection) and as the monitoring server's
// metrics.Figures (Figures).
type Report struct {
	Now     time.Time
	Process Process
	Config  *config.Config // the configuration in force; read-only
	Up      upstream.Status
	ID      history.Identity
	Stats   Counters

	// The stream.
	Offset       int64  // master_repl_offset
	Filled       int64  // slave_read_repl_offset: a cut command or an open MULTI included
	BacklogFirst int64  // repl_backlog_first_byte_offset; 0 without a history, as INFO shows it
	BacklogLen   int64  // repl_backlog_histlen; 0 without a history
	Generation   uint64 // stream_generation

	Replicas []Replica // in the order they connected
	UpLink   UpstreamLink
	Clients  int // connected_clients, replicas included

	Snapshot *Snapshot // the newest snapshot in memory; nil when none
	Pool     replbuf.PoolStats

	// StreamSince is the stream's bytes after the snapshot a full sync
	// would be served from now (History.HeldOffset), -1 when none is.
	StreamSince int64

	// Read only for the sections and scrapes that show them (INFO
	// persistence, /metrics): zero otherwise.
	Log    Log
	OnDisk *DiskSnapshot // the snapshot on disk; nil when none

	// Read only for the sections and scrapes that show them (INFO memory,
	// /metrics): zero otherwise.
	Mem           eviction.Report
	PeakMemory    int64
	OverMaxMemory bool
}

// A Process is what INFO server shows of the process beside what it reads
// when the section is written.
type Process struct {
	Version      string // replproxy_version
	RedisVersion string // redis_version: the Redis release whose behaviour the proxy follows
	PID          int
	RunID        string
	Started      time.Time
	ConfigFile   string // the file the server started from; "" when none
}

// A Replica is one replica as INFO's slaveN line and the replproxy_replica_
// series show it.
type Replica struct {
	ID       int64  // client id
	IP       string // ip-address, else the peer's address
	Port     int    // listening-port
	State    downstream.State
	Offset   int64 // highest offset ACKed
	Lag      int64 // seconds since its last ACK; 0 until it is online
	LagBytes int64 // master_repl_offset minus Offset, at least 0
	// HasLag: online and acknowledged on this connection. Before its
	// first ACK Offset is 0, not where the replica is, so LagBytes would
	// be the whole stream: /metrics shows no lag until then (INFO shows
	// offset and lag as Redis does).
	HasLag bool
	// Unsent and Unacked are its delay (downstream.Delay): the ages of the
	// oldest stream byte not yet written to it and of the oldest written
	// and not acknowledged, 0 when there is none; INFO's unsent_ms and
	// unacked_ms. /metrics shows Unacked only with HasLag, as the lag.
	Unsent, Unacked time.Duration
	Link            *Link // a downstream proxy's link (INFO's linkN); nil for other replicas
}

// A Link is one link's compression as INFO's Links section and the
// replproxy_*_link_ series show it.
type Link struct {
	Compression string  // zstd, no, or (the upstream link) refused
	Raw, Wire   int64   // bytes before and after compression
	CPU         float64 // seconds of CPU in the encoder or decoder
	KBps        float64 // KiB/s on the wire since the link (session) began
	// Throttled is the time traffic control slept pacing the link's
	// full-sync payloads (repl-link-sync-rate-limit), for linkN's
	// throttled_ms.
	Throttled time.Duration
}

// ratio is raw over wire bytes, 1 while nothing was compressed.
func (l Link) ratio() float64 {
	if l.Wire == 0 {
		return 1
	}
	return float64(l.Raw) / float64(l.Wire)
}

// An UpstreamLink is INFO's upstream_link line: the main link's figures
// and those of its side links (fetch).
type UpstreamLink struct {
	Link
	FetchRaw, FetchWire int64
	FetchCPU            float64
}

// KBps is KiB per second of wire bytes over the time from since to now; 0
// when since is zero.
func KBps(wire int64, since, now time.Time) float64 {
	if since.IsZero() {
		return 0
	}
	secs := now.Sub(since).Seconds()
	if secs <= 0 {
		return 0
	}
	return float64(wire) / 1024 / secs
}

// A Snapshot is the newest snapshot in memory.
type Snapshot struct {
	ReplID string
	Offset int64
	Size   int64
	State  string
	Age    int64 // seconds since it was taken
	Memory int64 // its blocks' usage
}

// A DiskSnapshot is the snapshot on disk (spilled, or written for the
// stream log).
type DiskSnapshot struct {
	ReplID string
	Offset int64
	Size   int64
	Age    int64 // seconds since it was taken
}

// A Log is the stream log's state.
type Log struct {
	Enabled bool   // repl-log-size > 0
	Open    bool   // the log was opened; the fields below are read only then
	OpenErr string // why it could not be opened at start, when enabled and not open
	Live    bool   // following the stream (status ok), not down
	Size    int64  // repl-log-size
	Fsync   string // repl-log-fsync
	Window  int64  // repl-log-window as it applies
	ReplID  string
	Stats   streamlog.Stats
	SyncAge int64 // seconds since the last fsync; -1 before the first
	Errors  int64
	LastErr string
	// LagBytes and LagSeconds are how far the log is behind the published
	// stream (history.Follower.Lag); Restarts counts its restarts for it.
	LagBytes   int64
	LagSeconds float64
	Restarts   int64

	PartialSyncs, MovedToDisk int64 // from the server's counters
	Recovered, Cut            int64 // what recovery verified and cut at start
}

// fsyncLag is the bytes written to the log and not yet fsynced.
func (l Log) fsyncLag() int64 { return max(l.Stats.Last-l.Stats.Synced, 0) }

// Counters are the server's counters read at one moment, one plain value
// per counter.
type Counters struct {
	ConnectionsReceived, CommandsProcessed, RejectedConnections int64
	NetInputBytes, NetOutputBytes                               int64 // replication's included, as INFO shows them
	ReplInputBytes, ReplOutputBytes                             int64
	SyncFull, SyncPartialOK, SyncPartialErr                     int64
	FullSyncs                                                   [history.NumFullSyncReasons]int64
	LogPartialSyncs, ReplicasToDisk                             int64

	UpstreamConnects, UpstreamFullSyncs, UpstreamPartialSyncs, UpstreamLinkFailures    int64
	UpstreamRDBBytes, UpstreamChecksumFails, UpstreamStreamErrors, UpstreamQueryLimits int64
	UpstreamLinkCorrupt, UpstreamRDBCheckFails                                         int64

	SnapshotFetchBytes             int64
	ClusterChecks                  int64 // the cluster follower's (replicaof-cluster)
	ClusterCheckFailures           int64
	ClusterPrimaryChanges          int64
	ClusterSlots                   []clustertopo.SlotRange // shared: never change it
	Fetches                        snapshots.Counts        // package snapshots' own
	Source                         snapshots.SourceCounts  // the snapshot source's (snapshot-from), package snapshots' own
	ReplicasDropped                int64
	ReplicaCloses, ClientCloses    [downstream.NumCloseReasons]int64
	EvictedSnapshots, EvictedBytes int64

	ACLDeniedAuth, QueryLimitDisconnects, OutputLimitDisconnects int64
	ACLDeniedCmd, ACLDeniedKey, ACLDeniedChannel                 int64
	TLSConnectionsReceived, TLSHandshakeFailures                 int64
	MetricsAuthFailures, MetricsAuthThrottled                    int64

	// RelayDelays is the time from a stream byte's arrival to its write to
	// a replica, by write path (downstream.WriteDelays): /metrics only.
	RelayDelays [downstream.NumWritePaths]downstream.RelayCounts
}

// snapshotSource is snapshot_source: the snapshot-from source in force as
// host:port, or "primary" when snapshots come from the configured primary
// (the default), so that INFO and the info series always name one.
func (r *Report) snapshotSource() string {
	if addr := r.Config.SnapshotFromAddr(); addr != "" {
		return addr
	}
	return "primary"
}

// upstreamLastIO is master_last_io_seconds_ago: seconds since the last byte
// from the primary, known (ok) only while the link is connected or syncing.
func (r *Report) upstreamLastIO() (secs int64, ok bool) {
	if st := r.Up.State; st != upstream.StateConnected && st != upstream.StateSync {
		return -1, false
	}
	return int64(r.Now.Sub(time.Unix(0, r.Up.LastIO)) / time.Second), true
}

// upstreamDown is master_link_down_since_seconds: seconds the link has been
// down; ok while it is not up (the figure is -1 if it never was).
func (r *Report) upstreamDown() (secs int64, ok bool) {
	if r.Up.State == upstream.StateConnected {
		return 0, false
	}
	if r.Up.DownSince == 0 {
		return -1, true
	}
	return int64(r.Now.Sub(time.Unix(0, r.Up.DownSince)) / time.Second), true
}

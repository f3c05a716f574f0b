package metrics

// Figures is every replproxy_ figure /metrics shows, as its owner read them
// for one scrape. The collector renders it and derives nothing: each value
// is what INFO shows for the same figure (the help of each metric names the
// INFO field), computed once by whoever fills it in.
type Figures struct {
	// The build (INFO server): replproxy_build_info's labels.
	Version   string // replproxy_version
	Revision  string // the VCS revision it was built from, "unknown" when not recorded
	GoVersion string // go_version

	// The upstream link (INFO replication and proxy).
	UpstreamLinkUp     bool     // master_link_status:up
	UpstreamLinkState  string   // upstream_link_state
	UpstreamLinkStates []string // every state upstream_link_state can name, for its 0 series
	// UpstreamLastIOSeconds is master_last_io_seconds_ago, shown only
	// when HasUpstreamLastIO (the link connected or syncing).
	UpstreamLastIOSeconds int64
	HasUpstreamLastIO     bool
	// UpstreamLinkDownSeconds is master_link_down_since_seconds, shown
	// only when HasUpstreamLinkDown (the link not up, and down once).
	UpstreamLinkDownSeconds int64
	HasUpstreamLinkDown     bool

	UpstreamConnects              int64
	UpstreamFullSyncs             int64
	UpstreamPartialSyncs          int64
	UpstreamLinkFailures          int64
	UpstreamRDBBytes              int64
	UpstreamChecksumFailures      int64
	UpstreamRDBCheckFailures      int64
	UpstreamStreamErrors          int64
	UpstreamQueryBufferLimitDrops int64

	// The upstream link's compression (INFO links' upstream_link, and
	// link_corrupt_errors): the main link's compressed sessions since start.
	UpstreamLinkCompressed           bool // the current session is compressed
	UpstreamLinkRawBytes             int64
	UpstreamLinkWireBytes            int64
	UpstreamLinkDecompressCPUSeconds float64
	UpstreamLinkCorrupt              int64

	// The cluster follower (INFO proxy's cluster_*; 0 without
	// replicaof-cluster).
	ClusterChecks         int64
	ClusterCheckFailures  int64
	ClusterPrimaryChanges int64

	// Offsets and the backlog (INFO replication).
	MasterReplOffset       int64
	SlaveReplOffset        int64
	SlaveReadReplOffset    int64
	BacklogFirstByteOffset int64
	BacklogHistlen         int64
	StreamGeneration       int64

	// Replicas (INFO replication's slaveN lines), and closes by reason.
	// Replicas holds one entry per identity (IP, Port): its owner keeps
	// one connection of each, so that no two share a series;
	// ConnectedReplicas counts every connection (connected_slaves).
	ConnectedReplicas int64
	Replicas          []Replica
	ReplicaStates     []string // every state a replica's State can name, for its 0 series
	ReplicasDropped   int64
	ReplicasClosed    []Count // by close reason
	ClientsClosed     []Count // by close reason
	// RelayDelays is the time from a stream byte's arrival from the
	// primary to its write to a replica, one histogram per write path
	// (its Label): inline, loop, log. INFO has no field for it.
	RelayDelays []Histogram

	// Downstream syncs and traffic (INFO stats).
	SyncFull                        int64
	SyncPartialOK                   int64
	SyncPartialErr                  int64
	FullSyncs                       []Count // by full-sync reason
	ReplInputBytes                  int64
	ReplOutputBytes                 int64
	NetInputBytes                   int64
	NetOutputBytes                  int64
	ConnectionsReceived             int64
	RejectedConnections             int64
	CommandsProcessed               int64
	ConnectedClients                int64
	ACLAccessDeniedAuth             int64
	TLSConnectionsReceived          int64
	TLSHandshakeFailures            int64
	MetricsAuthFailures             int64 // requests to this port refused 401
	MetricsAuthThrottled            int64 // requests to this port refused 429: the password checks' queue was full
	QueryBufferLimitDisconnections  int64
	OutputBufferLimitDisconnections int64
	LinkSyncRateLimit               int64 // repl_link_sync_rate_limit, bytes per second; 0 unlimited

	// Snapshots (INFO proxy and stats).
	Snapshot                *Snapshot // the newest in memory; nil when there is none
	SnapshotFetches         int64
	SnapshotFetchFailures   int64
	SnapshotFetchesByReason []Count // by fetch reason
	SnapshotFetchBytes      int64
	EvictedSnapshots        int64
	EvictedBytes            int64

	// The snapshot source (INFO proxy's snapshot_source_* fields).
	SnapshotSource          string  // snapshot_source: the source's host:port, or primary
	SnapshotSourceFallback  string  // snapshot_source_fallback: yes or no
	SnapshotSourceFetches   int64   // snapshot_source_fetches
	SnapshotSourceFallbacks int64   // snapshot_source_fallbacks
	SnapshotSourceFailures  []Count // by reason (snapshot_source_failures_<reason>)

	// The stream log and the snapshot on disk (INFO persistence).
	LogEnabled     bool          // repl_log_enabled
	LogUp          bool          // open and repl_log_status:ok
	Log            *Log          // nil when the log is not open
	SnapshotOnDisk *DiskSnapshot // nil when there is none

	// Memory (INFO memory).
	UsedMemory     int64
	UsedMemoryPeak int64
	MaxMemory      int64
	OverMaxMemory  bool
	// Memory is used_memory by category, disjoint: the categories add up
	// to UsedMemory. The figures INFO shows beside them that overlap them
	// or are not in used_memory have fields of their own.
	Memory                   []Count
	ReplicationBuffers       int64 // mem_total_replication_buffers
	SnapshotsOnDisk          int64 // mem_snapshots_on_disk
	MemoryNotCountedForEvict int64 // mem_not_counted_for_evict
	MemoryCountedForEvict    int64 // mem_counted_for_evict
}

// A Count is one series of a labelled family: its label value and figure.
type Count struct {
	Label string
	Value int64
}

// A Histogram is one series of a histogram: its label value, and its
// buckets as Prometheus has them, cumulative: Counts[i] observations at
// most Bounds[i]; Count every observation, those above the last bound
// included; Sum their total. Bounds and Sum are in the metric's unit.
type Histogram struct {
	Label  string
	Bounds []float64 // ascending
	Counts []int64   // as long as Bounds
	Count  int64
	Sum    float64
}

// A Replica is one slaveN line of INFO replication, under its stable
// identity: the address and listening port it announced (slaveN ip and
// port), which a reconnect keeps, not its client id, which it does not.
type Replica struct {
	IP    string
	Port  string
	State string // slaveN state
	// HasLag is set once the replica is online and has acknowledged an
	// offset on this connection; until then it has no offset, lag or lag
	// series (a replica still syncing is not behind by the whole stream).
	HasLag     bool
	Offset     int64 // highest offset acknowledged
	LagSeconds int64 // since its last ACK
	LagBytes   int64 // MasterReplOffset minus Offset, at least 0
	// UnsentSeconds is the age of the oldest stream byte published and not
	// yet written to the replica (slaveN unsent_ms), shown for every
	// replica; UnackedSeconds the age of the oldest written and not
	// acknowledged (slaveN unacked_ms), shown with the lag (HasLag).
	UnsentSeconds  float64
	UnackedSeconds float64
	// Link is the replica's link figures when it is a downstream proxy
	// (INFO links' linkN), nil otherwise.
	Link *ReplicaLink
}

// A ReplicaLink is a downstream proxy's link: bytes given to it and bytes on
// the wire (equal on a plain link) and the encoder's CPU time.
type ReplicaLink struct {
	RawBytes, WireBytes int64
	CompressCPUSeconds  float64
	// ThrottledSeconds is the time its full-sync payloads were held back
	// by repl-link-sync-rate-limit on this connection (linkN throttled_ms).
	ThrottledSeconds float64
}

// A Snapshot is the newest snapshot in memory.
type Snapshot struct {
	Size       int64
	AgeSeconds int64
	Offset     int64
}

// A Log is the stream log's figures, while it is open.
type Log struct {
	First               int64
	Last                int64
	Bytes               int64
	Segments            int64
	Synced              int64
	FsyncLagBytes       int64
	LastFsyncAgeSeconds int64 // -1 before the first fsync: not shown
	LagBytes            int64
	LagSeconds          float64
	Restarts            int64
	Errors              int64
	PartialSyncs        int64
	ReplicasMovedToDisk int64
	RecoveredBytes      int64
	RecoveryCutBytes    int64
}

// A DiskSnapshot is the snapshot on disk (spilled, or written for the
// stream log).
type DiskSnapshot struct {
	Size       int64
	Offset     int64
	AgeSeconds int64
}

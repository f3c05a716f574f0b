package metrics

import "github.com/prometheus/client_golang/prometheus"

// metricSpec is one replproxy_ metric: its name after the prefix, type,
// help (naming the INFO field it mirrors), label names, and where its
// series come from in the Figures.
type metricSpec struct {
	name   string
	kind   prometheus.ValueType
	help   string
	labels []string
	// series yields the metric's series from one scrape's figures, one call
	// of put per series. A figure its owner does not know (a group that is
	// nil, a Has flag unset) yields none: the series is absent.
	series func(f *Figures, put putFunc)
}

// putFunc adds one series of a metric: its value, and its label values in
// the order of the metric's labels.
type putFunc func(v float64, labelValues ...string)

const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

// replicaLabels identify a replica's series: the address and listening
// port it announced, as redis_exporter's slave_ip and slave_port do, so that
// a replica that reconnects continues its series.
var replicaLabels = []string{"replica_ip", "replica_port"}

// metricSpecs lists every replproxy_ metric with the figures it renders,
// so that each is named once (Collect renders the table). Names follow
// Prometheus's rules: the unit as a suffix in base units (_bytes, _seconds;
// an offset is a position in bytes), _total on counters and only there,
// replica_ never slave_, and the series of a labelled family add up to a
// meaningful whole (memory_bytes to used_memory_bytes). docs/metrics.md's
// table lists them, and the names they replaced. Read-only.
var metricSpecs = []metricSpec{
	{"build_info", gauge, "1, labelled with the build: replproxy's version (replproxy_version), the VCS revision and the Go version (go_version).", []string{"version", "revision", "goversion"},
		func(f *Figures, put putFunc) { put(1, f.Version, f.Revision, f.GoVersion) }},

	// The upstream link (INFO replication and proxy).
	{"upstream_link_up", gauge, "1 when the upstream link is streaming (master_link_status:up).", nil,
		flag(func(f *Figures) bool { return f.UpstreamLinkUp })},
	{"upstream_link_state", gauge, "1 for the upstream link's current state (upstream_link_state), 0 for the others.", []string{"state"},
		oneOf(func(f *Figures) (string, []string) { return f.UpstreamLinkState, f.UpstreamLinkStates })},
	{"upstream_last_io_seconds", gauge, "Seconds since the last byte from the primary (master_last_io_seconds_ago); absent when the link is not connected or syncing.", nil,
		optional(func(f *Figures) (int64, bool) { return f.UpstreamLastIOSeconds, f.HasUpstreamLastIO })},
	{"upstream_link_down_seconds", gauge, "Seconds the link has been down (master_link_down_since_seconds); absent while it is up or if it never was.", nil,
		optional(func(f *Figures) (int64, bool) { return f.UpstreamLinkDownSeconds, f.HasUpstreamLinkDown })},
	{"upstream_connects_total", counter, "Connections made to the primary (upstream_connects).", nil,
		number(func(f *Figures) int64 { return f.UpstreamConnects })},
	{"upstream_syncs_total", counter, "Syncs with the primary by type, full (upstream_full_syncs) or partial (upstream_partial_syncs).", []string{"type"},
		counts(func(f *Figures) []Count {
			return []Count{{"full", f.UpstreamFullSyncs}, {"partial", f.UpstreamPartialSyncs}}
		})},
	{"upstream_link_failures_total", counter, "Link attempts or links that ended with an error (upstream_link_failures).", nil,
		number(func(f *Figures) int64 { return f.UpstreamLinkFailures })},
	{"upstream_rdb_bytes_total", counter, "RDB payload bytes received from the primary (upstream_rdb_bytes).", nil,
		number(func(f *Figures) int64 { return f.UpstreamRDBBytes })},
	{"upstream_checksum_failures_total", counter, "Snapshots whose CRC64 did not match (upstream_checksum_failures).", nil,
		number(func(f *Figures) int64 { return f.UpstreamChecksumFailures })},
	{"upstream_rdb_check_failures_total", counter, "Snapshots from the primary or the snapshot source that the RDB check refused: a structure Redis's loader refuses, an RDB version this proxy does not know, a payload that ends before the RDB does, or a checksum that does not match (upstream_rdb_check_failures).", nil,
		number(func(f *Figures) int64 { return f.UpstreamRDBCheckFailures })},
	{"upstream_stream_errors_total", counter, "Links dropped for stream bytes the scanner refused (upstream_stream_errors).", nil,
		number(func(f *Figures) int64 { return f.UpstreamStreamErrors })},
	{"upstream_query_buffer_limit_drops_total", counter, "Links dropped for unpublished stream bytes over master-query-buffer-limit (upstream_query_buffer_limit_drops).", nil,
		number(func(f *Figures) int64 { return f.UpstreamQueryBufferLimitDrops })},
	{"upstream_link_compressed", gauge, "1 while the main upstream link is compressed (upstream_link compression=zstd), else 0.", nil,
		flag(func(f *Figures) bool { return f.UpstreamLinkCompressed })},
	{"upstream_link_raw_bytes_total", counter, "Bytes the main upstream link's compressed sessions decompressed to (upstream_link raw_bytes).", nil,
		number(func(f *Figures) int64 { return f.UpstreamLinkRawBytes })},
	{"upstream_link_wire_bytes_total", counter, "Bytes the main upstream link's compressed sessions received, chunk headers included (upstream_link wire_bytes).", nil,
		number(func(f *Figures) int64 { return f.UpstreamLinkWireBytes })},
	{"upstream_link_decompress_cpu_seconds_total", counter, "CPU time spent decompressing the main upstream link (upstream_link cpu_sec).", nil,
		number(func(f *Figures) float64 { return f.UpstreamLinkDecompressCPUSeconds })},
	{"upstream_link_corrupt_total", counter, "Upstream links, main or side, ended by corrupt compressed input (link_corrupt_errors).", nil,
		number(func(f *Figures) int64 { return f.UpstreamLinkCorrupt })},
	{"cluster_checks_total", counter, "Readings of the followed cluster's topology (cluster_checks; replicaof-cluster).", nil,
		number(func(f *Figures) int64 { return f.ClusterChecks })},
	{"cluster_check_failures_total", counter, "Readings of the cluster's topology that confirmed no primary (cluster_check_failures).", nil,
		number(func(f *Figures) int64 { return f.ClusterCheckFailures })},
	{"cluster_primary_changes_total", counter, "Times the cluster follower set replicaof to another node (cluster_primary_changes).", nil,
		number(func(f *Figures) int64 { return f.ClusterPrimaryChanges })},

	// Offsets and the backlog (INFO replication).
	{"master_repl_offset_bytes", gauge, "Offset of the last byte published to replicas (master_repl_offset).", nil,
		number(func(f *Figures) int64 { return f.MasterReplOffset })},
	{"upstream_repl_offset_bytes", gauge, "Offset of the last complete command from the primary, what the proxy ACKs (slave_repl_offset).", nil,
		number(func(f *Figures) int64 { return f.SlaveReplOffset })},
	{"upstream_read_repl_offset_bytes", gauge, "Offset of the last byte read from the primary (slave_read_repl_offset).", nil,
		number(func(f *Figures) int64 { return f.SlaveReadReplOffset })},
	{"repl_backlog_first_byte_offset_bytes", gauge, "First offset the backlog holds (repl_backlog_first_byte_offset).", nil,
		number(func(f *Figures) int64 { return f.BacklogFirstByteOffset })},
	{"repl_backlog_histlen_bytes", gauge, "Bytes the backlog holds (repl_backlog_histlen).", nil,
		number(func(f *Figures) int64 { return f.BacklogHistlen })},
	{"stream_generation", gauge, "Stream generations: upstream full resyncs since start (stream_generation).", nil,
		number(func(f *Figures) int64 { return f.StreamGeneration })},

	// Replicas (INFO replication's slaveN lines).
	{"connected_replicas", gauge, "Replicas connected (connected_slaves).", nil,
		number(func(f *Figures) int64 { return f.ConnectedReplicas })},
	{"replica_state", gauge, "1 for the replica's current sync state (slaveN state: wait_bgsave, send_bulk, online), 0 for the others.", []string{"replica_ip", "replica_port", "state"},
		replicaState},
	{"replica_offset_bytes", gauge, "Highest offset the replica has acknowledged (slaveN offset); absent until it is online and has acknowledged one.", replicaLabels,
		ofReplicaLag(func(r *Replica) int64 { return r.Offset })},
	{"replica_lag_seconds", gauge, "Seconds since the replica's last ACK (slaveN lag); absent until it is online and has acknowledged an offset.", replicaLabels,
		ofReplicaLag(func(r *Replica) int64 { return r.LagSeconds })},
	{"replica_lag_bytes", gauge, "master_repl_offset minus the replica's acknowledged offset; absent until it is online and has acknowledged one.", replicaLabels,
		ofReplicaLag(func(r *Replica) int64 { return r.LagBytes })},
	{"replica_unsent_age_seconds", gauge, "Age of the oldest stream byte published and not yet written to the replica's socket: its time inside the proxy; 0 when none (slaveN unsent_ms).", replicaLabels,
		ofReplica(func(r *Replica) float64 { return r.UnsentSeconds })},
	{"replica_unacked_age_seconds", gauge, "Age of the oldest stream byte written to the replica and not covered by its last REPLCONF ACK, 0 when none: the proxy, the network and the replica, including its ACK period (1 s for Redis); absent until it is online and has acknowledged an offset (slaveN unacked_ms).", replicaLabels,
		ofReplicaLag(func(r *Replica) float64 { return r.UnackedSeconds })},
	{"replica_link_raw_bytes_total", counter, "Bytes sent to a downstream proxy before compression (linkN raw_bytes); only for replicas that are proxies.", replicaLabels,
		ofReplicaLink(func(l *ReplicaLink) int64 { return l.RawBytes })},
	{"replica_link_wire_bytes_total", counter, "Bytes sent to a downstream proxy on the wire, chunk headers included; equal to raw on a plain link (linkN wire_bytes).", replicaLabels,
		ofReplicaLink(func(l *ReplicaLink) int64 { return l.WireBytes })},
	{"replica_link_compress_cpu_seconds_total", counter, "CPU time spent compressing a downstream proxy's link (linkN cpu_sec).", replicaLabels,
		ofReplicaLink(func(l *ReplicaLink) float64 { return l.CompressCPUSeconds })},
	{"replica_link_throttled_seconds_total", counter, "Seconds a downstream proxy's full-sync payloads were held back by repl-link-sync-rate-limit on its connection (linkN throttled_ms); only for replicas that are proxies.", replicaLabels,
		ofReplicaLink(func(l *ReplicaLink) float64 { return l.ThrottledSeconds })},
	{"link_sync_rate_limit_bytes", gauge, "repl-link-sync-rate-limit: the bytes per second a full-sync payload to a downstream proxy may take of its link; 0 is unlimited (repl_link_sync_rate_limit).", nil,
		number(func(f *Figures) int64 { return f.LinkSyncRateLimit })},
	{"replicas_dropped_total", counter, "Replicas disconnected by a limit or timeout (replicas_dropped).", nil,
		number(func(f *Figures) int64 { return f.ReplicasDropped })},
	{"replicas_closed_total", counter, "Replicas closed, by reason (replicas_closed_<reason>).", []string{"reason"},
		counts(func(f *Figures) []Count { return f.ReplicasClosed })},
	{"clients_closed_total", counter, "Other clients closed, by reason (clients_closed_<reason>).", []string{"reason"},
		counts(func(f *Figures) []Count { return f.ClientsClosed })},

	// Downstream syncs and traffic (INFO stats).
	{"full_syncs_total", counter, "Full syncs served to replicas by reason (sync_full_<reason>); they add up to sync_full.", []string{"reason"},
		counts(func(f *Figures) []Count { return f.FullSyncs })},
	{"syncs_total", counter, "Syncs served to replicas by result: full (sync_full), partial_ok (sync_partial_ok), partial_err (sync_partial_err).", []string{"result"},
		counts(func(f *Figures) []Count {
			return []Count{{"full", f.SyncFull}, {"partial_ok", f.SyncPartialOK}, {"partial_err", f.SyncPartialErr}}
		})},
	{"repl_input_bytes_total", counter, "Bytes received from the primary (total_net_repl_input_bytes).", nil,
		number(func(f *Figures) int64 { return f.ReplInputBytes })},
	{"repl_output_bytes_total", counter, "Bytes sent to replicas (total_net_repl_output_bytes).", nil,
		number(func(f *Figures) int64 { return f.ReplOutputBytes })},
	{"net_input_bytes_total", counter, "Bytes received, replication included (total_net_input_bytes).", nil,
		number(func(f *Figures) int64 { return f.NetInputBytes })},
	{"net_output_bytes_total", counter, "Bytes sent, replication included (total_net_output_bytes).", nil,
		number(func(f *Figures) int64 { return f.NetOutputBytes })},
	{"connections_received_total", counter, "Connections accepted (total_connections_received).", nil,
		number(func(f *Figures) int64 { return f.ConnectionsReceived })},
	{"rejected_connections_total", counter, "Connections refused (rejected_connections).", nil,
		number(func(f *Figures) int64 { return f.RejectedConnections })},
	{"commands_processed_total", counter, "Commands processed (total_commands_processed).", nil,
		number(func(f *Figures) int64 { return f.CommandsProcessed })},
	{"connected_clients", gauge, "Clients connected, replicas included (connected_clients).", nil,
		number(func(f *Figures) int64 { return f.ConnectedClients })},
	{"acl_access_denied_auth_total", counter, "Failed AUTH (acl_access_denied_auth).", nil,
		number(func(f *Figures) int64 { return f.ACLAccessDeniedAuth })},
	{"tls_connections_received_total", counter, "Connections accepted on tls-port (tls_connections_received).", nil,
		number(func(f *Figures) int64 { return f.TLSConnectionsReceived })},
	{"tls_handshake_failures_total", counter, "TLS handshakes on tls-port that failed or timed out (tls_handshake_failures).", nil,
		number(func(f *Figures) int64 { return f.TLSHandshakeFailures })},
	{"metrics_auth_failures_total", counter, "Requests to the monitoring port refused 401 for missing or wrong basic authentication credentials (metrics_auth_failures).", nil,
		number(func(f *Figures) int64 { return f.MetricsAuthFailures })},
	{"metrics_auth_throttled_total", counter, "Requests to the monitoring port refused 429, their credentials not checked, because as many password checks as may wait were waiting (metrics_auth_throttled).", nil,
		number(func(f *Figures) int64 { return f.MetricsAuthThrottled })},
	{"client_buffer_limit_disconnections_total", counter, "Clients closed by a buffer limit, query or output (client_query_buffer_limit_disconnections, client_output_buffer_limit_disconnections).", []string{"buffer"},
		counts(func(f *Figures) []Count {
			return []Count{{"query", f.QueryBufferLimitDisconnections}, {"output", f.OutputBufferLimitDisconnections}}
		})},

	// Snapshots (INFO proxy and stats).
	{"snapshot_size_bytes", gauge, "Size of the newest snapshot in memory (snapshot_size); absent when there is none.", nil,
		ofSnapshot(func(s *Snapshot) int64 { return s.Size })},
	{"snapshot_age_seconds", gauge, "Age of the newest snapshot in memory (snapshot_age_seconds); absent when there is none.", nil,
		ofSnapshot(func(s *Snapshot) int64 { return s.AgeSeconds })},
	{"snapshot_offset_bytes", gauge, "Offset the newest snapshot in memory was taken at (snapshot_offset); absent when there is none.", nil,
		ofSnapshot(func(s *Snapshot) int64 { return s.Offset })},
	{"snapshot_fetches_total", counter, "Side-link snapshot fetches by result, ok (snapshot_fetches) or failed (snapshot_fetch_failures).", []string{"result"},
		counts(func(f *Figures) []Count {
			return []Count{{"ok", f.SnapshotFetches}, {"failed", f.SnapshotFetchFailures}}
		})},
	{"snapshot_fetches_by_reason_total", counter, "Completed side-link snapshot fetches, from the primary or the snapshot source, by why they were started: replica_needed, refresh, backup, filtered, proxy_sync (snapshot_fetches_<reason>).", []string{"reason"},
		counts(func(f *Figures) []Count { return f.SnapshotFetchesByReason })},
	{"snapshot_fetch_bytes_total", counter, "Payload bytes received by snapshot fetches (snapshot_fetch_bytes).", nil,
		number(func(f *Figures) int64 { return f.SnapshotFetchBytes })},
	{"snapshot_source_info", gauge, "1, labelled with where snapshots are fetched from, the snapshot-from source's host:port or primary (snapshot_source), and whether the primary is asked when that source cannot be used, yes or no (snapshot_source_fallback).", []string{"source", "fallback"},
		func(f *Figures, put putFunc) { put(1, f.SnapshotSource, f.SnapshotSourceFallback) }},
	{"snapshot_source_fetches_total", counter, "Snapshots completed from the snapshot source, which cost the primary no fork (snapshot_source_fetches).", nil,
		number(func(f *Figures) int64 { return f.SnapshotSourceFetches })},
	{"snapshot_source_fallbacks_total", counter, "Times the primary was asked for a snapshot because the snapshot source could not be used (snapshot_source_fallbacks).", nil,
		number(func(f *Figures) int64 { return f.SnapshotSourceFallbacks })},
	{"snapshot_source_failures_total", counter, "Times the snapshot source could not be used, by reason: replid (it replicates another primary), behind (it stands before what the primary's backlog, or the proxy's, still holds), ahead (it claims a position past the primary's end, or far past the proxy's), down (unreachable, silent or dropped the link), refused (it answered with an error) (snapshot_source_failures_<reason>).", []string{"reason"},
		counts(func(f *Figures) []Count { return f.SnapshotSourceFailures })},
	{"evicted_snapshots_total", counter, "Snapshots evicted: spilled to disk or dropped (evicted_snapshots).", nil,
		number(func(f *Figures) int64 { return f.EvictedSnapshots })},
	{"evicted_bytes_total", counter, "Memory of the evicted snapshots (evicted_bytes).", nil,
		number(func(f *Figures) int64 { return f.EvictedBytes })},

	// The stream log and the snapshot on disk (INFO persistence).
	{"repl_log_enabled", gauge, "1 when repl-log-size is above 0 (repl_log_enabled).", nil,
		flag(func(f *Figures) bool { return f.LogEnabled })},
	{"repl_log_up", gauge, "1 while the stream log follows the stream (repl_log_status:ok), 0 when it is down or could not be opened.", nil,
		flag(func(f *Figures) bool { return f.LogUp })},
	{"repl_log_first_offset_bytes", gauge, "First offset the stream log holds (repl_log_first_offset); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.First })},
	{"repl_log_last_offset_bytes", gauge, "Last offset the stream log holds (repl_log_last_offset); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.Last })},
	{"repl_log_bytes", gauge, "Stream bytes the log holds (repl_log_bytes); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.Bytes })},
	{"repl_log_segments", gauge, "Segment files of the log (repl_log_segments); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.Segments })},
	{"repl_log_synced_offset_bytes", gauge, "Last offset made durable by fsync (repl_log_synced_offset); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.Synced })},
	{"repl_log_fsync_lag_bytes", gauge, "Bytes written to the log and not yet fsynced (repl_log_fsync_lag_bytes); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.FsyncLagBytes })},
	{"repl_log_last_fsync_age_seconds", gauge, "Seconds since the log's last fsync (repl_log_last_fsync_age); absent before the first.", nil,
		lastFsyncAge},
	{"repl_log_lag_bytes", gauge, "Stream bytes published and not yet in the log (repl_log_lag_bytes); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.LagBytes })},
	{"repl_log_lag_seconds", gauge, "Seconds since the oldest byte not yet in the log was published, at least (repl_log_lag_seconds); absent without a log.", nil,
		inLog(func(l *Log) float64 { return l.LagSeconds })},
	{"repl_log_restarts_total", counter, "Restarts of the stream log as a new generation for falling behind by more than the memory window (repl_log_restarts); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.Restarts })},
	{"repl_log_errors_total", counter, "Failures that stopped the stream log (repl_log_errors); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.Errors })},
	{"repl_log_partial_syncs_total", counter, "Partial resyncs served from the stream log (repl_log_partial_syncs); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.PartialSyncs })},
	{"repl_log_replicas_moved_to_disk_total", counter, "Replicas moved from memory to the stream log for lagging (repl_log_replicas_moved_to_disk); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.ReplicasMovedToDisk })},
	{"repl_log_recovered_bytes", gauge, "Bytes recovery verified at start (repl_log_recovered_bytes); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.RecoveredBytes })},
	{"repl_log_recovery_cut_bytes", gauge, "Bytes recovery cut at start, damaged or unfinished (repl_log_recovery_cut_bytes); absent without a log.", nil,
		inLog(func(l *Log) int64 { return l.RecoveryCutBytes })},
	{"snapshot_on_disk", gauge, "1 when a snapshot is on disk, spilled or written for the stream log (repl_snapshot_on_disk).", nil,
		flag(func(f *Figures) bool { return f.SnapshotOnDisk != nil })},
	{"snapshot_on_disk_size_bytes", gauge, "Size of the snapshot on disk (repl_snapshot_size); absent when there is none.", nil,
		ofDiskSnapshot(func(s *DiskSnapshot) int64 { return s.Size })},
	{"snapshot_on_disk_offset_bytes", gauge, "Offset the snapshot on disk was taken at (repl_snapshot_offset); absent when there is none.", nil,
		ofDiskSnapshot(func(s *DiskSnapshot) int64 { return s.Offset })},
	{"snapshot_on_disk_age_seconds", gauge, "Age of the snapshot on disk (repl_snapshot_age_seconds); absent when there is none.", nil,
		ofDiskSnapshot(func(s *DiskSnapshot) int64 { return s.AgeSeconds })},

	// Memory (INFO memory, from the same report).
	{"used_memory_bytes", gauge, "Memory the proxy accounts for (used_memory).", nil,
		number(func(f *Figures) int64 { return f.UsedMemory })},
	{"used_memory_peak_bytes", gauge, "Peak of used_memory (used_memory_peak).", nil,
		number(func(f *Figures) int64 { return f.UsedMemoryPeak })},
	{"maxmemory_bytes", gauge, "maxmemory; 0 means no limit.", nil,
		number(func(f *Figures) int64 { return f.MaxMemory })},
	{"memory_over_maxmemory", gauge, "1 when used memory is over maxmemory (mem_over_maxmemory).", nil,
		flag(func(f *Figures) bool { return f.OverMaxMemory })},
	{"memory_bytes", gauge, "used_memory by category (INFO memory's mem_<category>; clients_replicas is mem_clients_slaves); disjoint: they add up to used_memory_bytes.", []string{"category"},
		counts(func(f *Figures) []Count { return f.Memory })},
	{"replication_buffers_bytes", gauge, "The stream's blocks, backlog and what replicas pin beyond it (mem_total_replication_buffers): memory_bytes' replication_backlog and clients_replicas less their index and client buffers.", nil,
		number(func(f *Figures) int64 { return f.ReplicationBuffers })},
	{"snapshots_on_disk_bytes", gauge, "Snapshots spilled to dir, not in used memory (mem_snapshots_on_disk).", nil,
		number(func(f *Figures) int64 { return f.SnapshotsOnDisk })},
	{"memory_not_counted_for_evict_bytes", gauge, "Used memory maxmemory does not count: the stream beyond the backlog, free blocks, compressed links' encoders (mem_not_counted_for_evict).", nil,
		number(func(f *Figures) int64 { return f.MemoryNotCountedForEvict })},
	{"memory_counted_for_evict_bytes", gauge, "Used memory maxmemory counts (mem_counted_for_evict).", nil,
		number(func(f *Figures) int64 { return f.MemoryCountedForEvict })},
}

// histogramSpec is one replproxy_ histogram: its name after the prefix,
// help, its one label, and its series in the Figures, one per label value.
// Named as metricSpecs are (no _total: a histogram's _count and _sum
// series are Prometheus's own).
type histogramSpec struct {
	name   string
	help   string
	labels []string
	series func(f *Figures) []Histogram
}

// histogramSpecs lists every replproxy_ histogram. Read-only.
var histogramSpecs = []histogramSpec{
	{"relay_delay_seconds", "Time from a stream byte's arrival from the primary to its write to a replica's socket, observed once per write for the oldest byte in it, by where the write came from: inline (the producer sending to caught-up replicas), loop (a replica's write loop, from memory), log (from the stream log).", []string{"path"},
		func(f *Figures) []Histogram { return f.RelayDelays }},
}

// number is a figure of one series without labels.
func number[T int64 | float64](get func(*Figures) T) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) { put(float64(get(f))) }
}

// flag is a condition as one series without labels: 1 when it holds, else 0.
func flag(get func(*Figures) bool) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) { put(float64(b2i(get(f)))) }
}

// optional is a figure of one series without labels, absent when its owner
// does not know it (ok false).
func optional(get func(*Figures) (v int64, ok bool)) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		if v, ok := get(f); ok {
			put(float64(v))
		}
	}
}

// counts is a labelled family: one series per Count, labelled with its Label.
func counts(get func(*Figures) []Count) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		for _, x := range get(f) {
			put(float64(x.Value), x.Label)
		}
	}
}

// oneOf is a state: one series per state it can name, labelled with it, 1
// for the current one and 0 for the others.
func oneOf(get func(*Figures) (current string, all []string)) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		current, all := get(f)
		for _, state := range all {
			put(float64(b2i(state == current)), state)
		}
	}
}

// replicaState is replica_state: oneOf for each replica, under its
// replicaLabels.
func replicaState(f *Figures, put putFunc) {
	for _, r := range f.Replicas {
		for _, state := range f.ReplicaStates {
			put(float64(b2i(state == r.State)), r.IP, r.Port, state)
		}
	}
}

// ofReplicaLag is a figure of each replica that has acknowledged an offset
// (Replica.HasLag), under its replicaLabels.
func ofReplicaLag[T int64 | float64](get func(*Replica) T) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		for i := range f.Replicas {
			if r := &f.Replicas[i]; r.HasLag {
				put(float64(get(r)), r.IP, r.Port)
			}
		}
	}
}

// ofReplica is a figure of every replica, under its replicaLabels.
func ofReplica(get func(*Replica) float64) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		for i := range f.Replicas {
			r := &f.Replicas[i]
			put(get(r), r.IP, r.Port)
		}
	}
}

// ofReplicaLink is a figure of each replica that is a downstream proxy
// (Replica.Link), under its replicaLabels.
func ofReplicaLink[T int64 | float64](get func(*ReplicaLink) T) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		for _, r := range f.Replicas {
			if r.Link != nil {
				put(float64(get(r.Link)), r.IP, r.Port)
			}
		}
	}
}

// ofSnapshot is a figure of the newest snapshot in memory, absent when
// there is none.
func ofSnapshot(get func(*Snapshot) int64) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		if f.Snapshot != nil {
			put(float64(get(f.Snapshot)))
		}
	}
}

// inLog is a figure of the stream log, absent while it is not open.
func inLog[T int64 | float64](get func(*Log) T) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		if f.Log != nil {
			put(float64(get(f.Log)))
		}
	}
}

// lastFsyncAge is repl_log_last_fsync_age_seconds: inLog, and absent before
// the log's first fsync too.
func lastFsyncAge(f *Figures, put putFunc) {
	if l := f.Log; l != nil && l.LastFsyncAgeSeconds >= 0 {
		put(float64(l.LastFsyncAgeSeconds))
	}
}

// ofDiskSnapshot is a figure of the snapshot on disk, absent when there is
// none.
func ofDiskSnapshot(get func(*DiskSnapshot) int64) func(*Figures, putFunc) {
	return func(f *Figures, put putFunc) {
		if f.SnapshotOnDisk != nil {
			put(float64(get(f.SnapshotOnDisk)))
		}
	}
}

// A collector renders the Figures its owner reads at scrape time; it holds
// no value of its own.
type collector struct {
	figures func() Figures
	descs   []*prometheus.Desc // metricSpecs' descriptions, in its order
	hdescs  []*prometheus.Desc // histogramSpecs', in its order
}

func newCollector(figures func() Figures) *collector {
	c := &collector{figures: figures, descs: make([]*prometheus.Desc, len(metricSpecs)),
		hdescs: make([]*prometheus.Desc, len(histogramSpecs))}
	for i, m := range metricSpecs {
		c.descs[i] = prometheus.NewDesc("replproxy_"+m.name, m.help, m.labels, nil)
	}
	for i, h := range histogramSpecs {
		c.hdescs[i] = prometheus.NewDesc("replproxy_"+h.name, h.help, h.labels, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	for _, d := range c.hdescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one call of the figures function,
// each metric's series rendered from it.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	f := c.figures()
	for i, m := range metricSpecs {
		desc := c.descs[i]
		m.series(&f, func(v float64, labelValues ...string) {
			ch <- prometheus.MustNewConstMetric(desc, m.kind, v, labelValues...)
		})
	}
	for i, h := range histogramSpecs {
		for _, x := range h.series(&f) {
			buckets := make(map[float64]uint64, len(x.Bounds))
			for j, b := range x.Bounds {
				buckets[b] = uint64(x.Counts[j])
			}
			ch <- prometheus.MustNewConstHistogram(c.hdescs[i], uint64(x.Count), x.Sum, buckets, x.Label)
		}
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

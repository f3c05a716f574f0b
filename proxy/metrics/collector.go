package metrics

import "github.com/prometheus/client_golang/prometheus"

// metricSpec is one replproxy_ metric: its name after the prefix, type,
// help (naming the INFO field it mirrors) and label names.
type metricSpec struct {
	name   string
	kind   prometheus.ValueType
	help   string
	labels []string
}

const (
	gauge   = prometheus.GaugeValue
	counter = prometheus.CounterValue
)

// replicaLabels identify a replica's series: the address and listening
// port it announced, as redis_exporter's slave_ip and slave_port do, so that
// a replica that reconnects continues its series.
var replicaLabels = []string{"replica_ip", "replica_port"}

// metricSpecs lists every replproxy_ metric. Names follow Prometheus's
// rules: the unit as a suffix in base units (_bytes, _seconds; an offset is
// a position in bytes), _total on counters and only there, replica_ never
// slave_, and the series of a labelled family add up to a meaningful whole
// (memory_bytes to used_memory_bytes). README's metrics table lists them
// with the names they replaced. Read-only.
var metricSpecs = []metricSpec{
	{"build_info", gauge, "1, labelled with the build: replproxy's version (replproxy_version), the VCS revision and the Go version (go_version).", []string{"version", "revision", "goversion"}},

	// The upstream link (INFO replication and proxy).
	{"upstream_link_up", gauge, "1 when the upstream link is streaming (master_link_status:up).", nil},
	{"upstream_link_state", gauge, "1 for the upstream link's current state (upstream_link_state), 0 for the others.", []string{"state"}},
	{"upstream_last_io_seconds", gauge, "Seconds since the last byte from the primary (master_last_io_seconds_ago); absent when the link is not connected or syncing.", nil},
	{"upstream_link_down_seconds", gauge, "Seconds the link has been down (master_link_down_since_seconds); absent while it is up or if it never was.", nil},
	{"upstream_connects_total", counter, "Connections made to the primary (upstream_connects).", nil},
	{"upstream_syncs_total", counter, "Syncs with the primary by type, full (upstream_full_syncs) or partial (upstream_partial_syncs).", []string{"type"}},
	{"upstream_link_failures_total", counter, "Link attempts or links that ended with an error (upstream_link_failures).", nil},
	{"upstream_rdb_bytes_total", counter, "RDB payload bytes received from the primary (upstream_rdb_bytes).", nil},
	{"upstream_checksum_failures_total", counter, "Snapshots whose CRC64 did not match (upstream_checksum_failures).", nil},
	{"upstream_stream_errors_total", counter, "Links dropped for stream bytes the scanner refused (upstream_stream_errors).", nil},
	{"upstream_query_buffer_limit_drops_total", counter, "Links dropped for unpublished stream bytes over master-query-buffer-limit (upstream_query_buffer_limit_drops).", nil},
	{"upstream_link_compressed", gauge, "1 while the main upstream link is compressed (upstream_link compression=zstd), else 0.", nil},
	{"upstream_link_raw_bytes_total", counter, "Bytes the main upstream link's compressed sessions decompressed to (upstream_link raw_bytes).", nil},
	{"upstream_link_wire_bytes_total", counter, "Bytes the main upstream link's compressed sessions received, chunk headers included (upstream_link wire_bytes).", nil},
	{"upstream_link_decompress_cpu_seconds_total", counter, "CPU time spent decompressing the main upstream link (upstream_link cpu_sec).", nil},
	{"upstream_link_corrupt_total", counter, "Upstream links, main or side, ended by corrupt compressed input (link_corrupt_errors).", nil},

	// Offsets and the backlog (INFO replication).
	{"master_repl_offset_bytes", gauge, "Offset of the last byte published to replicas (master_repl_offset).", nil},
	{"upstream_repl_offset_bytes", gauge, "Offset of the last complete command from the primary, what the proxy ACKs (slave_repl_offset).", nil},
	{"upstream_read_repl_offset_bytes", gauge, "Offset of the last byte read from the primary (slave_read_repl_offset).", nil},
	{"repl_backlog_first_byte_offset_bytes", gauge, "First offset the backlog holds (repl_backlog_first_byte_offset).", nil},
	{"repl_backlog_histlen_bytes", gauge, "Bytes the backlog holds (repl_backlog_histlen).", nil},
	{"stream_generation", gauge, "Stream generations: upstream full resyncs since start (stream_generation).", nil},

	// Replicas (INFO replication's slaveN lines).
	{"connected_replicas", gauge, "Replicas connected (connected_slaves).", nil},
	{"replica_state", gauge, "1 for the replica's current sync state (slaveN state: wait_bgsave, send_bulk, online), 0 for the others.", []string{"replica_ip", "replica_port", "state"}},
	{"replica_offset_bytes", gauge, "Highest offset the replica has acknowledged (slaveN offset); absent until it is online and has acknowledged one.", replicaLabels},
	{"replica_lag_seconds", gauge, "Seconds since the replica's last ACK (slaveN lag); absent until it is online and has acknowledged an offset.", replicaLabels},
	{"replica_lag_bytes", gauge, "master_repl_offset minus the replica's acknowledged offset; absent until it is online and has acknowledged one.", replicaLabels},
	{"replica_link_raw_bytes_total", counter, "Bytes sent to a downstream proxy before compression (linkN raw_bytes); only for replicas that are proxies.", replicaLabels},
	{"replica_link_wire_bytes_total", counter, "Bytes sent to a downstream proxy on the wire, chunk headers included; equal to raw on a plain link (linkN wire_bytes).", replicaLabels},
	{"replica_link_compress_cpu_seconds_total", counter, "CPU time spent compressing a downstream proxy's link (linkN cpu_sec).", replicaLabels},
	{"replica_link_throttled_seconds_total", counter, "Seconds a downstream proxy's full-sync payloads were held back by repl-link-sync-rate-limit on its connection (linkN throttled_ms); only for replicas that are proxies.", replicaLabels},
	{"link_sync_rate_limit_bytes", gauge, "repl-link-sync-rate-limit: the bytes per second a full-sync payload to a downstream proxy may take of its link; 0 is unlimited (repl_link_sync_rate_limit).", nil},
	{"replicas_dropped_total", counter, "Replicas disconnected by a limit or timeout (replicas_dropped).", nil},
	{"replicas_closed_total", counter, "Replicas closed, by reason (replicas_closed_<reason>).", []string{"reason"}},
	{"clients_closed_total", counter, "Other clients closed, by reason (clients_closed_<reason>).", []string{"reason"}},

	// Downstream syncs and traffic (INFO stats).
	{"full_syncs_total", counter, "Full syncs served to replicas by reason (sync_full_<reason>); they add up to sync_full.", []string{"reason"}},
	{"syncs_total", counter, "Syncs served to replicas by result: full (sync_full), partial_ok (sync_partial_ok), partial_err (sync_partial_err).", []string{"result"}},
	{"repl_input_bytes_total", counter, "Bytes received from the primary (total_net_repl_input_bytes).", nil},
	{"repl_output_bytes_total", counter, "Bytes sent to replicas (total_net_repl_output_bytes).", nil},
	{"net_input_bytes_total", counter, "Bytes received, replication included (total_net_input_bytes).", nil},
	{"net_output_bytes_total", counter, "Bytes sent, replication included (total_net_output_bytes).", nil},
	{"connections_received_total", counter, "Connections accepted (total_connections_received).", nil},
	{"rejected_connections_total", counter, "Connections refused (rejected_connections).", nil},
	{"commands_processed_total", counter, "Commands processed (total_commands_processed).", nil},
	{"connected_clients", gauge, "Clients connected, replicas included (connected_clients).", nil},
	{"acl_access_denied_auth_total", counter, "Failed AUTH (acl_access_denied_auth).", nil},
	{"tls_connections_received_total", counter, "Connections accepted on tls-port (tls_connections_received).", nil},
	{"tls_handshake_failures_total", counter, "TLS handshakes on tls-port that failed or timed out (tls_handshake_failures).", nil},
	{"client_buffer_limit_disconnections_total", counter, "Clients closed by a buffer limit, query or output (client_query_buffer_limit_disconnections, client_output_buffer_limit_disconnections).", []string{"buffer"}},

	// Snapshots (INFO proxy and stats).
	{"snapshot_size_bytes", gauge, "Size of the newest snapshot in memory (snapshot_size); absent when there is none.", nil},
	{"snapshot_age_seconds", gauge, "Age of the newest snapshot in memory (snapshot_age_seconds); absent when there is none.", nil},
	{"snapshot_offset_bytes", gauge, "Offset the newest snapshot in memory was taken at (snapshot_offset); absent when there is none.", nil},
	{"snapshot_fetches_total", counter, "Side-link snapshot fetches by result, ok (snapshot_fetches) or failed (snapshot_fetch_failures).", []string{"result"}},
	{"snapshot_fetches_by_reason_total", counter, "Completed side-link snapshot fetches (forks on the primary) by why they were started: replica_needed, refresh, backup, filtered (snapshot_fetches_<reason>).", []string{"reason"}},
	{"snapshot_fetch_bytes_total", counter, "Payload bytes received by snapshot fetches (snapshot_fetch_bytes).", nil},
	{"evicted_snapshots_total", counter, "Snapshots evicted: spilled to disk or dropped (evicted_snapshots).", nil},
	{"evicted_bytes_total", counter, "Memory of the evicted snapshots (evicted_bytes).", nil},

	// The stream log and the snapshot on disk (INFO persistence).
	{"repl_log_enabled", gauge, "1 when repl-log-size is above 0 (repl_log_enabled).", nil},
	{"repl_log_up", gauge, "1 while the stream log follows the stream (repl_log_status:ok), 0 when it is down or could not be opened.", nil},
	{"repl_log_first_offset_bytes", gauge, "First offset the stream log holds (repl_log_first_offset); absent without a log.", nil},
	{"repl_log_last_offset_bytes", gauge, "Last offset the stream log holds (repl_log_last_offset); absent without a log.", nil},
	{"repl_log_bytes", gauge, "Stream bytes the log holds (repl_log_bytes); absent without a log.", nil},
	{"repl_log_segments", gauge, "Segment files of the log (repl_log_segments); absent without a log.", nil},
	{"repl_log_synced_offset_bytes", gauge, "Last offset made durable by fsync (repl_log_synced_offset); absent without a log.", nil},
	{"repl_log_fsync_lag_bytes", gauge, "Bytes written to the log and not yet fsynced (repl_log_fsync_lag_bytes); absent without a log.", nil},
	{"repl_log_last_fsync_age_seconds", gauge, "Seconds since the log's last fsync (repl_log_last_fsync_age); absent before the first.", nil},
	{"repl_log_lag_bytes", gauge, "Stream bytes published and not yet in the log (repl_log_lag_bytes); absent without a log.", nil},
	{"repl_log_lag_seconds", gauge, "Seconds since the oldest byte not yet in the log was published, at least (repl_log_lag_seconds); absent without a log.", nil},
	{"repl_log_restarts_total", counter, "Restarts of the stream log as a new generation for falling behind by more than the memory window (repl_log_restarts); absent without a log.", nil},
	{"repl_log_errors_total", counter, "Failures that stopped the stream log (repl_log_errors); absent without a log.", nil},
	{"repl_log_partial_syncs_total", counter, "Partial resyncs served from the stream log (repl_log_partial_syncs); absent without a log.", nil},
	{"repl_log_replicas_moved_to_disk_total", counter, "Replicas moved from memory to the stream log for lagging (repl_log_replicas_moved_to_disk); absent without a log.", nil},
	{"repl_log_recovered_bytes", gauge, "Bytes recovery verified at start (repl_log_recovered_bytes); absent without a log.", nil},
	{"repl_log_recovery_cut_bytes", gauge, "Bytes recovery cut at start, damaged or unfinished (repl_log_recovery_cut_bytes); absent without a log.", nil},
	{"snapshot_on_disk", gauge, "1 when a snapshot is on disk, spilled or written for the stream log (repl_snapshot_on_disk).", nil},
	{"snapshot_on_disk_size_bytes", gauge, "Size of the snapshot on disk (repl_snapshot_size); absent when there is none.", nil},
	{"snapshot_on_disk_offset_bytes", gauge, "Offset the snapshot on disk was taken at (repl_snapshot_offset); absent when there is none.", nil},
	{"snapshot_on_disk_age_seconds", gauge, "Age of the snapshot on disk (repl_snapshot_age_seconds); absent when there is none.", nil},

	// Memory (INFO memory, from the same report).
	{"used_memory_bytes", gauge, "Memory the proxy accounts for (used_memory).", nil},
	{"used_memory_peak_bytes", gauge, "Peak of used_memory (used_memory_peak).", nil},
	{"maxmemory_bytes", gauge, "maxmemory; 0 means no limit.", nil},
	{"memory_over_maxmemory", gauge, "1 when used memory is over maxmemory (mem_over_maxmemory).", nil},
	{"memory_bytes", gauge, "used_memory by category (INFO memory's mem_<category>; clients_replicas is mem_clients_slaves); disjoint: they add up to used_memory_bytes.", []string{"category"}},
	{"replication_buffers_bytes", gauge, "The stream's blocks, backlog and what replicas pin beyond it (mem_total_replication_buffers): memory_bytes' replication_backlog and clients_replicas less their index and client buffers.", nil},
	{"snapshots_on_disk_bytes", gauge, "Snapshots spilled to dir, not in used memory (mem_snapshots_on_disk).", nil},
	{"memory_not_counted_for_evict_bytes", gauge, "Used memory maxmemory does not count: the stream beyond the backlog, free blocks, compressed links' encoders (mem_not_counted_for_evict).", nil},
	{"memory_counted_for_evict_bytes", gauge, "Used memory maxmemory counts (mem_counted_for_evict).", nil},
}

// A collector renders the Figures its owner reads at scrape time; it holds
// no value of its own.
type collector struct {
	figures func() Figures
	descs   map[string]*prometheus.Desc
	kinds   map[string]prometheus.ValueType
}

func newCollector(figures func() Figures) *collector {
	c := &collector{figures: figures, descs: map[string]*prometheus.Desc{}, kinds: map[string]prometheus.ValueType{}}
	for _, m := range metricSpecs {
		c.descs[m.name] = prometheus.NewDesc("replproxy_"+m.name, m.help, m.labels, nil)
		c.kinds[m.name] = m.kind
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one call of the figures function,
// rendered.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	f := c.figures()
	emit := func(name string, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], c.kinds[name], float64(v), labels...)
	}
	counts := func(name string, cs []Count) {
		for _, x := range cs {
			emit(name, x.Value, x.Label)
		}
	}

	emit("build_info", 1, f.Version, f.Revision, f.GoVersion)
	emit("upstream_link_up", b2i(f.UpstreamLinkUp))
	for _, state := range f.UpstreamLinkStates {
		emit("upstream_link_state", b2i(state == f.UpstreamLinkState), state)
	}
	if f.HasUpstreamLastIO {
		emit("upstream_last_io_seconds", f.UpstreamLastIOSeconds)
	}
	if f.HasUpstreamLinkDown {
		emit("upstream_link_down_seconds", f.UpstreamLinkDownSeconds)
	}
	emit("upstream_connects_total", f.UpstreamConnects)
	emit("upstream_syncs_total", f.UpstreamFullSyncs, "full")
	emit("upstream_syncs_total", f.UpstreamPartialSyncs, "partial")
	emit("upstream_link_failures_total", f.UpstreamLinkFailures)
	emit("upstream_rdb_bytes_total", f.UpstreamRDBBytes)
	emit("upstream_checksum_failures_total", f.UpstreamChecksumFailures)
	emit("upstream_stream_errors_total", f.UpstreamStreamErrors)
	emit("upstream_query_buffer_limit_drops_total", f.UpstreamQueryBufferLimitDrops)
	emit("upstream_link_compressed", b2i(f.UpstreamLinkCompressed))
	emit("upstream_link_raw_bytes_total", f.UpstreamLinkRawBytes)
	emit("upstream_link_wire_bytes_total", f.UpstreamLinkWireBytes)
	ch <- prometheus.MustNewConstMetric(c.descs["upstream_link_decompress_cpu_seconds_total"], counter, f.UpstreamLinkDecompressCPUSeconds)
	emit("upstream_link_corrupt_total", f.UpstreamLinkCorrupt)

	emit("master_repl_offset_bytes", f.MasterReplOffset)
	emit("upstream_repl_offset_bytes", f.SlaveReplOffset)
	emit("upstream_read_repl_offset_bytes", f.SlaveReadReplOffset)
	emit("repl_backlog_first_byte_offset_bytes", f.BacklogFirstByteOffset)
	emit("repl_backlog_histlen_bytes", f.BacklogHistlen)
	emit("stream_generation", f.StreamGeneration)

	emit("connected_replicas", f.ConnectedReplicas)
	for _, r := range f.Replicas {
		for _, state := range f.ReplicaStates {
			emit("replica_state", b2i(state == r.State), r.IP, r.Port, state)
		}
		if r.HasLag {
			emit("replica_offset_bytes", r.Offset, r.IP, r.Port)
			emit("replica_lag_seconds", r.LagSeconds, r.IP, r.Port)
			emit("replica_lag_bytes", r.LagBytes, r.IP, r.Port)
		}
		if l := r.Link; l != nil {
			emit("replica_link_raw_bytes_total", l.RawBytes, r.IP, r.Port)
			emit("replica_link_wire_bytes_total", l.WireBytes, r.IP, r.Port)
			ch <- prometheus.MustNewConstMetric(c.descs["replica_link_compress_cpu_seconds_total"], counter, l.CompressCPUSeconds, r.IP, r.Port)
			ch <- prometheus.MustNewConstMetric(c.descs["replica_link_throttled_seconds_total"], counter, l.ThrottledSeconds, r.IP, r.Port)
		}
	}
	emit("link_sync_rate_limit_bytes", f.LinkSyncRateLimit)
	emit("replicas_dropped_total", f.ReplicasDropped)
	counts("replicas_closed_total", f.ReplicasClosed)
	counts("clients_closed_total", f.ClientsClosed)

	emit("syncs_total", f.SyncFull, "full")
	emit("syncs_total", f.SyncPartialOK, "partial_ok")
	emit("syncs_total", f.SyncPartialErr, "partial_err")
	counts("full_syncs_total", f.FullSyncs)
	emit("repl_input_bytes_total", f.ReplInputBytes)
	emit("repl_output_bytes_total", f.ReplOutputBytes)
	emit("net_input_bytes_total", f.NetInputBytes)
	emit("net_output_bytes_total", f.NetOutputBytes)
	emit("connections_received_total", f.ConnectionsReceived)
	emit("rejected_connections_total", f.RejectedConnections)
	emit("commands_processed_total", f.CommandsProcessed)
	emit("connected_clients", f.ConnectedClients)
	emit("acl_access_denied_auth_total", f.ACLAccessDeniedAuth)
	emit("tls_connections_received_total", f.TLSConnectionsReceived)
	emit("tls_handshake_failures_total", f.TLSHandshakeFailures)
	emit("client_buffer_limit_disconnections_total", f.QueryBufferLimitDisconnections, "query")
	emit("client_buffer_limit_disconnections_total", f.OutputBufferLimitDisconnections, "output")

	if sn := f.Snapshot; sn != nil {
		emit("snapshot_size_bytes", sn.Size)
		emit("snapshot_age_seconds", sn.AgeSeconds)
		emit("snapshot_offset_bytes", sn.Offset)
	}
	emit("snapshot_fetches_total", f.SnapshotFetches, "ok")
	emit("snapshot_fetches_total", f.SnapshotFetchFailures, "failed")
	counts("snapshot_fetches_by_reason_total", f.SnapshotFetchesByReason)
	emit("snapshot_fetch_bytes_total", f.SnapshotFetchBytes)
	emit("evicted_snapshots_total", f.EvictedSnapshots)
	emit("evicted_bytes_total", f.EvictedBytes)

	emit("repl_log_enabled", b2i(f.LogEnabled))
	emit("repl_log_up", b2i(f.LogUp))
	if l := f.Log; l != nil {
		emit("repl_log_first_offset_bytes", l.First)
		emit("repl_log_last_offset_bytes", l.Last)
		emit("repl_log_bytes", l.Bytes)
		emit("repl_log_segments", l.Segments)
		emit("repl_log_synced_offset_bytes", l.Synced)
		emit("repl_log_fsync_lag_bytes", l.FsyncLagBytes)
		if l.LastFsyncAgeSeconds >= 0 {
			emit("repl_log_last_fsync_age_seconds", l.LastFsyncAgeSeconds)
		}
		emit("repl_log_lag_bytes", l.LagBytes)
		ch <- prometheus.MustNewConstMetric(c.descs["repl_log_lag_seconds"], c.kinds["repl_log_lag_seconds"], l.LagSeconds)
		emit("repl_log_restarts_total", l.Restarts)
		emit("repl_log_errors_total", l.Errors)
		emit("repl_log_partial_syncs_total", l.PartialSyncs)
		emit("repl_log_replicas_moved_to_disk_total", l.ReplicasMovedToDisk)
		emit("repl_log_recovered_bytes", l.RecoveredBytes)
		emit("repl_log_recovery_cut_bytes", l.RecoveryCutBytes)
	}
	emit("snapshot_on_disk", b2i(f.SnapshotOnDisk != nil))
	if sp := f.SnapshotOnDisk; sp != nil {
		emit("snapshot_on_disk_size_bytes", sp.Size)
		emit("snapshot_on_disk_offset_bytes", sp.Offset)
		emit("snapshot_on_disk_age_seconds", sp.AgeSeconds)
	}

	emit("used_memory_bytes", f.UsedMemory)
	emit("used_memory_peak_bytes", f.UsedMemoryPeak)
	emit("maxmemory_bytes", f.MaxMemory)
	emit("memory_over_maxmemory", b2i(f.OverMaxMemory))
	counts("memory_bytes", f.Memory)
	emit("replication_buffers_bytes", f.ReplicationBuffers)
	emit("snapshots_on_disk_bytes", f.SnapshotsOnDisk)
	emit("memory_not_counted_for_evict_bytes", f.MemoryNotCountedForEvict)
	emit("memory_counted_for_evict_bytes", f.MemoryCountedForEvict)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

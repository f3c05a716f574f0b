package proxy

import (
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
)

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

// metricSpecs lists every replproxy_ metric. Read-only.
var metricSpecs = []metricSpec{
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

	// Offsets and the backlog (INFO replication).
	{"master_repl_offset", gauge, "Offset of the last byte published to replicas (master_repl_offset).", nil},
	{"slave_repl_offset", gauge, "Offset of the last complete command from the primary, what the proxy ACKs (slave_repl_offset).", nil},
	{"slave_read_repl_offset", gauge, "Offset of the last byte read from the primary (slave_read_repl_offset).", nil},
	{"repl_backlog_first_byte_offset", gauge, "First offset the backlog holds (repl_backlog_first_byte_offset).", nil},
	{"repl_backlog_histlen", gauge, "Bytes the backlog holds (repl_backlog_histlen).", nil},
	{"stream_generation", gauge, "Stream generations: upstream full resyncs since start (stream_generation).", nil},

	// Replicas (INFO replication's slaveN lines).
	{"connected_replicas", gauge, "Replicas connected (connected_slaves).", nil},
	{"replica_offset", gauge, "Highest offset the replica has acknowledged (slaveN offset).", []string{"id", "addr"}},
	{"replica_lag_seconds", gauge, "Seconds since the replica's last ACK, 0 until it is online (slaveN lag).", []string{"id", "addr"}},
	{"replica_lag_bytes", gauge, "master_repl_offset minus the replica's acknowledged offset.", []string{"id", "addr"}},
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
	{"snapshot_offset", gauge, "Offset the newest snapshot in memory was taken at (snapshot_offset); absent when there is none.", nil},
	{"snapshot_fetches_total", counter, "Side-link snapshot fetches by result, ok (snapshot_fetches) or failed (snapshot_fetch_failures).", []string{"result"}},
	{"snapshot_fetches_by_reason_total", counter, "Completed side-link snapshot fetches (forks on the primary) by why they were started: replica_needed, refresh (snapshot_fetches_<reason>).", []string{"reason"}},
	{"snapshot_fetch_bytes_total", counter, "Payload bytes received by snapshot fetches (snapshot_fetch_bytes).", nil},
	{"evicted_snapshots_total", counter, "Snapshots evicted: spilled to disk or dropped (evicted_snapshots).", nil},
	{"evicted_bytes_total", counter, "Memory of the evicted snapshots (evicted_bytes).", nil},

	// The stream log and the snapshot on disk (INFO persistence).
	{"repl_log_enabled", gauge, "1 when repl-log-size is above 0 (repl_log_enabled).", nil},
	{"repl_log_up", gauge, "1 while the stream log follows the stream (repl_log_status:ok), 0 when it is down or could not be opened.", nil},
	{"repl_log_first_offset", gauge, "First offset the stream log holds (repl_log_first_offset); absent without a log.", nil},
	{"repl_log_last_offset", gauge, "Last offset the stream log holds (repl_log_last_offset); absent without a log.", nil},
	{"repl_log_bytes", gauge, "Stream bytes the log holds (repl_log_bytes); absent without a log.", nil},
	{"repl_log_segments", gauge, "Segment files of the log (repl_log_segments); absent without a log.", nil},
	{"repl_log_synced_offset", gauge, "Last offset made durable by fsync (repl_log_synced_offset); absent without a log.", nil},
	{"repl_log_fsync_lag_bytes", gauge, "Bytes written to the log and not yet fsynced (repl_log_fsync_lag_bytes); absent without a log.", nil},
	{"repl_log_last_fsync_age_seconds", gauge, "Seconds since the log's last fsync (repl_log_last_fsync_age); absent before the first.", nil},
	{"repl_log_errors_total", counter, "Failures that stopped the stream log (repl_log_errors); absent without a log.", nil},
	{"repl_log_partial_syncs_total", counter, "Partial resyncs served from the stream log (repl_log_partial_syncs); absent without a log.", nil},
	{"repl_log_replicas_moved_to_disk_total", counter, "Replicas moved from memory to the stream log for lagging (repl_log_replicas_moved_to_disk); absent without a log.", nil},
	{"repl_log_recovered_bytes", gauge, "Bytes recovery verified at start (repl_log_recovered_bytes); absent without a log.", nil},
	{"repl_log_recovery_cut_bytes", gauge, "Bytes recovery cut at start, damaged or unfinished (repl_log_recovery_cut_bytes); absent without a log.", nil},
	{"snapshot_on_disk", gauge, "1 when a snapshot is on disk, spilled or written for the stream log (repl_snapshot_on_disk).", nil},
	{"snapshot_on_disk_size_bytes", gauge, "Size of the snapshot on disk (repl_snapshot_size); absent when there is none.", nil},
	{"snapshot_on_disk_offset", gauge, "Offset the snapshot on disk was taken at (repl_snapshot_offset); absent when there is none.", nil},
	{"snapshot_on_disk_age_seconds", gauge, "Age of the snapshot on disk (repl_snapshot_age_seconds); absent when there is none.", nil},

	// Memory (INFO memory, from the same report).
	{"used_memory_bytes", gauge, "Memory the proxy accounts for (used_memory).", nil},
	{"used_memory_peak_bytes", gauge, "Peak of used_memory (used_memory_peak).", nil},
	{"maxmemory_bytes", gauge, "maxmemory; 0 means no limit.", nil},
	{"memory_over_maxmemory", gauge, "1 when used memory is over maxmemory (mem_over_maxmemory).", nil},
	{"memory_bytes", gauge, "INFO memory's mem_<category> figures; categories overlap (total_replication_buffers holds replication_backlog and clients_slaves).", []string{"category"}},
}

// A collector reads the server's figures at scrape time; it holds no value
// of its own.
type collector struct {
	s     *Server
	descs map[string]*prometheus.Desc
	kinds map[string]prometheus.ValueType
}

func newCollector(s *Server) *collector {
	c := &collector{s: s, descs: map[string]*prometheus.Desc{}, kinds: map[string]prometheus.ValueType{}}
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

// Collect implements prometheus.Collector, reading what INFO reads.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	emit := func(name string, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], c.kinds[name], float64(v), labels...)
	}
	now := time.Now()
	st := &s.stats

	u := s.up.Status()
	emit("upstream_link_up", int64(b2i(u.State == upstream.StateConnected)))
	for state := upstream.StateNone; state <= upstream.StateConnected; state++ {
		emit("upstream_link_state", int64(b2i(u.State == state)), state.String())
	}
	if u.State == upstream.StateConnected || u.State == upstream.StateSync {
		emit("upstream_last_io_seconds", int64(now.Sub(time.Unix(0, u.LastIO))/time.Second))
	}
	if u.State != upstream.StateConnected && u.DownSince != 0 {
		emit("upstream_link_down_seconds", int64(now.Sub(time.Unix(0, u.DownSince))/time.Second))
	}
	emit("upstream_connects_total", st.upstreamConnects.Load())
	emit("upstream_syncs_total", st.upstreamFullSyncs.Load(), "full")
	emit("upstream_syncs_total", st.upstreamPartialSyncs.Load(), "partial")
	emit("upstream_link_failures_total", st.upstreamLinkFailures.Load())
	emit("upstream_rdb_bytes_total", st.upstreamRDBBytes.Load())
	emit("upstream_checksum_failures_total", st.upstreamChecksumFails.Load())
	emit("upstream_stream_errors_total", st.upstreamStreamErrors.Load())
	emit("upstream_query_buffer_limit_drops_total", st.upstreamQueryLimits.Load())

	stream := s.hist.Stream()
	offset := stream.Offset()
	emit("master_repl_offset", offset)
	emit("slave_repl_offset", u.Applied)
	emit("slave_read_repl_offset", stream.Filled())
	first, histlen := stream.Backlog()
	if !s.identity().History {
		first, histlen = 0, 0 // as INFO shows them
	}
	emit("repl_backlog_first_byte_offset", first)
	emit("repl_backlog_histlen", histlen)
	emit("stream_generation", int64(stream.Generation()))

	replicas := s.clients.replicaList()
	emit("connected_replicas", int64(len(replicas)))
	for _, r := range replicas {
		id, addr := strconv.FormatInt(r.c.id, 10), net.JoinHostPort(r.ip, strconv.Itoa(r.hs.port))
		ack := r.ackOff.Load()
		lag := int64(0)
		if r.State() == replicaOnline {
			lag = int64(now.Sub(time.Unix(0, r.ackTime.Load())) / time.Second)
		}
		emit("replica_offset", ack, id, addr)
		emit("replica_lag_seconds", lag, id, addr)
		emit("replica_lag_bytes", max(offset-ack, 0), id, addr)
	}
	emit("replicas_dropped_total", st.replicasDropped.Load())
	for r := closeNone; r < numCloseReasons; r++ {
		if r.appliesToReplicas() {
			emit("replicas_closed_total", st.replicaCloses[r].Load(), r.String())
		}
		if r.appliesToClients() {
			emit("clients_closed_total", st.clientCloses[r].Load(), r.String())
		}
	}

	emit("syncs_total", st.syncFull.Load(), "full")
	emit("syncs_total", st.syncPartialOK.Load(), "partial_ok")
	emit("syncs_total", st.syncPartialErr.Load(), "partial_err")
	for r := history.PartialAccepted + 1; r < history.NumFullSyncReasons; r++ {
		emit("full_syncs_total", st.fullSyncs[r].Load(), r.String())
	}
	emit("repl_input_bytes_total", st.replInputBytes.Load())
	emit("repl_output_bytes_total", st.replOutputBytes.Load())
	emit("net_input_bytes_total", st.netInputBytes.Load()+st.replInputBytes.Load())
	emit("net_output_bytes_total", st.netOutputBytes.Load()+st.replOutputBytes.Load())
	emit("connections_received_total", st.connectionsReceived.Load())
	emit("rejected_connections_total", st.rejectedConnections.Load())
	emit("commands_processed_total", st.commandsProcessed.Load())
	emit("connected_clients", int64(s.clients.count()))
	emit("acl_access_denied_auth_total", st.aclDeniedAuth.Load())
	emit("tls_connections_received_total", st.tlsConnectionsReceived.Load())
	emit("tls_handshake_failures_total", st.tlsHandshakeFailures.Load())
	emit("client_buffer_limit_disconnections_total", st.queryLimitDisconnects.Load(), "query")
	emit("client_buffer_limit_disconnections_total", st.outputLimitDisconnects.Load(), "output")

	if sn := s.Snapshot(); sn != nil {
		emit("snapshot_size_bytes", sn.Size())
		emit("snapshot_age_seconds", int64(now.Sub(sn.Created())/time.Second))
		emit("snapshot_offset", sn.Offset())
	}
	emit("snapshot_fetches_total", st.snapshotFetches.Load(), "ok")
	emit("snapshot_fetches_total", st.snapshotFetchFailures.Load(), "failed")
	for r := history.FetchReason(0); r < history.NumFetchReasons; r++ {
		emit("snapshot_fetches_by_reason_total", st.snapshotFetchReasons[r].Load(), r.String())
	}
	emit("snapshot_fetch_bytes_total", st.snapshotFetchBytes.Load())
	emit("evicted_snapshots_total", st.evictedSnapshots.Load())
	emit("evicted_bytes_total", st.evictedBytes.Load())

	lr := s.logReport(now)
	emit("repl_log_enabled", int64(b2i(lr.enabled)))
	emit("repl_log_up", int64(b2i(lr.open && lr.live)))
	if lr.open {
		emit("repl_log_first_offset", lr.stats.First)
		emit("repl_log_last_offset", lr.stats.Last)
		emit("repl_log_bytes", lr.stats.Bytes)
		emit("repl_log_segments", int64(lr.stats.Segments))
		emit("repl_log_synced_offset", lr.stats.Synced)
		emit("repl_log_fsync_lag_bytes", lr.fsyncLag())
		if lr.syncAge >= 0 {
			emit("repl_log_last_fsync_age_seconds", lr.syncAge)
		}
		emit("repl_log_errors_total", lr.errors)
		emit("repl_log_partial_syncs_total", lr.partialSyncs)
		emit("repl_log_replicas_moved_to_disk_total", lr.movedToDisk)
		emit("repl_log_recovered_bytes", lr.recovered)
		emit("repl_log_recovery_cut_bytes", lr.cut)
	}
	sp := s.hist.SpilledSnapshot()
	emit("snapshot_on_disk", int64(b2i(sp != nil)))
	if sp != nil {
		emit("snapshot_on_disk_size_bytes", sp.Size)
		emit("snapshot_on_disk_offset", sp.Offset)
		emit("snapshot_on_disk_age_seconds", int64(now.Sub(sp.Created)/time.Second))
	}

	rep := s.memoryReport()
	emit("used_memory_bytes", rep.UsedMemory)
	emit("used_memory_peak_bytes", s.peakMemory.Load())
	emit("maxmemory_bytes", s.config().MaxMemory)
	emit("memory_over_maxmemory", int64(b2i(s.overMaxMemory.Load())))
	for _, m := range []struct {
		category string
		v        int64
	}{
		{"replication_backlog", rep.ReplicationBacklog},
		{"clients_slaves", rep.ClientsSlaves},
		{"clients_normal", rep.ClientsNormal},
		{"total_replication_buffers", rep.TotalReplicationBuffers},
		{"snapshots", rep.Snapshots},
		{"snapshots_on_disk", rep.SnapshotsOnDisk},
		{"free_blocks", rep.FreeBlocks},
		{"runtime", rep.Runtime},
		{"repl_log_index", rep.LogIndex},
		{"not_counted_for_evict", rep.NotCountedForEvict},
		{"counted_for_evict", rep.Counted},
	} {
		emit("memory_bytes", m.v, m.category)
	}
}

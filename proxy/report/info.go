package report

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/sysmem"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// InfoSections are INFO's sections in the order redis-server prints them;
// the proxy section is replproxy's own. "default" is all of them.
var InfoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "proxy", "links", "keyspace"}

// infoWriter writes "key:value" lines.
type infoWriter struct{ b *strings.Builder }

func (w infoWriter) kv(key string, value any) {
	fmt.Fprintf(w.b, "%s:%v\r\n", key, value)
}

// WriteInfoSection writes one section of INFO, named as in InfoSections,
// from r; a name not there writes nothing. What only INFO shows and costs
// a system call (the process's memory and CPU, its executable) is read
// here, for the section that shows it.
func (r *Report) WriteInfoSection(b *strings.Builder, section string) {
	w := infoWriter{b}
	switch section {
	case "server":
		writeInfoServer(w, r)
	case "clients":
		b.WriteString("# Clients\r\n")
		w.kv("connected_clients", r.Clients)
		w.kv("maxclients", r.Config.MaxClients)
		w.kv("blocked_clients", 0)
	case "memory":
		writeInfoMemory(w, r)
	case "persistence":
		b.WriteString("# Persistence\r\n")
		w.kv("loading", 0)
		w.kv("async_loading", 0)
		w.kv("rdb_bgsave_in_progress", 0)
		w.kv("aof_enabled", 0)
		writeInfoLog(w, r.Log)
		writeInfoSnapshotOnDisk(w, r.OnDisk)
		w.kv("repl_snapshot_stream_since", r.StreamSince)
	case "stats":
		writeInfoStats(w, &r.Stats)
	case "replication":
		writeInfoReplication(w, r)
	case "cpu":
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.WriteString("# CPU\r\n")
		w.kv("used_cpu_sys", fmt.Sprintf("%.6f", time.Duration(ru.Stime.Nano()).Seconds()))
		w.kv("used_cpu_user", fmt.Sprintf("%.6f", time.Duration(ru.Utime.Nano()).Seconds()))
	case "proxy":
		writeInfoProxy(w, r)
	case "links":
		writeInfoLinks(w, r)
	case "keyspace":
		b.WriteString("# Keyspace\r\n")
	}
}

// writeInfoServer writes the Server section; tcp_port is the configured
// port, as Redis shows it.
func writeInfoServer(w infoWriter, r *Report) {
	p := &r.Process
	w.b.WriteString("# Server\r\n")
	w.kv("redis_version", p.RedisVersion)
	w.kv("replproxy_version", p.Version)
	w.kv("redis_mode", "standalone")
	w.kv("os", runtime.GOOS+" "+runtime.GOARCH)
	w.kv("arch_bits", 64)
	w.kv("go_version", runtime.Version())
	w.kv("process_id", p.PID)
	w.kv("run_id", p.RunID)
	w.kv("tcp_port", r.Config.Port)
	up := r.Now.Sub(p.Started)
	w.kv("server_time_usec", r.Now.UnixMicro())
	w.kv("uptime_in_seconds", int64(up/time.Second))
	w.kv("uptime_in_days", int64(up/(24*time.Hour)))
	exe, _ := os.Executable()
	w.kv("executable", exe)
	w.kv("config_file", p.ConfigFile)
}

func writeInfoMemory(w infoWriter, r *Report) {
	rep := r.Mem
	cfg := r.Config
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ps := r.Pool
	w.b.WriteString("# Memory\r\n")
	w.kv("used_memory", rep.UsedMemory)
	w.kv("used_memory_human", humanBytes(rep.UsedMemory))
	rss := sysmem.RSS()
	w.kv("used_memory_rss", rss)
	w.kv("used_memory_rss_human", humanBytes(rss))
	w.kv("used_memory_peak", r.PeakMemory)
	w.kv("used_memory_peak_human", humanBytes(r.PeakMemory))
	w.kv("maxmemory", cfg.MaxMemory)
	w.kv("maxmemory_human", humanBytes(cfg.MaxMemory))
	w.kv("maxmemory_policy", cfg.MaxMemoryPolicy)
	w.kv("mem_fragmentation_ratio", fmt.Sprintf("%.2f", float64(rss)/float64(max(rep.UsedMemory, 1))))
	w.kv("mem_fragmentation_bytes", rss-rep.UsedMemory)
	w.kv("mem_not_counted_for_evict", rep.NotCountedForEvict)
	w.kv("mem_counted_for_evict", rep.Counted)
	w.kv("mem_over_maxmemory", b2i(r.OverMaxMemory))
	w.kv("mem_replication_backlog", rep.ReplicationBacklog)
	w.kv("mem_total_replication_buffers", rep.TotalReplicationBuffers)
	w.kv("mem_clients_slaves", rep.ClientsSlaves)
	w.kv("mem_clients_normal", rep.ClientsNormal)
	w.kv("mem_snapshots", rep.Snapshots)
	w.kv("mem_snapshots_on_disk", rep.SnapshotsOnDisk)
	w.kv("mem_free_blocks", rep.FreeBlocks)
	w.kv("mem_free_blocks_count", ps.FreeBlocks)
	w.kv("mem_runtime", rep.Runtime)
	w.kv("mem_repl_log_index", rep.LogIndex)
	w.kv("mem_link_compression", rep.LinkCompression)
	w.kv("go_heap_alloc", ms.HeapAlloc)
	w.kv("go_heap_sys", ms.HeapSys)
	w.kv("go_gc_cycles", ms.NumGC)
	w.kv("go_memory_limit", debug.SetMemoryLimit(-1))
}

// writeInfoLog writes the stream log's fields of INFO persistence.
func writeInfoLog(w infoWriter, l Log) {
	w.kv("repl_log_enabled", b2i(l.Enabled))
	if !l.Open {
		if l.OpenErr != "" {
			w.kv("repl_log_status", "failed")
			w.kv("repl_log_last_error", l.OpenErr)
		}
		return
	}
	status := "ok"
	if !l.Live {
		status = "down"
	}
	st := l.Stats
	w.kv("repl_log_status", status)
	w.kv("repl_log_size", l.Size)
	w.kv("repl_log_fsync", l.Fsync)
	w.kv("repl_log_window", l.Window)
	w.kv("repl_log_replid", l.ReplID)
	w.kv("repl_log_first_offset", st.First)
	w.kv("repl_log_last_offset", st.Last)
	w.kv("repl_log_bytes", st.Bytes)
	w.kv("repl_log_segments", st.Segments)
	w.kv("repl_log_synced_offset", st.Synced)
	w.kv("repl_log_fsync_lag_bytes", l.fsyncLag())
	w.kv("repl_log_last_fsync_age", l.SyncAge)
	w.kv("repl_log_lag_bytes", l.LagBytes)
	w.kv("repl_log_lag_seconds", fmt.Sprintf("%.3f", l.LagSeconds))
	w.kv("repl_log_restarts", l.Restarts)
	w.kv("repl_log_errors", l.Errors)
	w.kv("repl_log_last_error", l.LastErr)
	w.kv("repl_log_partial_syncs", l.PartialSyncs)
	w.kv("repl_log_replicas_moved_to_disk", l.MovedToDisk)
	w.kv("repl_log_recovered_bytes", l.Recovered)
	w.kv("repl_log_recovery_cut_bytes", l.Cut)
}

// writeInfoSnapshotOnDisk writes INFO persistence's fields of the snapshot on
// disk (a spilled one, or one written for the stream log).
func writeInfoSnapshotOnDisk(w infoWriter, sp *DiskSnapshot) {
	w.kv("repl_snapshot_on_disk", b2i(sp != nil))
	if sp == nil {
		return
	}
	w.kv("repl_snapshot_replid", sp.ReplID)
	w.kv("repl_snapshot_offset", sp.Offset)
	w.kv("repl_snapshot_size", sp.Size)
	w.kv("repl_snapshot_age_seconds", sp.Age)
}

func writeInfoStats(w infoWriter, st *Counters) {
	w.b.WriteString("# Stats\r\n")
	w.kv("total_connections_received", st.ConnectionsReceived)
	w.kv("total_commands_processed", st.CommandsProcessed)
	w.kv("total_net_input_bytes", st.NetInputBytes)
	w.kv("total_net_output_bytes", st.NetOutputBytes)
	w.kv("total_net_repl_input_bytes", st.ReplInputBytes)
	w.kv("total_net_repl_output_bytes", st.ReplOutputBytes)
	w.kv("rejected_connections", st.RejectedConnections)
	w.kv("sync_full", st.SyncFull)
	w.kv("sync_partial_ok", st.SyncPartialOK)
	w.kv("sync_partial_err", st.SyncPartialErr)
	w.kv("evicted_keys", 0)
	w.kv("evicted_snapshots", st.EvictedSnapshots)
	w.kv("evicted_bytes", st.EvictedBytes)
	w.kv("client_query_buffer_limit_disconnections", st.QueryLimitDisconnects)
	w.kv("client_output_buffer_limit_disconnections", st.OutputLimitDisconnects)
	w.kv("acl_access_denied_auth", st.ACLDeniedAuth)
	w.kv("acl_access_denied_cmd", st.ACLDeniedCmd)
	w.kv("acl_access_denied_key", st.ACLDeniedKey)
	w.kv("acl_access_denied_channel", st.ACLDeniedChannel)
}

func writeInfoReplication(w infoWriter, r *Report) {
	cfg := r.Config
	id := r.ID
	u := r.Up
	w.b.WriteString("# Replication\r\n")
	if cfg.MasterHost == "" {
		w.kv("role", "master")
	} else {
		st := u.State
		w.kv("role", "slave")
		w.kv("master_host", cfg.MasterHost)
		w.kv("master_port", cfg.MasterPort)
		if st == upstream.StateConnected {
			w.kv("master_link_status", "up")
		} else {
			w.kv("master_link_status", "down")
		}
		lastIO, _ := r.upstreamLastIO()
		w.kv("master_last_io_seconds_ago", lastIO)
		inSync := st == upstream.StateSync
		w.kv("master_sync_in_progress", b2i(inSync))
		w.kv("slave_read_repl_offset", r.Filled)
		w.kv("slave_repl_offset", u.Applied)
		if inSync {
			total, read := u.SyncTotal, u.SyncRead
			w.kv("master_sync_total_bytes", total)
			w.kv("master_sync_read_bytes", read)
			left, perc := int64(-1), 0.0
			if total > 0 {
				left = total - read
				perc = float64(read) * 100 / float64(total)
			}
			w.kv("master_sync_left_bytes", left)
			w.kv("master_sync_perc", fmt.Sprintf("%.2f", perc))
			w.kv("master_sync_last_io_seconds_ago", lastIO)
		}
		if down, ok := r.upstreamDown(); ok {
			w.kv("master_link_down_since_seconds", down)
		}
		w.kv("slave_priority", 0) // never to be promoted by Sentinel
		w.kv("slave_read_only", 1)
		w.kv("replica_announced", 1)
	}
	w.kv("connected_slaves", len(r.Replicas))
	for i, rp := range r.Replicas {
		// Redis's fields first, as Redis writes them (Sentinel and clients
		// read them by name, and Sentinel finds ip= and port= by searching
		// the line: no field of ours may contain either); then the
		// proxy's own, in milliseconds with microsecond digits.
		w.kv(fmt.Sprintf("slave%d", i), fmt.Sprintf("ip=%s,port=%d,state=%s,offset=%d,lag=%d,unsent_ms=%.3f,unacked_ms=%.3f",
			rp.IP, rp.Port, rp.State, rp.Offset, rp.Lag, millis(rp.Unsent), millis(rp.Unacked)))
	}
	w.kv("master_failover_state", "no-failover")
	w.kv("master_replid", id.ReplID)
	w.kv("master_replid2", id.ReplID2)
	w.kv("master_repl_offset", r.Offset)
	w.kv("second_repl_offset", id.SecondOffset)
	w.kv("repl_backlog_active", b2i(id.History))
	w.kv("repl_backlog_size", cfg.ReplBacklogSize)
	w.kv("repl_backlog_first_byte_offset", r.BacklogFirst)
	w.kv("repl_backlog_histlen", r.BacklogLen)
}

func writeInfoProxy(w infoWriter, r *Report) {
	st := &r.Stats
	w.b.WriteString("# Proxy\r\n")
	w.kv("upstream_link_state", r.Up.State.String())
	w.kv("upstream_connects", st.UpstreamConnects)
	w.kv("upstream_full_syncs", st.UpstreamFullSyncs)
	w.kv("upstream_partial_syncs", st.UpstreamPartialSyncs)
	w.kv("upstream_link_failures", st.UpstreamLinkFailures)
	w.kv("upstream_rdb_bytes", st.UpstreamRDBBytes)
	w.kv("upstream_checksum_failures", st.UpstreamChecksumFails)
	w.kv("upstream_rdb_check_failures", st.UpstreamRDBCheckFails)
	w.kv("upstream_stream_errors", st.UpstreamStreamErrors)
	w.kv("upstream_query_buffer_limit_drops", st.UpstreamQueryLimits)
	w.kv("link_corrupt_errors", st.UpstreamLinkCorrupt)
	w.kv("stream_generation", r.Generation)
	w.kv("snapshot_fetches", st.Fetches.Fetches)
	for fr := history.FetchReason(0); fr < history.NumFetchReasons; fr++ {
		w.kv("snapshot_fetches_"+fr.String(), st.Fetches.ByReason[fr])
	}
	w.kv("snapshot_fetch_failures", st.Fetches.Failures)
	w.kv("snapshot_fetch_bytes", st.SnapshotFetchBytes)
	writeInfoSnapshotSource(w, r)
	writeInfoCluster(w, r)
	for fr := history.PartialAccepted + 1; fr < history.NumFullSyncReasons; fr++ {
		w.kv("sync_full_"+fr.String(), st.FullSyncs[fr])
	}
	w.kv("replicas_dropped", st.ReplicasDropped)
	for cr := downstream.CloseNone; cr < downstream.NumCloseReasons; cr++ {
		if cr.AppliesToReplicas() {
			w.kv("replicas_closed_"+cr.String(), st.ReplicaCloses[cr])
		}
	}
	for cr := downstream.CloseNone; cr < downstream.NumCloseReasons; cr++ {
		if cr.AppliesToClients() {
			w.kv("clients_closed_"+cr.String(), st.ClientCloses[cr])
		}
	}
	w.kv("repl_output_bytes", st.ReplOutputBytes)
	w.kv("repl_link_sync_rate_limit", r.Config.ReplLinkSyncRateLimit)
	w.kv("tls_connections_received", st.TLSConnectionsReceived)
	w.kv("tls_handshake_failures", st.TLSHandshakeFailures)
	w.kv("metrics_auth_failures", st.MetricsAuthFailures)
	w.kv("metrics_auth_throttled", st.MetricsAuthThrottled)
	if sn := r.Snapshot; sn != nil {
		w.kv("snapshot_replid", sn.ReplID)
		w.kv("snapshot_offset", sn.Offset)
		w.kv("snapshot_size", sn.Size)
		w.kv("snapshot_state", sn.State)
		w.kv("snapshot_age_seconds", sn.Age)
		w.kv("snapshot_memory", sn.Memory)
	} else {
		w.kv("snapshot_state", "none")
	}
	w.kv("free_blocks", r.Pool.FreeBlocks)
	w.kv("free_blocks_bytes", r.Pool.FreeBytes)
}

// writeInfoSnapshotSource writes INFO proxy's fields of the snapshot
// source: where snapshots come from and whether the primary stands in for
// the source, from the configuration in force, then what the source served,
// how often the primary stood in, and why the source could not be used, one
// field per reason in snapshots.SourceReasons' order.
func writeInfoSnapshotSource(w infoWriter, r *Report) {
	src := &r.Stats.Source
	w.kv("snapshot_source", r.snapshotSource())
	w.kv("snapshot_source_fallback", yesNo(r.Config.SnapshotFromFallback))
	w.kv("snapshot_source_fetches", src.Fetches)
	w.kv("snapshot_source_fallbacks", src.Fallbacks)
	for i, reason := range snapshots.SourceReasons {
		w.kv("snapshot_source_failures_"+reason, src.Failures[i])
	}
}

// writeInfoCluster writes INFO proxy's fields of the cluster follower,
// only while the proxy follows a cluster's shard (replicaof-cluster).
func writeInfoCluster(w infoWriter, r *Report) {
	if len(r.Config.ClusterSeeds) == 0 {
		return
	}
	st := &r.Stats
	w.kv("cluster_shard", r.Config.ClusterShard)
	w.kv("cluster_checks", st.ClusterChecks)
	w.kv("cluster_check_failures", st.ClusterCheckFailures)
	w.kv("cluster_primary_changes", st.ClusterPrimaryChanges)
	w.kv("cluster_slots", FormatSlots(st.ClusterSlots))
}

// writeInfoLinks writes the Links section: the upstream link's compression
// when replicaof names a primary, and one linkN line per replica that is a
// downstream proxy (capa replproxy), compressed or not, N counting those
// alone in connection order.
func writeInfoLinks(w infoWriter, r *Report) {
	w.b.WriteString("# Links\r\n")
	if r.Config.MasterHost != "" {
		u := r.UpLink
		w.kv("upstream_link", fmt.Sprintf("compression=%s,raw_bytes=%d,wire_bytes=%d,ratio=%.2f,cpu_sec=%.3f,"+
			"fetch_raw_bytes=%d,fetch_wire_bytes=%d,fetch_cpu_sec=%.3f,input_kbps=%.2f",
			u.Compression, u.Raw, u.Wire, u.ratio(), u.CPU, u.FetchRaw, u.FetchWire, u.FetchCPU, u.KBps))
	}
	n := 0
	for _, rp := range r.Replicas {
		l := rp.Link
		if l == nil {
			continue
		}
		w.kv(fmt.Sprintf("link%d", n), fmt.Sprintf("ip=%s,port=%d,compression=%s,raw_bytes=%d,wire_bytes=%d,ratio=%.2f,cpu_sec=%.3f,output_kbps=%.2f,throttled_ms=%d",
			rp.IP, rp.Port, l.Compression, l.Raw, l.Wire, l.ratio(), l.CPU, l.KBps, l.Throttled.Milliseconds()))
		n++
	}
}

// millis is d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// yesNo is a yes/no directive's value as its configuration spells it.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// humanBytes writes a size as Redis's INFO writes its *_human fields
// (bytesToHuman): bytes below 1024 as "<n>B", else to two decimals in the
// largest unit of 1024 it reaches, K, M, G, T or P.
func humanBytes[N int64 | uint64](n N) string {
	v := uint64(max(n, 0))
	const units = "KMGTP"
	if v < 1024 {
		return strconv.FormatUint(v, 10) + "B"
	}
	d, unit := float64(v)/1024, 0
	for unit < len(units)-1 && d >= 1024 {
		d /= 1024
		unit++
	}
	if d >= 1024 { // past 1024 P, Redis gives bytes
		return strconv.FormatUint(v, 10) + "B"
	}
	return strconv.FormatFloat(d, 'f', 2, 64) + units[unit:unit+1]
}

// FormatSlots writes slot ranges as INFO's cluster_slots shows them:
// "0-5460,10923" (a range of one slot as the slot), "" for none.
func FormatSlots(ranges []clustertopo.SlotRange) string {
	var b strings.Builder
	for i, r := range ranges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.First))
		if r.Last != r.First {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Last))
		}
	}
	return b.String()
}

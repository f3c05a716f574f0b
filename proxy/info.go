package proxy

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/sysmem"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// infoSections are INFO's sections in the order redis-server prints them;
// the proxy section is replproxy's own. "default" is all of them.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "proxy", "links", "keyspace"}

func (s *Server) cmdInfo(c *client, args [][]byte) bool {
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	c.out = c.proto().AppendVerbatim(c.out, "txt", s.Info(names...)) // a bulk string in RESP2
	return false
}

// Info returns the text of INFO for the named sections: none, "default",
// "all" or "everything" mean every section.
func (s *Server) Info(sections ...string) string {
	want := map[string]bool{}
	for _, sec := range sections {
		want[strings.ToLower(sec)] = true
	}
	all := len(want) == 0 || want["default"] || want["all"] || want["everything"]
	// One report for every section asked for, so that the sections agree
	// with each other as /metrics does with them; the costly parts only for
	// the sections that show them.
	var parts reportParts
	if all || want["memory"] {
		parts |= reportMemory
	}
	if all || want["persistence"] {
		parts |= reportDisk
	}
	r := s.report(parts)
	var b strings.Builder
	for _, sec := range infoSections {
		if !all && !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		s.writeInfoSection(&b, sec, r)
	}
	return b.String()
}

// infoWriter writes "key:value" lines.
type infoWriter struct{ b *strings.Builder }

func (w infoWriter) kv(key string, value any) {
	fmt.Fprintf(w.b, "%s:%v\r\n", key, value)
}

// writeInfoSection writes one section from r. What only INFO shows and
// costs a system call (the process's memory and CPU, its executable) is read
// here, for the section that shows it.
func (s *Server) writeInfoSection(b *strings.Builder, section string, r *report) {
	w := infoWriter{b}
	now := r.now
	switch section {
	case "server":
		b.WriteString("# Server\r\n")
		w.kv("redis_version", redisCompatVersion)
		w.kv("replproxy_version", Version)
		w.kv("redis_mode", "standalone")
		w.kv("os", runtime.GOOS+" "+runtime.GOARCH)
		w.kv("arch_bits", 64)
		w.kv("go_version", runtime.Version())
		w.kv("process_id", s.pid)
		w.kv("run_id", s.runID)
		w.kv("tcp_port", s.plainPort())
		up := now.Sub(s.started)
		w.kv("server_time_usec", now.UnixMicro())
		w.kv("uptime_in_seconds", int64(up/time.Second))
		w.kv("uptime_in_days", int64(up/(24*time.Hour)))
		exe, _ := os.Executable()
		w.kv("executable", exe)
		w.kv("config_file", s.configFile)
	case "clients":
		n, maxc := r.clients, r.cfg.MaxClients
		b.WriteString("# Clients\r\n")
		w.kv("connected_clients", n)
		w.kv("maxclients", maxc)
		w.kv("blocked_clients", 0)
	case "memory":
		s.writeInfoMemory(w, r)
	case "persistence":
		b.WriteString("# Persistence\r\n")
		w.kv("loading", 0)
		w.kv("async_loading", 0)
		w.kv("rdb_bgsave_in_progress", 0)
		w.kv("aof_enabled", 0)
		writeInfoLog(w, r.log)
		writeInfoSnapshotOnDisk(w, r.onDisk)
		w.kv("repl_snapshot_stream_since", r.streamSince)
	case "stats":
		st := &r.stats
		b.WriteString("# Stats\r\n")
		w.kv("total_connections_received", st.connectionsReceived)
		w.kv("total_commands_processed", st.commandsProcessed)
		w.kv("total_net_input_bytes", st.netInputBytes)
		w.kv("total_net_output_bytes", st.netOutputBytes)
		w.kv("total_net_repl_input_bytes", st.replInputBytes)
		w.kv("total_net_repl_output_bytes", st.replOutputBytes)
		w.kv("rejected_connections", st.rejectedConnections)
		w.kv("sync_full", st.syncFull)
		w.kv("sync_partial_ok", st.syncPartialOK)
		w.kv("sync_partial_err", st.syncPartialErr)
		w.kv("evicted_keys", 0)
		w.kv("evicted_snapshots", st.evictedSnapshots)
		w.kv("evicted_bytes", st.evictedBytes)
		w.kv("client_query_buffer_limit_disconnections", st.queryLimitDisconnects)
		w.kv("client_output_buffer_limit_disconnections", st.outputLimitDisconnects)
		w.kv("acl_access_denied_auth", st.aclDeniedAuth)
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

func (s *Server) writeInfoMemory(w infoWriter, r *report) {
	rep := r.mem
	cfg := r.cfg
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ps := r.pool
	w.b.WriteString("# Memory\r\n")
	w.kv("used_memory", rep.UsedMemory)
	w.kv("used_memory_human", humanize.IBytes(uint64(rep.UsedMemory)))
	rss := sysmem.RSS()
	w.kv("used_memory_rss", rss)
	w.kv("used_memory_rss_human", humanize.IBytes(uint64(rss)))
	w.kv("used_memory_peak", r.peakMemory)
	w.kv("used_memory_peak_human", humanize.IBytes(uint64(r.peakMemory)))
	w.kv("maxmemory", cfg.MaxMemory)
	w.kv("maxmemory_human", humanize.IBytes(uint64(cfg.MaxMemory)))
	w.kv("maxmemory_policy", cfg.MaxMemoryPolicy)
	w.kv("mem_fragmentation_ratio", fmt.Sprintf("%.2f", float64(rss)/float64(max(rep.UsedMemory, 1))))
	w.kv("mem_fragmentation_bytes", rss-rep.UsedMemory)
	w.kv("mem_not_counted_for_evict", rep.NotCountedForEvict)
	w.kv("mem_counted_for_evict", rep.Counted)
	w.kv("mem_over_maxmemory", b2i(r.overMaxMemory))
	w.kv("mem_replication_backlog", rep.ReplicationBacklog)
	w.kv("mem_clients_slaves", rep.ClientsSlaves)
	w.kv("mem_clients_normal", rep.ClientsNormal)
	w.kv("mem_total_replication_buffers", rep.TotalReplicationBuffers)
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
func writeInfoLog(w infoWriter, r logReport) {
	w.kv("repl_log_enabled", b2i(r.enabled))
	if !r.open {
		if r.openErr != "" {
			w.kv("repl_log_status", "failed")
			w.kv("repl_log_last_error", r.openErr)
		}
		return
	}
	status := "ok"
	if !r.live {
		status = "down"
	}
	st := r.stats
	w.kv("repl_log_status", status)
	w.kv("repl_log_size", r.size)
	w.kv("repl_log_fsync", r.fsync)
	w.kv("repl_log_window", r.window)
	w.kv("repl_log_replid", r.replID)
	w.kv("repl_log_first_offset", st.First)
	w.kv("repl_log_last_offset", st.Last)
	w.kv("repl_log_bytes", st.Bytes)
	w.kv("repl_log_segments", st.Segments)
	w.kv("repl_log_synced_offset", st.Synced)
	w.kv("repl_log_fsync_lag_bytes", r.fsyncLag())
	w.kv("repl_log_last_fsync_age", r.syncAge)
	w.kv("repl_log_lag_bytes", r.lagBytes)
	w.kv("repl_log_lag_seconds", fmt.Sprintf("%.3f", r.lagSeconds))
	w.kv("repl_log_restarts", r.restarts)
	w.kv("repl_log_errors", r.errors)
	w.kv("repl_log_last_error", r.lastErr)
	w.kv("repl_log_partial_syncs", r.partialSyncs)
	w.kv("repl_log_replicas_moved_to_disk", r.movedToDisk)
	w.kv("repl_log_recovered_bytes", r.recovered)
	w.kv("repl_log_recovery_cut_bytes", r.cut)
}

// writeInfoSnapshotOnDisk writes INFO persistence's fields of the snapshot on
// disk (a spilled one, or one written for the stream log).
func writeInfoSnapshotOnDisk(w infoWriter, sp *diskSnapshotFigures) {
	w.kv("repl_snapshot_on_disk", b2i(sp != nil))
	if sp == nil {
		return
	}
	w.kv("repl_snapshot_replid", sp.replID)
	w.kv("repl_snapshot_offset", sp.offset)
	w.kv("repl_snapshot_size", sp.size)
	w.kv("repl_snapshot_age_seconds", sp.age)
}

func writeInfoReplication(w infoWriter, r *report) {
	cfg := r.cfg
	id := r.id
	u := r.up
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
		w.kv("slave_read_repl_offset", r.filled)
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
	w.kv("connected_slaves", len(r.replicas))
	for i, rp := range r.replicas {
		w.kv(fmt.Sprintf("slave%d", i), fmt.Sprintf("ip=%s,port=%d,state=%s,offset=%d,lag=%d",
			rp.ip, rp.port, rp.state, rp.offset, rp.lag))
	}
	w.kv("master_failover_state", "no-failover")
	w.kv("master_replid", id.ReplID)
	w.kv("master_replid2", id.ReplID2)
	w.kv("master_repl_offset", r.offset)
	w.kv("second_repl_offset", id.SecondOffset)
	w.kv("repl_backlog_active", b2i(id.History))
	w.kv("repl_backlog_size", cfg.ReplBacklogSize)
	w.kv("repl_backlog_first_byte_offset", r.backlogFirst)
	w.kv("repl_backlog_histlen", r.backlogLen)
}

func writeInfoProxy(w infoWriter, r *report) {
	st := &r.stats
	w.b.WriteString("# Proxy\r\n")
	w.kv("upstream_link_state", r.up.State.String())
	w.kv("upstream_connects", st.upstreamConnects)
	w.kv("upstream_full_syncs", st.upstreamFullSyncs)
	w.kv("upstream_partial_syncs", st.upstreamPartialSyncs)
	w.kv("upstream_link_failures", st.upstreamLinkFailures)
	w.kv("upstream_rdb_bytes", st.upstreamRDBBytes)
	w.kv("upstream_checksum_failures", st.upstreamChecksumFails)
	w.kv("upstream_stream_errors", st.upstreamStreamErrors)
	w.kv("upstream_query_buffer_limit_drops", st.upstreamQueryLimits)
	w.kv("link_corrupt_errors", st.upstreamLinkCorrupt)
	w.kv("stream_generation", r.generation)
	w.kv("snapshot_fetches", st.fetches.Fetches)
	for fr := history.FetchReason(0); fr < history.NumFetchReasons; fr++ {
		w.kv("snapshot_fetches_"+fr.String(), st.fetches.ByReason[fr])
	}
	w.kv("snapshot_fetch_failures", st.fetches.Failures)
	w.kv("snapshot_fetch_bytes", st.snapshotFetchBytes)
	for fr := history.PartialAccepted + 1; fr < history.NumFullSyncReasons; fr++ {
		w.kv("sync_full_"+fr.String(), st.fullSyncs[fr])
	}
	w.kv("replicas_dropped", st.replicasDropped)
	for cr := downstream.CloseNone; cr < downstream.NumCloseReasons; cr++ {
		if cr.AppliesToReplicas() {
			w.kv("replicas_closed_"+cr.String(), st.replicaCloses[cr])
		}
	}
	for cr := downstream.CloseNone; cr < downstream.NumCloseReasons; cr++ {
		if cr.AppliesToClients() {
			w.kv("clients_closed_"+cr.String(), st.clientCloses[cr])
		}
	}
	w.kv("repl_output_bytes", st.replOutputBytes)
	w.kv("repl_link_sync_rate_limit", r.cfg.ReplLinkSyncRateLimit)
	w.kv("tls_connections_received", st.tlsConnectionsReceived)
	w.kv("tls_handshake_failures", st.tlsHandshakeFailures)
	if sn := r.snapshot; sn != nil {
		w.kv("snapshot_replid", sn.replID)
		w.kv("snapshot_offset", sn.offset)
		w.kv("snapshot_size", sn.size)
		w.kv("snapshot_state", sn.state)
		w.kv("snapshot_age_seconds", sn.age)
		w.kv("snapshot_memory", sn.memory)
	} else {
		w.kv("snapshot_state", "none")
	}
	w.kv("free_blocks", r.pool.FreeBlocks)
	w.kv("free_blocks_bytes", r.pool.FreeBytes)
}

// writeInfoLinks writes the Links section: the upstream link's compression
// when replicaof names a primary, and one linkN line per replica that is a
// downstream proxy (capa replproxy), compressed or not, N counting those
// alone in connection order.
func writeInfoLinks(w infoWriter, r *report) {
	w.b.WriteString("# Links\r\n")
	if r.cfg.MasterHost != "" {
		u := r.upLink
		w.kv("upstream_link", fmt.Sprintf("compression=%s,raw_bytes=%d,wire_bytes=%d,ratio=%.2f,cpu_sec=%.3f,"+
			"fetch_raw_bytes=%d,fetch_wire_bytes=%d,fetch_cpu_sec=%.3f,input_kbps=%.2f",
			u.compression, u.raw, u.wire, u.ratio(), u.cpu, u.fetchRaw, u.fetchWire, u.fetchCPU, u.kbps))
	}
	n := 0
	for _, rp := range r.replicas {
		l := rp.link
		if l == nil {
			continue
		}
		w.kv(fmt.Sprintf("link%d", n), fmt.Sprintf("ip=%s,port=%d,compression=%s,raw_bytes=%d,wire_bytes=%d,ratio=%.2f,cpu_sec=%.3f,output_kbps=%.2f,throttled_ms=%d",
			rp.ip, rp.port, l.compression, l.raw, l.wire, l.ratio(), l.cpu, l.kbps, l.throttled.Milliseconds()))
		n++
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

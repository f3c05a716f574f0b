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

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// infoSections are INFO's sections in the order redis-server prints them;
// the proxy section is replproxy's own. "default" is all of them.
var infoSections = []string{"server", "clients", "memory", "persistence", "stats", "replication", "cpu", "proxy", "keyspace"}

func (s *Server) cmdInfo(c *client, args [][]byte) bool {
	names := make([]string, 0, len(args)-1)
	for _, a := range args[1:] {
		names = append(names, string(a))
	}
	c.out = wire.AppendBulkString(c.out, s.Info(names...))
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
	var b strings.Builder
	for _, sec := range infoSections {
		if !all && !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		s.writeInfoSection(&b, sec)
	}
	return b.String()
}

// infoWriter writes "key:value" lines.
type infoWriter struct{ b *strings.Builder }

func (w infoWriter) kv(key string, value any) {
	fmt.Fprintf(w.b, "%s:%v\r\n", key, value)
}

func (s *Server) writeInfoSection(b *strings.Builder, section string) {
	w := infoWriter{b}
	now := time.Now()
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
		n, maxc := s.clients.count(), s.config().MaxClients
		b.WriteString("# Clients\r\n")
		w.kv("connected_clients", n)
		w.kv("maxclients", maxc)
		w.kv("blocked_clients", 0)
	case "memory":
		s.writeInfoMemory(w)
	case "persistence":
		b.WriteString("# Persistence\r\n")
		w.kv("loading", 0)
		w.kv("async_loading", 0)
		w.kv("rdb_bgsave_in_progress", 0)
		w.kv("aof_enabled", 0)
		s.writeInfoLog(w, now)
		s.writeInfoSnapshotOnDisk(w, now)
	case "stats":
		st := &s.stats
		b.WriteString("# Stats\r\n")
		w.kv("total_connections_received", st.connectionsReceived.Load())
		w.kv("total_commands_processed", st.commandsProcessed.Load())
		w.kv("total_net_input_bytes", st.netInputBytes.Load()+st.replInputBytes.Load())
		w.kv("total_net_output_bytes", st.netOutputBytes.Load()+st.replOutputBytes.Load())
		w.kv("total_net_repl_input_bytes", st.replInputBytes.Load())
		w.kv("total_net_repl_output_bytes", st.replOutputBytes.Load())
		w.kv("rejected_connections", st.rejectedConnections.Load())
		w.kv("sync_full", st.syncFull.Load())
		w.kv("sync_partial_ok", st.syncPartialOK.Load())
		w.kv("sync_partial_err", st.syncPartialErr.Load())
		w.kv("evicted_keys", 0)
		w.kv("evicted_snapshots", st.evictedSnapshots.Load())
		w.kv("evicted_bytes", st.evictedBytes.Load())
		w.kv("client_query_buffer_limit_disconnections", st.queryLimitDisconnects.Load())
		w.kv("client_output_buffer_limit_disconnections", st.outputLimitDisconnects.Load())
		w.kv("acl_access_denied_auth", st.aclDeniedAuth.Load())
	case "replication":
		s.writeInfoReplication(w, now)
	case "cpu":
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.WriteString("# CPU\r\n")
		w.kv("used_cpu_sys", fmt.Sprintf("%.6f", time.Duration(ru.Stime.Nano()).Seconds()))
		w.kv("used_cpu_user", fmt.Sprintf("%.6f", time.Duration(ru.Utime.Nano()).Seconds()))
	case "proxy":
		s.writeInfoProxy(w, now)
	case "keyspace":
		b.WriteString("# Keyspace\r\n")
	}
}

func (s *Server) writeInfoMemory(w infoWriter) {
	rep := s.memoryReport()
	cfg := s.config()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ps := s.pool.Stats()
	w.b.WriteString("# Memory\r\n")
	w.kv("used_memory", rep.UsedMemory)
	w.kv("used_memory_human", humanize.IBytes(uint64(rep.UsedMemory)))
	rss := rssBytes()
	w.kv("used_memory_rss", rss)
	w.kv("used_memory_rss_human", humanize.IBytes(uint64(rss)))
	w.kv("used_memory_peak", s.peakMemory.Load())
	w.kv("used_memory_peak_human", humanize.IBytes(uint64(s.peakMemory.Load())))
	w.kv("maxmemory", cfg.MaxMemory)
	w.kv("maxmemory_human", humanize.IBytes(uint64(cfg.MaxMemory)))
	w.kv("maxmemory_policy", cfg.MaxMemoryPolicy)
	w.kv("mem_fragmentation_ratio", fmt.Sprintf("%.2f", float64(rss)/float64(max(rep.UsedMemory, 1))))
	w.kv("mem_fragmentation_bytes", rss-rep.UsedMemory)
	w.kv("mem_not_counted_for_evict", rep.NotCountedForEvict)
	w.kv("mem_counted_for_evict", rep.Counted)
	w.kv("mem_over_maxmemory", b2i(s.overMaxMemory.Load()))
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
	w.kv("go_heap_alloc", ms.HeapAlloc)
	w.kv("go_heap_sys", ms.HeapSys)
	w.kv("go_gc_cycles", ms.NumGC)
	w.kv("go_memory_limit", debug.SetMemoryLimit(-1))
}

func (s *Server) writeInfoReplication(w infoWriter, now time.Time) {
	cfg := s.config()
	id := s.identity()
	u := s.up.Status()
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
		lastIO := int64(-1)
		if st == upstream.StateConnected || st == upstream.StateSync {
			lastIO = int64(now.Sub(time.Unix(0, u.LastIO)) / time.Second)
		}
		w.kv("master_last_io_seconds_ago", lastIO)
		inSync := st == upstream.StateSync
		w.kv("master_sync_in_progress", b2i(inSync))
		w.kv("slave_read_repl_offset", s.hist.Stream().Filled()) // read_reploff: a cut command or an open MULTI included
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
			w.kv("master_sync_last_io_seconds_ago", int64(now.Sub(time.Unix(0, u.LastIO))/time.Second))
		}
		if st != upstream.StateConnected {
			down := int64(-1)
			if d := u.DownSince; d != 0 {
				down = int64(now.Sub(time.Unix(0, d)) / time.Second)
			}
			w.kv("master_link_down_since_seconds", down)
		}
		w.kv("slave_priority", 0) // never to be promoted by Sentinel
		w.kv("slave_read_only", 1)
		w.kv("replica_announced", 1)
	}
	replicas := s.clients.replicaList()
	w.kv("connected_slaves", len(replicas))
	for i, r := range replicas {
		lag := int64(0)
		if r.State() == replicaOnline {
			lag = int64(now.Sub(time.Unix(0, r.ackTime.Load())) / time.Second)
		}
		w.kv(fmt.Sprintf("slave%d", i), fmt.Sprintf("ip=%s,port=%d,state=%s,offset=%d,lag=%d",
			r.ip, r.hs.port, r.State(), r.ackOff.Load(), lag))
	}
	w.kv("master_failover_state", "no-failover")
	w.kv("master_replid", id.ReplID)
	w.kv("master_replid2", id.ReplID2)
	w.kv("master_repl_offset", s.hist.Stream().Offset())
	w.kv("second_repl_offset", id.SecondOffset)
	first, hist := s.hist.Stream().Backlog()
	if !id.History {
		first, hist = 0, 0
	}
	w.kv("repl_backlog_active", b2i(id.History))
	w.kv("repl_backlog_size", cfg.ReplBacklogSize)
	w.kv("repl_backlog_first_byte_offset", first)
	w.kv("repl_backlog_histlen", hist)
}

func (s *Server) writeInfoProxy(w infoWriter, now time.Time) {
	st := &s.stats
	w.b.WriteString("# Proxy\r\n")
	w.kv("upstream_link_state", s.up.State().String())
	w.kv("upstream_connects", st.upstreamConnects.Load())
	w.kv("upstream_full_syncs", st.upstreamFullSyncs.Load())
	w.kv("upstream_partial_syncs", st.upstreamPartialSyncs.Load())
	w.kv("upstream_link_failures", st.upstreamLinkFailures.Load())
	w.kv("upstream_rdb_bytes", st.upstreamRDBBytes.Load())
	w.kv("upstream_checksum_failures", st.upstreamChecksumFails.Load())
	w.kv("upstream_stream_errors", st.upstreamStreamErrors.Load())
	w.kv("upstream_query_buffer_limit_drops", st.upstreamQueryLimits.Load())
	w.kv("stream_generation", s.hist.Stream().Generation())
	w.kv("snapshot_fetches", st.snapshotFetches.Load())
	for r := history.FetchReason(0); r < history.NumFetchReasons; r++ {
		w.kv("snapshot_fetches_"+r.String(), st.snapshotFetchReasons[r].Load())
	}
	w.kv("snapshot_fetch_failures", st.snapshotFetchFailures.Load())
	w.kv("snapshot_fetch_bytes", st.snapshotFetchBytes.Load())
	for r := history.PartialAccepted + 1; r < history.NumFullSyncReasons; r++ {
		w.kv("sync_full_"+r.String(), st.fullSyncs[r].Load())
	}
	w.kv("replicas_dropped", st.replicasDropped.Load())
	for r := closeNone; r < numCloseReasons; r++ {
		if r.appliesToReplicas() {
			w.kv("replicas_closed_"+r.String(), st.replicaCloses[r].Load())
		}
	}
	for r := closeNone; r < numCloseReasons; r++ {
		if r.appliesToClients() {
			w.kv("clients_closed_"+r.String(), st.clientCloses[r].Load())
		}
	}
	w.kv("repl_output_bytes", st.replOutputBytes.Load())
	w.kv("tls_connections_received", st.tlsConnectionsReceived.Load())
	w.kv("tls_handshake_failures", st.tlsHandshakeFailures.Load())
	if sn := s.Snapshot(); sn != nil {
		w.kv("snapshot_replid", sn.ReplID())
		w.kv("snapshot_offset", sn.Offset())
		w.kv("snapshot_size", sn.Size())
		w.kv("snapshot_state", sn.State().String())
		w.kv("snapshot_age_seconds", int64(now.Sub(sn.Created())/time.Second))
		w.kv("snapshot_memory", sn.Usage().Total)
	} else {
		w.kv("snapshot_state", "none")
	}
	ps := s.pool.Stats()
	w.kv("free_blocks", ps.FreeBlocks)
	w.kv("free_blocks_bytes", ps.FreeBytes)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

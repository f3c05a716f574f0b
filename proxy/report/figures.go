package report

import (
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// Figures is the report as the monitoring server renders it: the figures
// every scrape shows, then those labelled, those of the parts that may be
// absent, and the memory's.
func (r *Report) Figures() metrics.Figures {
	st := &r.Stats
	u := r.Up
	f := metrics.Figures{
		Version: r.Process.Version, Revision: vcsRevision(), GoVersion: runtime.Version(),

		UpstreamLinkUp:    u.State == upstream.StateConnected,
		UpstreamLinkState: u.State.String(),

		UpstreamConnects:              st.UpstreamConnects,
		UpstreamFullSyncs:             st.UpstreamFullSyncs,
		UpstreamPartialSyncs:          st.UpstreamPartialSyncs,
		UpstreamLinkFailures:          st.UpstreamLinkFailures,
		UpstreamRDBBytes:              st.UpstreamRDBBytes,
		UpstreamChecksumFailures:      st.UpstreamChecksumFails,
		UpstreamRDBCheckFailures:      st.UpstreamRDBCheckFails,
		UpstreamStreamErrors:          st.UpstreamStreamErrors,
		UpstreamQueryBufferLimitDrops: st.UpstreamQueryLimits,

		UpstreamLinkCompressed:           r.UpLink.Compression == "zstd",
		UpstreamLinkRawBytes:             r.UpLink.Raw,
		UpstreamLinkWireBytes:            r.UpLink.Wire,
		UpstreamLinkDecompressCPUSeconds: r.UpLink.CPU,
		UpstreamLinkCorrupt:              st.UpstreamLinkCorrupt,

		ClusterChecks:         st.ClusterChecks,
		ClusterCheckFailures:  st.ClusterCheckFailures,
		ClusterPrimaryChanges: st.ClusterPrimaryChanges,

		MasterReplOffset:       r.Offset,
		SlaveReplOffset:        u.Applied,
		SlaveReadReplOffset:    r.Filled,
		BacklogFirstByteOffset: r.BacklogFirst,
		BacklogHistlen:         r.BacklogLen,
		StreamGeneration:       int64(r.Generation),

		ConnectedReplicas: int64(len(r.Replicas)),
		Replicas:          replicaSeries(r.Replicas),
		ReplicasDropped:   st.ReplicasDropped,

		SyncFull:                        st.SyncFull,
		SyncPartialOK:                   st.SyncPartialOK,
		SyncPartialErr:                  st.SyncPartialErr,
		ReplInputBytes:                  st.ReplInputBytes,
		ReplOutputBytes:                 st.ReplOutputBytes,
		NetInputBytes:                   st.NetInputBytes,
		NetOutputBytes:                  st.NetOutputBytes,
		ConnectionsReceived:             st.ConnectionsReceived,
		RejectedConnections:             st.RejectedConnections,
		CommandsProcessed:               st.CommandsProcessed,
		ConnectedClients:                int64(r.Clients),
		ACLAccessDeniedAuth:             st.ACLDeniedAuth,
		TLSConnectionsReceived:          st.TLSConnectionsReceived,
		TLSHandshakeFailures:            st.TLSHandshakeFailures,
		MetricsAuthFailures:             st.MetricsAuthFailures,
		MetricsAuthThrottled:            st.MetricsAuthThrottled,
		QueryBufferLimitDisconnections:  st.QueryLimitDisconnects,
		OutputBufferLimitDisconnections: st.OutputLimitDisconnects,
		LinkSyncRateLimit:               r.Config.ReplLinkSyncRateLimit,

		SnapshotFetches:       st.Fetches.Fetches,
		SnapshotFetchFailures: st.Fetches.Failures,
		SnapshotFetchBytes:    st.SnapshotFetchBytes,
		EvictedSnapshots:      st.EvictedSnapshots,
		EvictedBytes:          st.EvictedBytes,

		SnapshotSource:          r.snapshotSource(),
		SnapshotSourceFallback:  yesNo(r.Config.SnapshotFromFallback),
		SnapshotSourceFetches:   st.Source.Fetches,
		SnapshotSourceFallbacks: st.Source.Fallbacks,

		LogEnabled: r.Log.Enabled,
		LogUp:      r.Log.Open && r.Log.Live,

		UsedMemory:     r.Mem.UsedMemory,
		UsedMemoryPeak: r.PeakMemory,
		MaxMemory:      r.Config.MaxMemory,
		OverMaxMemory:  r.OverMaxMemory,
	}
	if lastIO, ok := r.upstreamLastIO(); ok {
		f.UpstreamLastIOSeconds, f.HasUpstreamLastIO = lastIO, true
	}
	if down, ok := r.upstreamDown(); ok && u.DownSince != 0 {
		f.UpstreamLinkDownSeconds, f.HasUpstreamLinkDown = down, true
	}
	r.labelledFigures(&f)
	r.partFigures(&f)
	r.memoryFigures(&f)
	return f
}

// labelledFigures sets the figures shown one series per label: the states
// the link's and the replicas' state series are labelled with, and the
// counts by reason, every reason's, 0 included.
func (r *Report) labelledFigures(f *metrics.Figures) {
	st := &r.Stats
	for state := upstream.StateNone; state <= upstream.StateConnected; state++ {
		f.UpstreamLinkStates = append(f.UpstreamLinkStates, state.String())
	}
	for state := downstream.WaitBgsave; state <= downstream.Online; state++ {
		f.ReplicaStates = append(f.ReplicaStates, state.String())
	}
	for cr := downstream.CloseNone; cr < downstream.NumCloseReasons; cr++ {
		if cr.AppliesToReplicas() {
			f.ReplicasClosed = append(f.ReplicasClosed, metrics.Count{Label: cr.String(), Value: st.ReplicaCloses[cr]})
		}
		if cr.AppliesToClients() {
			f.ClientsClosed = append(f.ClientsClosed, metrics.Count{Label: cr.String(), Value: st.ClientCloses[cr]})
		}
	}
	for fr := history.PartialAccepted + 1; fr < history.NumFullSyncReasons; fr++ {
		f.FullSyncs = append(f.FullSyncs, metrics.Count{Label: fr.String(), Value: st.FullSyncs[fr]})
	}
	for fr := history.FetchReason(0); fr < history.NumFetchReasons; fr++ {
		f.SnapshotFetchesByReason = append(f.SnapshotFetchesByReason, metrics.Count{Label: fr.String(), Value: st.Fetches.ByReason[fr]})
	}
	for i, reason := range snapshots.SourceReasons {
		f.SnapshotSourceFailures = append(f.SnapshotSourceFailures, metrics.Count{Label: reason, Value: st.Source.Failures[i]})
	}
	for p := range downstream.NumWritePaths {
		f.RelayDelays = append(f.RelayDelays, relayHistogram(p.String(), st.RelayDelays[p]))
	}
}

// relayHistogram is one write path's relay delays as /metrics shows them:
// in seconds, the buckets made cumulative.
func relayHistogram(label string, c downstream.RelayCounts) metrics.Histogram {
	bounds := downstream.RelayBounds()
	h := metrics.Histogram{Label: label, Bounds: make([]float64, len(bounds)), Counts: make([]int64, len(bounds)),
		Sum: c.Sum.Seconds()}
	for i, b := range bounds {
		h.Count += c.Buckets[i]
		h.Bounds[i], h.Counts[i] = b.Seconds(), h.Count
	}
	h.Count += c.Buckets[len(bounds)] // above every bound
	return h
}

// partFigures sets the figures of the parts that may be absent: the
// snapshot in memory, the stream log, the snapshot on disk; nil for each
// that is.
func (r *Report) partFigures(f *metrics.Figures) {
	if sn := r.Snapshot; sn != nil {
		f.Snapshot = &metrics.Snapshot{Size: sn.Size, AgeSeconds: sn.Age, Offset: sn.Offset}
	}
	if l := r.Log; l.Open {
		f.Log = &metrics.Log{
			First: l.Stats.First, Last: l.Stats.Last, Bytes: l.Stats.Bytes, Segments: int64(l.Stats.Segments),
			Synced: l.Stats.Synced, FsyncLagBytes: l.fsyncLag(), LastFsyncAgeSeconds: l.SyncAge,
			Errors: l.Errors, PartialSyncs: l.PartialSyncs, ReplicasMovedToDisk: l.MovedToDisk,
			LagBytes: l.LagBytes, LagSeconds: l.LagSeconds, Restarts: l.Restarts,
			RecoveredBytes: l.Recovered, RecoveryCutBytes: l.Cut,
		}
	}
	if sp := r.OnDisk; sp != nil {
		f.SnapshotOnDisk = &metrics.DiskSnapshot{Size: sp.Size, Offset: sp.Offset, AgeSeconds: sp.Age}
	}
}

// memoryFigures sets used_memory's parts, each once (eviction.Account adds
// up the same ones): sum(replproxy_memory_bytes) is
// replproxy_used_memory_bytes. The figures that overlap them or are not in
// used_memory are metrics of their own.
func (r *Report) memoryFigures(f *metrics.Figures) {
	m := r.Mem
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
}

// replicaSeries is the replicas as /metrics labels them: by the address
// and listening port they announced, one connection per identity. Two
// connections share one while a replica reconnects before its old
// connection is closed (or two replicas on one host announce no port):
// the newest, the last in connection order, is the one shown, so that a
// series never repeats and follows the connection that is live.
func replicaSeries(rs []Replica) []metrics.Replica {
	out := make([]metrics.Replica, 0, len(rs))
	seen := make(map[[2]string]int, len(rs)) // identity (ip, port) -> index in out
	for _, rp := range rs {
		m := metrics.Replica{
			IP: rp.IP, Port: strconv.Itoa(rp.Port), State: rp.State.String(),
			HasLag: rp.HasLag, Offset: rp.Offset, LagSeconds: rp.Lag, LagBytes: rp.LagBytes,
			UnsentSeconds: rp.Unsent.Seconds(), UnackedSeconds: rp.Unacked.Seconds(),
		}
		if l := rp.Link; l != nil {
			m.Link = &metrics.ReplicaLink{RawBytes: l.Raw, WireBytes: l.Wire, CompressCPUSeconds: l.CPU,
				ThrottledSeconds: l.Throttled.Seconds()}
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

// vcsRevision is the VCS revision the binary was built from, as the Go
// toolchain records it (vcs.revision, with "-dirty" when the tree had
// changes), for replproxy_build_info; "unknown" when it recorded none (a
// test binary, a build outside a checkout or with -buildvcs=false).
func vcsRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			dirty = kv.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

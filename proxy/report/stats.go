package report

import (
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
)

// Stats are the server's counters, shown by INFO stats and reset by CONFIG
// RESETSTAT. Every field is atomic: any goroutine may add to them. A counter
// added here is loaded by Read into a report's Counters, and so reaches INFO
// and /metrics with a line in each rendering.
type Stats struct {
	ConnectionsReceived atomic.Int64           // total_connections_received
	CommandsProcessed   atomic.Int64           // total_commands_processed
	RejectedConnections atomic.Int64           // rejected_connections
	NetInputBytes       atomic.Int64           // total_net_input_bytes (clients and replicas)
	NetOutputBytes      atomic.Int64           // total_net_output_bytes (clients and replicas)
	ReplInputBytes      atomic.Int64           // total_net_repl_input_bytes (from the primary)
	ReplOutputBytes     atomic.Int64           // total_net_repl_output_bytes (to replicas)
	SyncFull            atomic.Int64           // sync_full
	SyncPartialOK       atomic.Int64           // sync_partial_ok
	SyncPartialErr      atomic.Int64           // sync_partial_err
	FullSyncs           history.FullSyncCounts // sync_full by reason (proxy section)
	LogPartialSyncs     atomic.Int64           // partial resyncs that started from the stream log
	ReplicasToDisk      atomic.Int64           // replicas moved from memory to the stream log

	// The upstream link (proxy section).
	UpstreamConnects      atomic.Int64 // connections made to the primary
	UpstreamFullSyncs     atomic.Int64 // +FULLRESYNC received and completed
	UpstreamPartialSyncs  atomic.Int64 // +CONTINUE received
	UpstreamLinkFailures  atomic.Int64 // link attempts or links that ended with an error
	UpstreamRDBBytes      atomic.Int64 // RDB payload bytes received
	UpstreamChecksumFails atomic.Int64 // snapshots whose CRC64 did not match
	UpstreamRDBCheckFails atomic.Int64 // snapshots the RDB check refused, UpstreamChecksumFails' included
	UpstreamStreamErrors  atomic.Int64 // links dropped for stream bytes the scanner refused
	UpstreamQueryLimits   atomic.Int64 // links dropped for unpublished bytes over master-query-buffer-limit
	UpstreamLinkCorrupt   atomic.Int64 // link_corrupt_errors: links, main or side, ended by corrupt compressed input
	SnapshotFetchBytes    atomic.Int64 // payload bytes received by fetches (the fetches themselves are package snapshots')

	// The cluster follower (replicaof-cluster; proxy section).
	ClusterChecks         atomic.Int64 // cluster_checks: readings of the topology
	ClusterCheckFailures  atomic.Int64 // cluster_check_failures: readings that put no primary in force
	ClusterPrimaryChanges atomic.Int64 // cluster_primary_changes: replicaof set to another node
	// ClusterSlots is not a counter (RESETSTAT leaves it): the followed
	// shard's slot ranges at the last check that found the shard (INFO's
	// cluster_slots, CLUSTER SHARDS and SLOTS); nil before one did. The
	// follower stores a new slice, never changes one stored.
	ClusterSlots atomic.Pointer[[]clustertopo.SlotRange]

	ReplicasDropped  atomic.Int64           // replicas disconnected by a limit or timeout
	ReplicaCloses    downstream.CloseCounts // replicas closed, per reason
	ClientCloses     downstream.CloseCounts // other clients closed, per reason
	EvictedSnapshots atomic.Int64           // evicted_snapshots: spilled to disk or dropped
	EvictedBytes     atomic.Int64           // evicted_bytes: their memory

	// Clients the proxy refused or closed (Redis 7's names).
	ACLDeniedAuth          atomic.Int64 // acl_access_denied_auth: failed AUTH
	ACLDeniedCmd           atomic.Int64 // acl_access_denied_cmd: commands the ACL refused
	ACLDeniedKey           atomic.Int64 // acl_access_denied_key: keys the ACL refused (never, the proxy serves none)
	ACLDeniedChannel       atomic.Int64 // acl_access_denied_channel: channels the ACL refused
	QueryLimitDisconnects  atomic.Int64 // client_query_buffer_limit_disconnections
	OutputLimitDisconnects atomic.Int64 // client_output_buffer_limit_disconnections

	// tls-port (proxy section; Redis has no such counters).
	TLSConnectionsReceived atomic.Int64 // tls_connections_received: accepted on tls-port
	TLSHandshakeFailures   atomic.Int64 // tls_handshake_failures: of those, handshakes that failed

	// The monitoring port (proxy section).
	MetricsAuthFailures  atomic.Int64 // metrics_auth_failures: requests refused 401 (metrics-web-config's basic_auth_users)
	MetricsAuthThrottled atomic.Int64 // metrics_auth_throttled: requests refused 429, the password checks' queue full

	// RelayDelays is the histogram of the time from a stream byte's arrival
	// to its write to a replica, which every replica adds to
	// (downstream.Counters.Delays). Not reset by CONFIG RESETSTAT: a
	// histogram's counts only grow, as Prometheus reads them.
	RelayDelays downstream.WriteDelays
}

// Reset zeroes the counters CONFIG RESETSTAT resets in Redis 7.0
// (resetServerStats: INFO stats, evicted_keys's analogues included). The
// upstream link's, the snapshot fetches' and the close-reason counters of
// the proxy section stay: like the replication state, they are not stats
// Redis has.
func (s *Stats) Reset() {
	for _, c := range []*atomic.Int64{
		&s.ConnectionsReceived, &s.CommandsProcessed, &s.RejectedConnections,
		&s.NetInputBytes, &s.NetOutputBytes, &s.ReplInputBytes, &s.ReplOutputBytes,
		&s.SyncFull, &s.SyncPartialOK, &s.SyncPartialErr,
		&s.ACLDeniedAuth, &s.ACLDeniedCmd, &s.ACLDeniedKey, &s.ACLDeniedChannel,
		&s.QueryLimitDisconnects, &s.OutputLimitDisconnects,
		&s.EvictedSnapshots, &s.EvictedBytes,
	} {
		c.Store(0)
	}
	for i := range s.FullSyncs {
		s.FullSyncs[i].Store(0)
	}
}

// Read loads every counter, as a report's; the snapshot fetches' are
// package snapshots', read by the server's report itself.
func (st *Stats) Read() Counters {
	c := Counters{
		ConnectionsReceived: st.ConnectionsReceived.Load(),
		CommandsProcessed:   st.CommandsProcessed.Load(),
		RejectedConnections: st.RejectedConnections.Load(),
		ReplInputBytes:      st.ReplInputBytes.Load(),
		ReplOutputBytes:     st.ReplOutputBytes.Load(),
		SyncFull:            st.SyncFull.Load(),
		SyncPartialOK:       st.SyncPartialOK.Load(),
		SyncPartialErr:      st.SyncPartialErr.Load(),
		LogPartialSyncs:     st.LogPartialSyncs.Load(),
		ReplicasToDisk:      st.ReplicasToDisk.Load(),

		UpstreamConnects:      st.UpstreamConnects.Load(),
		UpstreamFullSyncs:     st.UpstreamFullSyncs.Load(),
		UpstreamPartialSyncs:  st.UpstreamPartialSyncs.Load(),
		UpstreamLinkFailures:  st.UpstreamLinkFailures.Load(),
		UpstreamRDBBytes:      st.UpstreamRDBBytes.Load(),
		UpstreamChecksumFails: st.UpstreamChecksumFails.Load(),
		UpstreamRDBCheckFails: st.UpstreamRDBCheckFails.Load(),
		UpstreamStreamErrors:  st.UpstreamStreamErrors.Load(),
		UpstreamQueryLimits:   st.UpstreamQueryLimits.Load(),
		UpstreamLinkCorrupt:   st.UpstreamLinkCorrupt.Load(),

		SnapshotFetchBytes: st.SnapshotFetchBytes.Load(),

		ClusterChecks:         st.ClusterChecks.Load(),
		ClusterCheckFailures:  st.ClusterCheckFailures.Load(),
		ClusterPrimaryChanges: st.ClusterPrimaryChanges.Load(),
		ClusterSlots:          loadSlots(&st.ClusterSlots),
		ReplicasDropped:       st.ReplicasDropped.Load(),
		EvictedSnapshots:      st.EvictedSnapshots.Load(),
		EvictedBytes:          st.EvictedBytes.Load(),

		ACLDeniedAuth:          st.ACLDeniedAuth.Load(),
		ACLDeniedCmd:           st.ACLDeniedCmd.Load(),
		ACLDeniedKey:           st.ACLDeniedKey.Load(),
		ACLDeniedChannel:       st.ACLDeniedChannel.Load(),
		QueryLimitDisconnects:  st.QueryLimitDisconnects.Load(),
		OutputLimitDisconnects: st.OutputLimitDisconnects.Load(),
		TLSConnectionsReceived: st.TLSConnectionsReceived.Load(),
		TLSHandshakeFailures:   st.TLSHandshakeFailures.Load(),
		MetricsAuthFailures:    st.MetricsAuthFailures.Load(),
		MetricsAuthThrottled:   st.MetricsAuthThrottled.Load(),
	}
	c.NetInputBytes = st.NetInputBytes.Load() + c.ReplInputBytes
	c.NetOutputBytes = st.NetOutputBytes.Load() + c.ReplOutputBytes
	for i := range st.FullSyncs {
		c.FullSyncs[i] = st.FullSyncs[i].Load()
	}
	for i := range st.ReplicaCloses {
		c.ReplicaCloses[i] = st.ReplicaCloses[i].Load()
		c.ClientCloses[i] = st.ClientCloses[i].Load()
	}
	for p := range downstream.NumWritePaths {
		c.RelayDelays[p] = st.RelayDelays.Read(p)
	}
	return c
}

// loadSlots returns the slots p holds, nil for none.
func loadSlots(p *atomic.Pointer[[]clustertopo.SlotRange]) []clustertopo.SlotRange {
	if s := p.Load(); s != nil {
		return *s
	}
	return nil
}

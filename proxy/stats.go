package proxy

import (
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/report"
)

// stats are the server's counters, shown by INFO stats and reset by CONFIG
// RESETSTAT. Every field is atomic: any goroutine may add to them. A counter
// added here is loaded by read (below) into the report INFO and /metrics
// are made from (report.go), a field of report.Counters, and so reaches
// both with a line in each of package report's renderings.
type stats struct {
	connectionsReceived atomic.Int64           // total_connections_received
	commandsProcessed   atomic.Int64           // total_commands_processed
	rejectedConnections atomic.Int64           // rejected_connections
	netInputBytes       atomic.Int64           // total_net_input_bytes (clients and replicas)
	netOutputBytes      atomic.Int64           // total_net_output_bytes (clients and replicas)
	replInputBytes      atomic.Int64           // total_net_repl_input_bytes (from the primary)
	replOutputBytes     atomic.Int64           // total_net_repl_output_bytes (to replicas)
	syncFull            atomic.Int64           // sync_full
	syncPartialOK       atomic.Int64           // sync_partial_ok
	syncPartialErr      atomic.Int64           // sync_partial_err
	fullSyncs           history.FullSyncCounts // sync_full by reason (proxy section)
	logPartialSyncs     atomic.Int64           // partial resyncs that started from the stream log
	replicasToDisk      atomic.Int64           // replicas moved from memory to the stream log

	// The upstream link (proxy section).
	upstreamConnects      atomic.Int64           // connections made to the primary
	upstreamFullSyncs     atomic.Int64           // +FULLRESYNC received and completed
	upstreamPartialSyncs  atomic.Int64           // +CONTINUE received
	upstreamLinkFailures  atomic.Int64           // link attempts or links that ended with an error
	upstreamRDBBytes      atomic.Int64           // RDB payload bytes received
	upstreamChecksumFails atomic.Int64           // snapshots whose CRC64 did not match
	upstreamStreamErrors  atomic.Int64           // links dropped for stream bytes the scanner refused
	upstreamQueryLimits   atomic.Int64           // links dropped for unpublished bytes over master-query-buffer-limit
	upstreamLinkCorrupt   atomic.Int64           // link_corrupt_errors: links, main or side, ended by corrupt compressed input
	snapshotFetchBytes    atomic.Int64           // payload bytes received by fetches (the fetches themselves are package snapshots')
	replicasDropped       atomic.Int64           // replicas disconnected by a limit or timeout
	replicaCloses         downstream.CloseCounts // replicas closed, per reason
	clientCloses          downstream.CloseCounts // other clients closed, per reason
	evictedSnapshots      atomic.Int64           // evicted_snapshots: spilled to disk or dropped
	evictedBytes          atomic.Int64           // evicted_bytes: their memory

	// Clients the proxy refused or closed (Redis 7's names).
	aclDeniedAuth          atomic.Int64 // acl_access_denied_auth: failed AUTH
	queryLimitDisconnects  atomic.Int64 // client_query_buffer_limit_disconnections
	outputLimitDisconnects atomic.Int64 // client_output_buffer_limit_disconnections

	// tls-port (proxy section; Redis has no such counters).
	tlsConnectionsReceived atomic.Int64 // tls_connections_received: accepted on tls-port
	tlsHandshakeFailures   atomic.Int64 // tls_handshake_failures: of those, handshakes that failed
}

// reset zeroes the counters CONFIG RESETSTAT resets in Redis 7.0
// (resetServerStats: INFO stats, evicted_keys's analogues included). The
// upstream link's, the snapshot fetches' and the close-reason counters of
// the proxy section stay: like the replication state, they are not stats
// Redis has.
func (s *stats) reset() {
	for _, c := range []*atomic.Int64{
		&s.connectionsReceived, &s.commandsProcessed, &s.rejectedConnections,
		&s.netInputBytes, &s.netOutputBytes, &s.replInputBytes, &s.replOutputBytes,
		&s.syncFull, &s.syncPartialOK, &s.syncPartialErr,
		&s.aclDeniedAuth, &s.queryLimitDisconnects, &s.outputLimitDisconnects,
		&s.evictedSnapshots, &s.evictedBytes,
	} {
		c.Store(0)
	}
	for i := range s.fullSyncs {
		s.fullSyncs[i].Store(0)
	}
}

// read loads every counter, as a report's (report.go); the snapshot
// fetches' are package snapshots', read by the report itself.
func (st *stats) read() report.Counters {
	c := report.Counters{
		ConnectionsReceived: st.connectionsReceived.Load(),
		CommandsProcessed:   st.commandsProcessed.Load(),
		RejectedConnections: st.rejectedConnections.Load(),
		ReplInputBytes:      st.replInputBytes.Load(),
		ReplOutputBytes:     st.replOutputBytes.Load(),
		SyncFull:            st.syncFull.Load(),
		SyncPartialOK:       st.syncPartialOK.Load(),
		SyncPartialErr:      st.syncPartialErr.Load(),
		LogPartialSyncs:     st.logPartialSyncs.Load(),
		ReplicasToDisk:      st.replicasToDisk.Load(),

		UpstreamConnects:      st.upstreamConnects.Load(),
		UpstreamFullSyncs:     st.upstreamFullSyncs.Load(),
		UpstreamPartialSyncs:  st.upstreamPartialSyncs.Load(),
		UpstreamLinkFailures:  st.upstreamLinkFailures.Load(),
		UpstreamRDBBytes:      st.upstreamRDBBytes.Load(),
		UpstreamChecksumFails: st.upstreamChecksumFails.Load(),
		UpstreamStreamErrors:  st.upstreamStreamErrors.Load(),
		UpstreamQueryLimits:   st.upstreamQueryLimits.Load(),
		UpstreamLinkCorrupt:   st.upstreamLinkCorrupt.Load(),

		SnapshotFetchBytes: st.snapshotFetchBytes.Load(),
		ReplicasDropped:    st.replicasDropped.Load(),
		EvictedSnapshots:   st.evictedSnapshots.Load(),
		EvictedBytes:       st.evictedBytes.Load(),

		ACLDeniedAuth:          st.aclDeniedAuth.Load(),
		QueryLimitDisconnects:  st.queryLimitDisconnects.Load(),
		OutputLimitDisconnects: st.outputLimitDisconnects.Load(),
		TLSConnectionsReceived: st.tlsConnectionsReceived.Load(),
		TLSHandshakeFailures:   st.tlsHandshakeFailures.Load(),
	}
	c.NetInputBytes = st.netInputBytes.Load() + c.ReplInputBytes
	c.NetOutputBytes = st.netOutputBytes.Load() + c.ReplOutputBytes
	for i := range st.fullSyncs {
		c.FullSyncs[i] = st.fullSyncs[i].Load()
	}
	for i := range st.replicaCloses {
		c.ReplicaCloses[i] = st.replicaCloses[i].Load()
		c.ClientCloses[i] = st.clientCloses[i].Load()
	}
	return c
}

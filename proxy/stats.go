package proxy

import (
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapshots"

	"github.com/replproxy/replproxy/proxy/downstream"
)

import "sync/atomic"

// stats are the server's counters, shown by INFO stats and reset by CONFIG
// RESETSTAT. Every field is atomic: any goroutine may add to them. A counter
// added here is loaded by read (below) into the report INFO is written from
// (report.go, info.go), and so reaches /metrics with one line in
// report.figures.
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

// counters is the stats read at one moment, one plain value per counter: a
// report's (report.go).
type counters struct {
	connectionsReceived, commandsProcessed, rejectedConnections int64
	netInputBytes, netOutputBytes                               int64 // replication's included, as INFO shows them
	replInputBytes, replOutputBytes                             int64
	syncFull, syncPartialOK, syncPartialErr                     int64
	fullSyncs                                                   [history.NumFullSyncReasons]int64
	logPartialSyncs, replicasToDisk                             int64

	upstreamConnects, upstreamFullSyncs, upstreamPartialSyncs, upstreamLinkFailures    int64
	upstreamRDBBytes, upstreamChecksumFails, upstreamStreamErrors, upstreamQueryLimits int64
	upstreamLinkCorrupt                                                                int64

	snapshotFetchBytes             int64
	fetches                        snapshots.Counts // package snapshots' own
	replicasDropped                int64
	replicaCloses, clientCloses    [downstream.NumCloseReasons]int64
	evictedSnapshots, evictedBytes int64

	aclDeniedAuth, queryLimitDisconnects, outputLimitDisconnects int64
	tlsConnectionsReceived, tlsHandshakeFailures                 int64
}

// read loads every counter.
func (st *stats) read() counters {
	c := counters{
		connectionsReceived: st.connectionsReceived.Load(),
		commandsProcessed:   st.commandsProcessed.Load(),
		rejectedConnections: st.rejectedConnections.Load(),
		replInputBytes:      st.replInputBytes.Load(),
		replOutputBytes:     st.replOutputBytes.Load(),
		syncFull:            st.syncFull.Load(),
		syncPartialOK:       st.syncPartialOK.Load(),
		syncPartialErr:      st.syncPartialErr.Load(),
		logPartialSyncs:     st.logPartialSyncs.Load(),
		replicasToDisk:      st.replicasToDisk.Load(),

		upstreamConnects:      st.upstreamConnects.Load(),
		upstreamFullSyncs:     st.upstreamFullSyncs.Load(),
		upstreamPartialSyncs:  st.upstreamPartialSyncs.Load(),
		upstreamLinkFailures:  st.upstreamLinkFailures.Load(),
		upstreamRDBBytes:      st.upstreamRDBBytes.Load(),
		upstreamChecksumFails: st.upstreamChecksumFails.Load(),
		upstreamStreamErrors:  st.upstreamStreamErrors.Load(),
		upstreamQueryLimits:   st.upstreamQueryLimits.Load(),
		upstreamLinkCorrupt:   st.upstreamLinkCorrupt.Load(),

		snapshotFetchBytes: st.snapshotFetchBytes.Load(),
		replicasDropped:    st.replicasDropped.Load(),
		evictedSnapshots:   st.evictedSnapshots.Load(),
		evictedBytes:       st.evictedBytes.Load(),

		aclDeniedAuth:          st.aclDeniedAuth.Load(),
		queryLimitDisconnects:  st.queryLimitDisconnects.Load(),
		outputLimitDisconnects: st.outputLimitDisconnects.Load(),
		tlsConnectionsReceived: st.tlsConnectionsReceived.Load(),
		tlsHandshakeFailures:   st.tlsHandshakeFailures.Load(),
	}
	c.netInputBytes = st.netInputBytes.Load() + c.replInputBytes
	c.netOutputBytes = st.netOutputBytes.Load() + c.replOutputBytes
	for i := range st.fullSyncs {
		c.fullSyncs[i] = st.fullSyncs[i].Load()
	}
	for i := range st.replicaCloses {
		c.replicaCloses[i] = st.replicaCloses[i].Load()
		c.clientCloses[i] = st.clientCloses[i].Load()
	}
	return c
}

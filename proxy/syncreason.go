package proxy

import "sync/atomic"

// A fullSyncReason says why a replica's PSYNC or SYNC got a full sync rather
// than a partial resync. Each is counted in INFO's proxy section
// (sync_full_<reason>) and in replproxy_full_syncs_total{reason}; together
// they add up to Redis's sync_full.
type fullSyncReason int32

const (
	partialAccepted          fullSyncReason = iota // not a full sync: +CONTINUE
	fullSyncRequested                              // PSYNC ? -1, SYNC, or a replid not as Redis makes them
	fullSyncNoHistory                              // the proxy has not completed a sync with its primary
	fullSyncReplIDMismatch                         // a replid that is neither replid nor replid2 up to second_repl_offset
	fullSyncOffsetOutOfRange                       // the offset is not in the backlog
	numFullSyncReasons
)

// String returns the reason as INFO and the metrics name it.
func (r fullSyncReason) String() string {
	switch r {
	case partialAccepted:
		return "none"
	case fullSyncRequested:
		return "requested"
	case fullSyncNoHistory:
		return "no_history"
	case fullSyncReplIDMismatch:
		return "replid_mismatch"
	case fullSyncOffsetOutOfRange:
		return "offset_out_of_range"
	}
	return "unknown"
}

// fullSyncCounts counts full syncs per reason.
type fullSyncCounts [numFullSyncReasons]atomic.Int64

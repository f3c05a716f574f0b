package history

import "sync/atomic"

// A FullSyncReason says why a replica's PSYNC or SYNC got a full sync rather
// than a partial resync. Each is counted in INFO's proxy section
// (sync_full_<reason>) and in replproxy_full_syncs_total{reason}; together
// they add up to Redis's sync_full.
type FullSyncReason int32

const (
	PartialAccepted          FullSyncReason = iota // not a full sync: +CONTINUE
	FullSyncRequested                              // PSYNC ? -1, SYNC, or a replid not as Redis makes them
	FullSyncNoHistory                              // the proxy has not completed a sync with its primary
	FullSyncReplIDMismatch                         // a replid that is neither replid nor replid2 up to second_repl_offset
	FullSyncOffsetOutOfRange                       // the offset is not in the backlog
	NumFullSyncReasons
)

// String returns the reason as INFO and the metrics name it.
func (r FullSyncReason) String() string {
	switch r {
	case PartialAccepted:
		return "none"
	case FullSyncRequested:
		return "requested"
	case FullSyncNoHistory:
		return "no_history"
	case FullSyncReplIDMismatch:
		return "replid_mismatch"
	case FullSyncOffsetOutOfRange:
		return "offset_out_of_range"
	}
	return "unknown"
}

// FullSyncCounts counts full syncs per reason.
type FullSyncCounts [NumFullSyncReasons]atomic.Int64

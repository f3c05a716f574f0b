package history

import "testing"

// TestReasonNames: the names INFO (sync_full_<reason>,
// snapshot_fetches_<reason>) and /metrics' reason labels show; they are
// part of the output and do not change.
func TestReasonNames(t *testing.T) {
	for r, want := range map[FullSyncReason]string{
		PartialAccepted:          "none",
		FullSyncRequested:        "requested",
		FullSyncNoHistory:        "no_history",
		FullSyncReplIDMismatch:   "replid_mismatch",
		FullSyncOffsetOutOfRange: "offset_out_of_range",
		NumFullSyncReasons:       "unknown",
	} {
		if got := r.String(); got != want {
			t.Errorf("FullSyncReason %d is %q, want %q", r, got, want)
		}
	}
	for r, want := range map[FetchReason]string{
		FetchReplicaNeeded: "replica_needed",
		FetchRefresh:       "refresh",
		NumFetchReasons:    "unknown",
	} {
		if got := r.String(); got != want {
			t.Errorf("FetchReason %d is %q, want %q", r, got, want)
		}
	}
}

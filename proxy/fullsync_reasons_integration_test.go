package proxy

import (
	"strings"
	"testing"

	"github.com/replproxy/replproxy/replid"
)

// TestFullSyncReasons: each full sync is counted under why the replica could
// not continue (INFO proxy sync_full_<reason>), and the reasons add up to
// Redis's sync_full. Real primary; raw replicas ask for what a real replica
// would after a fresh start, a failover to a stranger, and a long absence.
func TestFullSyncReasons(t *testing.T) {
	primary, pc := startPrimary(t)
	p, xc := startProxyOf(t, primary)
	pc.MustDo(t, "SET", "k", "v")
	waitOffsetsEqual(t, pc, xc)
	id := xc.Info(t, "replication")["master_replid"]

	for _, ask := range []struct{ replID, offset string }{
		{"?", "-1"},           // a new replica
		{replid.New(), "1"},   // another primary's history
		{id, "1000000000"},    // far past the stream's end
		{"not-a-replid", "5"}, // not as Redis makes them: as "?"
	} {
		r := dialRawReplica(t, p, true)
		line, err := r.psync(ask.replID, ask.offset)
		if err != nil || !strings.HasPrefix(line, "+FULLRESYNC ") {
			t.Fatalf("PSYNC %s %s: %q %v, want +FULLRESYNC", ask.replID, ask.offset, line, err)
		}
		r.conn.Close()
	}
	info := xc.Info(t, "everything")
	for field, want := range map[string]string{
		"sync_full":                     "4",
		"sync_partial_err":              "3",
		"sync_full_requested":           "2",
		"sync_full_no_history":          "0",
		"sync_full_replid_mismatch":     "1",
		"sync_full_offset_out_of_range": "1",
	} {
		if got := info[field]; got != want {
			t.Errorf("INFO %s = %q, want %s", field, got, want)
		}
	}
}

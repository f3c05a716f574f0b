package proxy

import (
	"testing"

	"github.com/replproxy/replproxy/proxy/config"
)

// TestJudgedOutput: a replica reading the stream log is held to the limits
// by its lag whether or not the log still runs. Judging it by memory while
// the log was down let a stalled replica outlive any limit (it holds none).
func TestJudgedOutput(t *testing.T) {
	const end = 10_000
	for _, tc := range []struct {
		name    string
		live    bool
		onDisk  bool
		diskOff int64
		want    int64
	}{
		{"on disk, log live", true, true, 1001, 9000},
		{"on disk, log down", false, true, 1001, 9000},
		{"on disk, ahead of the end", false, true, end + 5, 0},
		{"neither cursor nor disk (syncing)", true, false, 0, 0},
	} {
		if got := judgedOutput(nil, tc.live, tc.onDisk, tc.diskOff, end); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestReplicaHardLimit: the hard limit applies raised to the backlog, as in
// Redis, for replicas and the log's follower alike; 0 stays no limit.
func TestReplicaHardLimit(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.ReplBacklogSize = 8 << 20
	for _, tc := range []struct{ hard, want int64 }{{1 << 20, 8 << 20}, {64 << 20, 64 << 20}, {0, 0}} {
		cfg.ClientOutputBufferLimit.Replica.Hard = tc.hard
		if got := replicaHardLimit(cfg); got != tc.want {
			t.Errorf("hard %d with an 8mb backlog: %d, want %d", tc.hard, got, tc.want)
		}
	}
}

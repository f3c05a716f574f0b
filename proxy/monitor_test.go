package proxy

import (
	"testing"

	"github.com/replproxy/replproxy/proxy/config"
)

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

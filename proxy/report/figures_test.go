package report

import (
	"testing"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/metrics"
)

// TestReplicaSeriesOneIdentity: two connections under one identity (a
// replica reconnecting while its old connection is still registered) make
// one series, the newest connection's; distinct identities keep theirs.
func TestReplicaSeriesOneIdentity(t *testing.T) {
	got := replicaSeries([]Replica{
		{ID: 3, IP: "10.0.0.1", Port: 6379, State: downstream.Online, Offset: 900, HasLag: true, LagBytes: 100},
		{ID: 4, IP: "10.0.0.2", Port: 6379, State: downstream.Online, Offset: 1000, HasLag: true},
		{ID: 9, IP: "10.0.0.1", Port: 6379, State: downstream.SendBulk, LagBytes: 1000},
	})
	want := []metrics.Replica{
		{IP: "10.0.0.1", Port: "6379", State: "send_bulk", LagBytes: 1000},
		{IP: "10.0.0.2", Port: "6379", State: "online", HasLag: true, Offset: 1000},
	}
	if len(got) != len(want) {
		t.Fatalf("replicaSeries = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("replicaSeries[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

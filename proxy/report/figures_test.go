package report

import (
	"testing"
	"time"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/upstream"
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

// TestFiguresUpstreamTimes: the link's last-I/O and down-since series are
// there exactly when INFO shows master_last_io_seconds_ago (connected or
// syncing) and master_link_down_since_seconds (not connected, once it
// was), with the same values.
func TestFiguresUpstreamTimes(t *testing.T) {
	now := time.Unix(1700000000, 0)
	cfg := config.DefaultConfig()
	cfg.MasterHost, cfg.MasterPort = "10.1.2.3", 6380
	ago := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, tc := range []struct {
		name       string
		up         upstream.Status
		lastIO     string // INFO's master_last_io_seconds_ago
		down       string // INFO's master_link_down_since_seconds; "" when absent
		hasLastIO  bool
		hasDown    bool
		lastIOSecs int64
		downSecs   int64
	}{
		{"connected", upstream.Status{State: upstream.StateConnected, LastIO: ago(time.Second)}, "1", "", true, false, 1, 0},
		{"syncing, never up", upstream.Status{State: upstream.StateSync, LastIO: ago(4 * time.Second)}, "4", "-1", true, false, 4, 0},
		{"connecting, was up", upstream.Status{State: upstream.StateConnecting, DownSince: ago(70 * time.Second)}, "-1", "70", false, true, 0, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Now: now, Config: cfg, Up: tc.up}
			got := info(r, "replication")
			if got["master_last_io_seconds_ago"] != tc.lastIO || got["master_link_down_since_seconds"] != tc.down {
				t.Errorf("INFO master_last_io_seconds_ago:%s master_link_down_since_seconds:%s, want %s and %q",
					got["master_last_io_seconds_ago"], got["master_link_down_since_seconds"], tc.lastIO, tc.down)
			}
			f := r.Figures()
			if f.HasUpstreamLastIO != tc.hasLastIO || f.UpstreamLastIOSeconds != tc.lastIOSecs {
				t.Errorf("last I/O %v %d, want %v %d", f.HasUpstreamLastIO, f.UpstreamLastIOSeconds, tc.hasLastIO, tc.lastIOSecs)
			}
			if f.HasUpstreamLinkDown != tc.hasDown || f.UpstreamLinkDownSeconds != tc.downSecs {
				t.Errorf("link down %v %d, want %v %d", f.HasUpstreamLinkDown, f.UpstreamLinkDownSeconds, tc.hasDown, tc.downSecs)
			}
		})
	}
}

// TestFiguresRelayDelays: each write path's histogram reaches /metrics'
// figures labelled by its path, in seconds, its buckets made cumulative and
// its count including the writes above every bound; and a replica's delays
// are its gauges, in seconds.
func TestFiguresRelayDelays(t *testing.T) {
	r := &Report{Config: config.DefaultConfig(), Replicas: []Replica{
		{IP: "10.0.0.1", Port: 6379, State: downstream.Online, HasLag: true,
			Unsent: 250 * time.Millisecond, Unacked: 1500 * time.Millisecond},
	}}
	loop := &r.Stats.RelayDelays[downstream.WriteLoop]
	loop.Buckets[0], loop.Buckets[2], loop.Buckets[len(loop.Buckets)-1] = 3, 4, 2
	loop.Sum = 90 * time.Second
	f := r.Figures()
	if len(f.RelayDelays) != int(downstream.NumWritePaths) {
		t.Fatalf("%d relay delay histograms, want one per path", len(f.RelayDelays))
	}
	h := f.RelayDelays[downstream.WriteLoop]
	bounds := downstream.RelayBounds()
	if h.Label != "loop" || len(h.Bounds) != len(bounds) || h.Bounds[0] != 0.0001 || h.Bounds[len(bounds)-1] != 30 {
		t.Errorf("loop histogram %s, bounds %v: want loop, in seconds", h.Label, h.Bounds)
	}
	if h.Counts[0] != 3 || h.Counts[1] != 3 || h.Counts[2] != 7 || h.Counts[len(bounds)-1] != 7 || h.Count != 9 || h.Sum != 90 {
		t.Errorf("loop histogram counts %v, count %d, sum %v; want cumulative 3, 3, 7 … 7, count 9, sum 90", h.Counts, h.Count, h.Sum)
	}
	if in := f.RelayDelays[downstream.WriteInline]; in.Label != "inline" || in.Count != 0 {
		t.Errorf("inline histogram %+v, want empty", in)
	}
	if rp := f.Replicas[0]; rp.UnsentSeconds != 0.25 || rp.UnackedSeconds != 1.5 {
		t.Errorf("replica delays %v and %v s, want 0.25 and 1.5", rp.UnsentSeconds, rp.UnackedSeconds)
	}
}

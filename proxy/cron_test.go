package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
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

// TestMonitorQuiet: with nothing moving, the monitor slows to a round per
// quietInterval after quietAfter; a few bytes of stream (the primary's
// PING) leave it quiet, and the stream's producer (Published), once
// quietBytes have come, brings a round at once, the next ones at
// monitorInterval again.
func TestMonitorQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 3 s): waits for the monitor to go quiet, then watches it")
	}
	p := startProxy(t) // no primary: nothing moves
	redistest.WaitFor(t, 10*time.Second, "the monitor to go quiet", p.cron.quiet.Load)
	rounds := p.cron.rounds.Load()
	time.Sleep(quietInterval + quietInterval/2)
	if n := p.cron.rounds.Load() - rounds; n > 2 {
		t.Fatalf("%d monitor rounds in %v while quiet, want at most 2", n, quietInterval+quietInterval/2)
	}
	// The stream moves (as the link's goroutine would move it), and its
	// producer says so.
	st, host := p.hist.Stream(), upstreamHost{p.Server}
	if err := st.Append([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		t.Fatal(err)
	}
	host.Published()
	if !p.cron.quiet.Load() {
		t.Fatal("a PING woke the quiet monitor")
	}
	rounds = p.cron.rounds.Load()
	value := strings.Repeat("v", quietBytes)
	if err := st.Append([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + strconv.Itoa(len(value)) + "\r\n" + value + "\r\n")); err != nil {
		t.Fatal(err)
	}
	host.Published()
	redistest.WaitFor(t, quietInterval/2, "a round once woken", func() bool { return p.cron.rounds.Load() > rounds })
	if p.cron.quiet.Load() {
		t.Fatal("the monitor is quiet right after a publish woke it")
	}
}

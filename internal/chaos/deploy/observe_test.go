package deploy

import (
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/chaos"
	"github.com/replproxy/replproxy/internal/redistest"
)

// TestReplState: a node's replid, offset and link are read from its INFO
// replication as a server writes it; a primary's section has no link,
// which is not up.
func TestReplState(t *testing.T) {
	replica := redistest.ParseInfo("# Replication\r\nrole:slave\r\nmaster_host:10.1.2.1\r\nmaster_port:7002\r\n" +
		"master_link_status:up\r\nslave_repl_offset:1200\r\nmaster_replid:8f1c\r\nmaster_replid2:0000\r\nmaster_repl_offset:1234567\r\n")
	want := chaos.NodeState{Name: "a1", ReplID: "8f1c", Offset: 1234567, LinkUp: true}
	if got := replState("a1", replica); got != want {
		t.Errorf("replState of a linked replica = %+v, want %+v", got, want)
	}
	replica["master_link_status"] = "down"
	if got := replState("a1", replica); got.LinkUp {
		t.Errorf("replState of a replica whose link is down = %+v: link up", got)
	}
	primary := redistest.ParseInfo("# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmaster_replid:77ab\r\nmaster_repl_offset:99\r\n")
	if got := replState("redis-1", primary); got != (chaos.NodeState{Name: "redis-1", ReplID: "77ab", Offset: 99}) {
		t.Errorf("replState of a primary = %+v", got)
	}
}

// TestMemoryOf: a proxy's memory sample is what INFO memory reports, and
// its bound is maxmemory plus the stream log's window, the backlog and a
// replica output buffer's hard limit for each replica and one more.
func TestMemoryOf(t *testing.T) {
	mem := redistest.ParseInfo("# Memory\r\nused_memory:300000000\r\nused_memory_human:286.10M\r\n" +
		"mem_not_counted_for_evict:60000000\r\nmaxmemory:268435456\r\nmaxmemory_policy:evict-snapshots\r\n")
	repl := redistest.ParseInfo("# Replication\r\nrole:slave\r\nconnected_slaves:3\r\n" +
		"repl_backlog_size:1048576\r\nrepl_log_window:134217728\r\n")
	limits := "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
	got := memoryOf("proxy-a", mem, repl, limits)
	want := chaos.Memory{
		Name:       "proxy-a",
		Used:       300000000,
		NotCounted: 60000000,
		MaxMemory:  268435456,
		Bound:      268435456 + 134217728 + 1048576 + 4*268435456,
	}
	if got != want {
		t.Errorf("memoryOf = %+v, want %+v", got, want)
	}
	// No replica and no stream log: maxmemory, the backlog and one buffer.
	delete(repl, "repl_log_window")
	repl["connected_slaves"] = "0"
	if got := memoryOf("standby", mem, repl, limits); got.Bound != 268435456+1048576+268435456 {
		t.Errorf("memoryOf with no replica: bound %d", got.Bound)
	}
}

// TestReplicaHardLimit: the replica class's hard limit is read under
// either of its names, and is 0 when the value has none.
func TestReplicaHardLimit(t *testing.T) {
	for _, tc := range []struct {
		limits string
		want   int64
	}{
		{"normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", 268435456},
		{"normal 0 0 0 replica 536870912 134217728 60", 536870912},
		{"pubsub 33554432 8388608 60", 0},
		{"slave", 0},
		{"", 0},
	} {
		if got := replicaHardLimit(tc.limits); got != tc.want {
			t.Errorf("replicaHardLimit(%q) = %d, want %d", tc.limits, got, tc.want)
		}
	}
}

// TestCaused: a fault's cost is the full syncs served across it by the
// primary's tier and by the proxies, each counted apart; a counter that
// went down (its server restarted) counts from zero, and a node not read
// both times is left out.
func TestCaused(t *testing.T) {
	before := map[string]int64{"redis-1": 4, "redis-2": 0, "proxy-a": 2, "standby": 1, "proxy-b": 7}
	after := map[string]int64{"redis-1": 1, "redis-2": 1, "proxy-a": 3, "proxy-b": 9}
	got, shares := caused(before, after)
	if want := (chaos.Cost{Primary: 2, Proxies: 3}); got != want {
		t.Errorf("caused = %+v, want %+v", got, want)
	}
	if want := "redis-1 4→1, redis-2 0→1, proxy-a 2→3, proxy-b 7→9"; shares != want {
		t.Errorf("shares = %q, want %q", shares, want)
	}
	if got, _ := caused(before, before); got != (chaos.Cost{}) {
		t.Errorf("caused with no change = %+v, want none", got)
	}
}

// TestPollEvery: the condition is asked until it holds, and no longer
// than the timeout.
func TestPollEvery(t *testing.T) {
	calls := 0
	if !pollEvery(time.Second, time.Millisecond, func() bool { calls++; return calls == 3 }) || calls != 3 {
		t.Errorf("a condition that holds at the third call: %d calls", calls)
	}
	start := time.Now()
	if pollEvery(20*time.Millisecond, time.Millisecond, func() bool { return false }) {
		t.Error("a condition that never holds was reported held")
	}
	if took := time.Since(start); took < 20*time.Millisecond || took > 5*time.Second {
		t.Errorf("gave up after %v, want the 20 ms timeout", took)
	}
}

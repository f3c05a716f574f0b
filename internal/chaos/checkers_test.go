package chaos

import (
	"strings"
	"testing"
	"time"
)

// Each checker is fed a wrong answer it must catch, and the right one it
// must let pass: a checker that cannot fail is not a checker.

func TestConvergedCatchesAReplicaBehind(t *testing.T) {
	good := []NodeState{{Name: "a1", Digest: "d1", LinkUp: true}, {Name: "b1", Digest: "d1", LinkUp: true}}
	if ok, behind := Converged("d1", good); !ok {
		t.Fatalf("replicas at the primary's digest reported behind: %v", behind)
	}
	for name, wrong := range map[string]NodeState{
		"other digest": {Name: "b1", Digest: "d0", LinkUp: true},
		"link down":    {Name: "b1", Digest: "d1", LinkUp: false},
		"unreachable":  {Name: "b1"},
	} {
		t.Run(name, func(t *testing.T) {
			ok, behind := Converged("d1", []NodeState{good[0], wrong})
			if ok || len(behind) != 1 || !strings.HasPrefix(behind[0], "b1 ") {
				t.Fatalf("Converged = %v, %v; want b1 behind", ok, behind)
			}
		})
	}
}

// TestAtOffsetCatchesAReplicaShort: the gate before the digests holds a
// replica short of the primary's offset or with its link down, and lets
// one at or past it through.
func TestAtOffsetCatchesAReplicaShort(t *testing.T) {
	good := []NodeState{{Name: "a1", Offset: 100, LinkUp: true}, {Name: "b1", Offset: 114, LinkUp: true}}
	if ok, behind := AtOffset(100, good); !ok {
		t.Fatalf("replicas at the primary's offset reported behind: %v", behind)
	}
	for name, wrong := range map[string]NodeState{
		"short":       {Name: "b1", Offset: 99, LinkUp: true},
		"link down":   {Name: "b1", Offset: 100, LinkUp: false},
		"unreachable": {Name: "b1"},
	} {
		t.Run(name, func(t *testing.T) {
			ok, behind := AtOffset(100, []NodeState{good[0], wrong})
			if ok || len(behind) != 1 || !strings.HasPrefix(behind[0], "b1 ") {
				t.Fatalf("AtOffset = %v, %v; want b1 behind", ok, behind)
			}
		})
	}
}

func TestCheckReplIDsCatchesAForeignHistory(t *testing.T) {
	now := time.Now()
	ok := []NodeState{{Name: "a1", ReplID: "r1"}, {Name: "proxy-a", ReplID: "r0"}} // replid and replid2
	if vs := CheckReplIDs(now, "r1", "r0", ok); len(vs) != 0 {
		t.Fatalf("replid and replid2 reported: %v", vs)
	}
	vs := CheckReplIDs(now, "r1", "r0", append(ok, NodeState{Name: "b2", ReplID: "rX"}))
	if len(vs) != 1 || vs[0].Checker != CheckReplID || !strings.Contains(vs[0].Detail, "b2") {
		t.Fatalf("foreign replid: %v, want one replid violation naming b2", vs)
	}
}

func TestOffsetTrackerCatchesAnOffsetBackwards(t *testing.T) {
	var o OffsetTracker
	now := time.Now()
	steps := []struct {
		s    NodeState
		want bool // a violation
	}{
		{NodeState{Name: "a1", ReplID: "r1", Offset: 100}, false},
		{NodeState{Name: "a1", ReplID: "r1", Offset: 100}, false}, // no writes
		{NodeState{Name: "a1", ReplID: "r1", Offset: 250}, false},
		{NodeState{Name: "a1", ReplID: "r1", Offset: 200}, true}, // the wrong answer
		{NodeState{Name: "a1", ReplID: "r2", Offset: 10}, false}, // another history
		{NodeState{Name: "b1", ReplID: "r1", Offset: 10}, false}, // another node
	}
	for i, st := range steps {
		if v := o.Observe(now, st.s); (v != nil) != st.want {
			t.Fatalf("step %d %+v: violation %v, want one: %v", i, st.s, v, st.want)
		}
	}
	// A node killed and restarted is a new incarnation; a sample of the old
	// one that arrives after Forget is dropped.
	stale := o.Epoch("a1")
	o.Forget("a1")
	if v := o.Observe(now, NodeState{Name: "a1", ReplID: "r1", Offset: 999, Epoch: stale}); v != nil {
		t.Fatalf("stale sample: %v", v)
	}
	if v := o.Observe(now, NodeState{Name: "a1", ReplID: "r1", Offset: 5, Epoch: o.Epoch("a1")}); v != nil {
		t.Fatalf("new incarnation compared with the old one (or the stale sample): %v", v)
	}
}

func TestCheckCostCatchesAnUnexpectedFullSync(t *testing.T) {
	now := time.Now()
	kill := Fault{Kind: ProxyKill, Target: "proxy-a"}
	if vs := CheckCost(now, kill, Expected(ProxyKill, "proxy-a"), Cost{}); len(vs) != 0 {
		t.Fatalf("no full sync reported: %v", vs)
	}
	vs := CheckCost(now, kill, Expected(ProxyKill, "proxy-a"), Cost{Proxies: 1})
	if len(vs) != 1 || vs[0].Checker != CheckFullSync || !strings.Contains(vs[0].Detail, "behind the proxies") {
		t.Fatalf("a full sync behind the proxies after a proxy kill: %v", vs)
	}
	vs = CheckCost(now, Fault{Kind: PrimaryKill, Target: "redis-1"}, Expected(PrimaryKill, "redis-1"), Cost{Primary: 2})
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "at the primary") {
		t.Fatalf("two forks after a failover: %v", vs)
	}
	if vs := CheckCost(now, Fault{Kind: ReplicaKill, Target: "a1"}, Expected(ReplicaKill, "a1"), Cost{Primary: 1, Proxies: 1}); len(vs) != 0 {
		t.Fatalf("a killed replica's one full sync from its proxy (and its fetch) reported: %v", vs)
	}
	if vs := CheckCost(now, Fault{Kind: ReplicaKill, Target: "a1"}, Expected(ReplicaKill, "a1"), Cost{Primary: 1, Proxies: 2}); len(vs) != 1 {
		t.Fatalf("two full syncs from the proxy for one killed replica: %v", vs)
	}
	// Behind proxy B, the snapshot may cross both proxies: proxy B's fetch
	// is a full sync proxy A serves.
	if vs := CheckCost(now, Fault{Kind: ReplicaKill, Target: "b1"}, Expected(ReplicaKill, "b1"), Cost{Primary: 1, Proxies: 2}); len(vs) != 0 {
		t.Fatalf("a killed replica's full syncs from proxy B and proxy A reported: %v", vs)
	}
	if vs := CheckCost(now, Fault{Kind: ReplicaKill, Target: "b1"}, Expected(ReplicaKill, "b1"), Cost{Primary: 1, Proxies: 3}); len(vs) != 1 {
		t.Fatalf("three full syncs behind the proxies for one killed replica: %v", vs)
	}
	// A counter that went down belongs to a restarted node: all of it is new.
	for _, c := range []struct{ before, after, want int64 }{{3, 5, 2}, {3, 1, 1}, {0, 0, 0}} {
		if got := SyncDelta(c.before, c.after); got != c.want {
			t.Errorf("SyncDelta(%d, %d) = %d, want %d", c.before, c.after, got, c.want)
		}
	}
}

func TestScanLogCatchesARaceAndAPanic(t *testing.T) {
	now := time.Now()
	clean := []byte(`{"@level":"info","@message":"upstream link up"}` + "\n")
	if vs := ScanLog(now, "proxy-a.log", clean); len(vs) != 0 {
		t.Fatalf("clean log: %v", vs)
	}
	bad := []byte("==================\nWARNING: DATA RACE\nWrite at 0x00c000 by goroutine 7:\n" +
		"panic: runtime error: index out of range [3] with length 3\n")
	vs := ScanLog(now, "proxy-a.stderr", bad)
	if len(vs) != 2 || vs[0].Checker != CheckLogs || !strings.Contains(vs[0].Detail, "line 2") || !strings.Contains(vs[1].Detail, "line 4") {
		t.Fatalf("race and panic: %v", vs)
	}
}

func TestMemoryTrackerCatchesAProxyOverItsLimits(t *testing.T) {
	var mt MemoryTracker
	now := time.Now()
	ok := Memory{Name: "proxy-a", Used: 300 << 20, NotCounted: 200 << 20, MaxMemory: 256 << 20, Bound: 512 << 20}
	for range 10 {
		if v := mt.Observe(now, ok); v != nil {
			t.Fatalf("within its limits: %v", v)
		}
	}
	for name, wrong := range map[string]Memory{
		"over maxmemory": {Name: "proxy-a", Used: 300 << 20, NotCounted: 10 << 20, MaxMemory: 256 << 20, Bound: 512 << 20},
		"over the bound": {Name: "proxy-a", Used: 600 << 20, NotCounted: 500 << 20, MaxMemory: 256 << 20, Bound: 512 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			// A moment over the limit, before the monitor's eviction, is
			// not a violation; a run of samples is, reported once.
			if v := mt.Observe(now, wrong); v != nil {
				t.Fatalf("first sample over: %v", v)
			}
			mt.Observe(now, ok)
			var vs []*Violation
			for range overLimitSamples + 3 {
				if v := mt.Observe(now, wrong); v != nil {
					vs = append(vs, v)
				}
			}
			if len(vs) != 1 || vs[0].Checker != CheckMemory || !strings.Contains(vs[0].Detail, "proxy-a") {
				t.Fatalf("a proxy over its limit: %v, want one memory violation", vs)
			}
			mt.Observe(now, ok)
		})
	}
}

func TestCheckBaselineCatchesALeak(t *testing.T) {
	now := time.Now()
	base, slack := Resources{Goroutines: 60, FDs: 30}, Resources{Goroutines: 20, FDs: 10}
	if v := CheckBaselineOf(now, "proxy-b", base, Resources{Goroutines: 75, FDs: 35}, slack); v != nil {
		t.Fatalf("within slack: %v", v)
	}
	for name, leak := range map[string]Resources{
		"goroutines":  {Goroutines: 1060, FDs: 30}, // a storm's connections still served
		"descriptors": {Goroutines: 60, FDs: 1030},
	} {
		if v := CheckBaselineOf(now, "proxy-b", base, leak, slack); v == nil || v.Checker != CheckBaseline {
			t.Errorf("%s leaked: %v, want a baseline violation", name, v)
		}
	}
}

func TestCheckServedCertCatchesTheOldCertificate(t *testing.T) {
	now := time.Now()
	if v := CheckServedCert(now, "proxy-a", "7", "7"); v != nil {
		t.Fatalf("the new certificate: %v", v)
	}
	if v := CheckServedCert(now, "proxy-a", "7", "3"); v == nil || v.Checker != CheckCert {
		t.Fatalf("the old certificate served: %v, want a cert violation", v)
	}
}

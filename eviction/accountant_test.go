package eviction

import "testing"

func TestAccountRedisFormulas(t *testing.T) {
	const mib = 1 << 20
	fp := int64(blockSize + blockOverhead)
	cases := []struct {
		name                        string
		f                           Figures
		backlog, slaves, notCounted int64
	}{
		{"backlog only", Figures{StreamBlocks: 10 * fp, BacklogSize: mib}, 10 * fp, 0, 0},
		{"backlog full, no replica", Figures{StreamBlocks: 65 * fp, BacklogSize: mib}, 65 * fp, 0, 65*fp - 1052736},
		{"slow replica", Figures{StreamBlocks: 1000 * fp, BacklogSize: mib, Replicas: 1}, mib, 1000*fp - mib, 1000*fp - 1052736},
		{"free blocks are not counted", Figures{StreamBlocks: 10 * fp, BacklogSize: mib, FreeBlocks: 5 * fp}, 10 * fp, 0, 5 * fp},
		{"replica query buffers", Figures{StreamBlocks: 10 * fp, BacklogSize: mib, Replicas: 2, ReplicaClients: 1000}, 10 * fp, 1000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Account(tc.f)
			if r.ReplicationBacklog != tc.backlog || r.ClientsSlaves != tc.slaves || r.NotCountedForEvict != tc.notCounted {
				t.Fatalf("got backlog %d slaves %d not-counted %d; want %d %d %d",
					r.ReplicationBacklog, r.ClientsSlaves, r.NotCountedForEvict, tc.backlog, tc.slaves, tc.notCounted)
			}
			if r.Counted != r.UsedMemory-r.NotCountedForEvict {
				t.Fatal("counted is not used minus not-counted")
			}
		})
	}
}

// TestReplicaBuffersNeverCount: however much a replica pins, counted memory
// does not move; that is the seed change's promise.
func TestReplicaBuffersNeverCount(t *testing.T) {
	fp := int64(blockSize + blockOverhead)
	base := Figures{StreamBlocks: 70 * fp, BacklogSize: 1 << 20, Replicas: 1, Snapshots: 5 << 20, Runtime: 3 << 20}
	before := Account(base).Counted
	for _, extra := range []int64{1, 100, 100000} {
		f := base
		f.StreamBlocks += extra * fp
		if got := Account(f).Counted; got != before {
			t.Fatalf("%d pinned blocks moved counted memory from %d to %d", extra, before, got)
		}
		// Released into the free list: still not counted.
		f = base
		f.FreeBlocks = extra * fp
		if got := Account(f).Counted; got != before {
			t.Fatalf("%d free blocks moved counted memory from %d to %d", extra, before, got)
		}
	}
}

func TestPlan(t *testing.T) {
	rep := Report{Counted: 100, FreeBlocks: 30}
	cands := []Candidate{
		{ID: "newest", Bytes: 50, Newest: true},
		{ID: "busy", Bytes: 500, Busy: true},
		{ID: "old-small", Bytes: 10},
		{ID: "old-big", Bytes: 40},
	}
	cases := []struct {
		name    string
		max     int64
		policy  Policy
		ids     []string
		over    bool
		counted int64 // 0: rep's
	}{
		{"no limit", 0, EvictSnapshots, nil, false, 0},
		{"under the limit", 100, EvictSnapshots, nil, false, 0},
		{"noeviction reports", 50, NoEviction, nil, true, 0},
		{"a little over: the biggest old one", 90, EvictSnapshots, []string{"free", "old-big"}, false, 0},
		{"more: both old ones", 55, EvictSnapshots, []string{"free", "old-big", "old-small"}, false, 0},
		{"even the newest", 10, EvictSnapshots, []string{"free", "old-big", "old-small", "newest"}, false, 0},
		{"busy never, even at the end", 1, EvictSnapshots, []string{"free", "old-big", "old-small", "newest"}, false, 0},
		{"still over: the busy one stays", 1, EvictSnapshots, []string{"free", "old-big", "old-small", "newest"}, true, 600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rep
			if tc.counted != 0 {
				r.Counted = tc.counted
			}
			acts, over := Plan(r, tc.max, tc.policy, cands)
			var ids []string
			for _, a := range acts {
				if a.Kind == DropFreeBlocks {
					ids = append(ids, "free")
				} else {
					ids = append(ids, a.ID)
				}
			}
			if over != tc.over || len(ids) != len(tc.ids) {
				t.Fatalf("plan %v over %v; want %v over %v", ids, over, tc.ids, tc.over)
			}
			for i := range ids {
				if ids[i] != tc.ids[i] {
					t.Fatalf("plan %v; want %v", ids, tc.ids)
				}
			}
		})
	}
}

package eviction

import (
	"testing"

	"github.com/replproxy/replproxy/replbuf"
)

// The formulas themselves are replbuf's (replbuf.Usage, tested there); these
// tests check what Account adds to them.

// TestAccount: each Usage figure lands under its INFO name; free blocks and
// replica query buffers are added where Redis would put them; the proxy's
// replica count, not the stream's cursors, decides the backlog split.
func TestAccount(t *testing.T) {
	const mib = 1 << 20
	fp := int64(replbuf.BlockFootprint)
	// A full 1 MiB backlog with no cursor: 65 blocks, 1 of them not counted.
	u := replbuf.Usage{Blocks: 65, Total: 65 * fp, Index: 100, BacklogSize: mib,
		Backlog: 65*fp + 100, NotCountedForEvict: 65*fp - 1052736, Unpublished: 2 * fp}
	cases := []struct {
		name                                string
		f                                   Figures
		used, backlog, slaves, normal, notC int64
	}{
		{"stream only", Figures{Stream: u},
			67*fp + 100, 65*fp + 100, 0, 2 * fp, 65*fp - 1052736},
		{"free blocks are not counted", Figures{Stream: u, FreeBlocks: 5 * fp},
			72*fp + 100, 65*fp + 100, 0, 2 * fp, 70*fp - 1052736},
		{"a replica waiting for a snapshot", Figures{Stream: u, Replicas: 1},
			67*fp + 100, mib + 100, 65*fp - mib, 2 * fp, 65*fp - 1052736},
		{"replica query buffers", Figures{Stream: u, Replicas: 2, ReplicaClients: 1000},
			67*fp + 1100, mib + 100, 65*fp - mib + 1000, 2 * fp, 65*fp - 1052736},
		{"admin clients and the primary's query buffer", Figures{Stream: u, NormalClients: 300},
			67*fp + 400, 65*fp + 100, 0, 2*fp + 300, 65*fp - 1052736},
		{"compressed links are used, not counted", Figures{Stream: u, Replicas: 2, LinkCompression: 5000},
			67*fp + 5100, mib + 100, 65*fp - mib, 2 * fp, 65*fp - 1052736 + 5000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Account(tc.f)
			if r.UsedMemory != tc.used || r.ReplicationBacklog != tc.backlog || r.ClientsSlaves != tc.slaves ||
				r.ClientsNormal != tc.normal || r.NotCountedForEvict != tc.notC {
				t.Fatalf("got used %d backlog %d slaves %d normal %d not-counted %d; want %d %d %d %d %d",
					r.UsedMemory, r.ReplicationBacklog, r.ClientsSlaves, r.ClientsNormal, r.NotCountedForEvict,
					tc.used, tc.backlog, tc.slaves, tc.normal, tc.notC)
			}
			if r.TotalReplicationBuffers != u.Total {
				t.Fatalf("total replication buffers %d, stream total %d", r.TotalReplicationBuffers, u.Total)
			}
			if r.Counted != r.UsedMemory-r.NotCountedForEvict {
				t.Fatal("counted is not used minus not-counted")
			}
		})
	}
}

// TestReplicaBuffersNeverCount: however much a replica pins, counted memory
// does not move; that is the seed change's promise. The stream is a real one,
// so the figures are replbuf's own; its block index (a few bytes a block)
// is the stream's, not the replica's, and counts, so it is left out here.
func TestReplicaBuffersNeverCount(t *testing.T) {
	s := replbuf.NewStream(0, &replbuf.Config{BacklogSize: 1 << 20})
	defer s.Release()
	c, err := s.Attach(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	block := make([]byte, replbuf.BlockSize)
	send := func(blocks int) {
		for range blocks {
			if err := s.Append(block); err != nil {
				t.Fatal(err)
			}
		}
	}
	base := Figures{Replicas: 1, Snapshots: 5 << 20, Runtime: 3 << 20}
	send(70)
	base.Stream = s.Usage()
	counted := func(f Figures) int64 { return Account(f).Counted - f.Stream.Index }
	before := counted(base)
	for _, extra := range []int{1, 100, 1000} {
		send(extra)
		f := base
		f.Stream = s.Usage()
		if got := counted(f); got != before {
			t.Fatalf("%d more pinned blocks moved counted memory from %d to %d", extra, before, got)
		}
		// Released into the free list: still not counted.
		f = base
		f.FreeBlocks = int64(extra) * replbuf.BlockFootprint
		if got := counted(f); got != before {
			t.Fatalf("%d free blocks moved counted memory from %d to %d", extra, before, got)
		}
		// Compressed links' encoders are the replicas' too.
		f = base
		f.LinkCompression = int64(extra) << 20
		if got := counted(f); got != before || Account(f).UsedMemory != Account(base).UsedMemory+f.LinkCompression {
			t.Fatalf("%d MiB of link encoders moved counted memory from %d to %d, or are not in used memory", extra, before, got)
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

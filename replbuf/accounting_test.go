package replbuf

import "testing"

// TestUsageRedisFormulas checks usageOf against Redis 7's figures for a
// 1 MiB backlog (1052736 is the backlog size plus 65 block overheads).
func TestUsageRedisFormulas(t *testing.T) {
	const mib = 1 << 20
	fp := int64(BlockFootprint)
	cases := []struct {
		name                        string
		blocks                      int64
		cursors                     int
		backlog, slaves, notCounted int64
	}{
		{"backlog only", 10, 0, 10 * fp, 0, 0},
		{"backlog full, no replica", 65, 0, 65 * fp, 0, 65*fp - 1052736},
		{"slow replica", 1000, 1, mib, 1000*fp - mib, 1000*fp - 1052736},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := usageOf(tc.blocks, 0, tc.cursors, mib)
			if u.Backlog != tc.backlog || u.Replicas != tc.slaves || u.NotCountedForEvict != tc.notCounted {
				t.Fatalf("got backlog %d slaves %d not-counted %d; want %d %d %d",
					u.Backlog, u.Replicas, u.NotCountedForEvict, tc.backlog, tc.slaves, tc.notCounted)
			}
		})
	}
}

// TestUsageSplit: a replica with no cursor yet (waiting for a snapshot)
// splits the buffer as Redis does when told; the index is always backlog.
func TestUsageSplit(t *testing.T) {
	const mib = 1 << 20
	fp := int64(BlockFootprint)
	u := usageOf(65, 100, 0, mib)
	if b, p := u.Split(false); b != u.Backlog || p != u.Replicas || b != 65*fp+100 || p != 0 {
		t.Fatalf("Split(false) = %d, %d; usage %+v", b, p, u)
	}
	if b, p := u.Split(true); b != mib+100 || p != 65*fp-mib {
		t.Fatalf("Split(true) = %d, %d; want %d, %d", b, p, mib+100, 65*fp-mib)
	}
	if b, p := usageOf(10, 100, 1, mib).Split(true); b != 10*fp+100 || p != 0 {
		t.Fatalf("under the backlog size, Split(true) = %d, %d", b, p)
	}
}

// TestPinnedBlocksNeverCount: however much a replica pins, the counted part
// of the buffer (Total - NotCountedForEvict) does not move; that is the seed
// change's promise.
func TestPinnedBlocksNeverCount(t *testing.T) {
	const backlog = 1 << 20
	before := usageOf(70, 0, 1, backlog)
	for _, extra := range []int64{1, 100, 100000} {
		u := usageOf(70+extra, 0, 1, backlog)
		if got, want := u.Total-u.NotCountedForEvict, before.Total-before.NotCountedForEvict; got != want {
			t.Fatalf("%d pinned blocks moved the counted buffer from %d to %d", extra, want, got)
		}
	}
}

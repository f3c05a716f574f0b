package proxy

import "testing"

// TestQuorumOffset: the n-th highest ACK, capped at what was applied; -1 with
// fewer than n replicas.
func TestQuorumOffset(t *testing.T) {
	for _, tc := range []struct {
		name    string
		acks    []int64
		n       int
		applied int64
		want    int64
	}{
		{"none", nil, 1, 100, -1},
		{"fewer than n", []int64{90}, 2, 100, -1},
		{"one of one", []int64{90}, 1, 100, 90},
		{"highest of many", []int64{10, 90, 50}, 1, 100, 90},
		{"second highest", []int64{10, 90, 50}, 2, 100, 50},
		{"all of them", []int64{10, 90, 50}, 3, 100, 10},
		{"ties", []int64{70, 70, 20}, 2, 100, 70},
		{"capped at applied", []int64{120, 130}, 2, 100, 100},
		{"zero acks count", []int64{0, 0}, 2, 100, 0},
		{"n zero", []int64{50}, 0, 100, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quorumOffset(tc.acks, tc.n, tc.applied); got != tc.want {
				t.Errorf("quorumOffset(%v, %d, %d) = %d, want %d", tc.acks, tc.n, tc.applied, got, tc.want)
			}
		})
	}
}

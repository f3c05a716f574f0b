package upstream

import (
	"slices"
	"testing"
	"time"
)

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

// TestNthLatest: the n-th latest ACK time; -1 with fewer than n.
func TestNthLatest(t *testing.T) {
	for _, tc := range []struct {
		times []int64
		n     int
		want  int64
	}{
		{nil, 1, -1},
		{[]int64{5}, 2, -1},
		{[]int64{5, 9, 7}, 1, 9},
		{[]int64{5, 9, 7}, 2, 7},
		{[]int64{5, 9, 7}, 3, 5},
		{[]int64{5}, 0, -1},
	} {
		if got := nthLatest(slices.Clone(tc.times), tc.n); got != tc.want {
			t.Errorf("nthLatest(%v, %d) = %d, want %d", tc.times, tc.n, got, tc.want)
		}
	}
}

// TestQuorumAckQuiet: the ACK is held at the quorum's offset, and quiet
// when the n-th latest replica ACK is older than ackFresh, or missing.
func TestQuorumAckQuiet(t *testing.T) {
	now := time.Unix(1000, 0)
	recent, old := now.Add(-time.Second).UnixNano(), now.Add(-2*ackFresh).UnixNano()
	for _, tc := range []struct {
		name  string
		times []int64
		quiet bool
	}{
		{"both recent", []int64{recent, recent}, false},
		{"one recent, one old", []int64{recent, old}, true},
		{"too few", []int64{recent}, true},
	} {
		a := QuorumAck([]int64{90, 50}, tc.times, 2, 100, now)
		if !a.Held || a.Off != 50 || a.Quiet != tc.quiet {
			t.Errorf("%s: %+v, want held at 50, quiet %v", tc.name, a, tc.quiet)
		}
	}
}

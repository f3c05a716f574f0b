package downstream

import (
	"testing"
	"time"
)

// TestJudgedOutput: a replica reading the stream log is held to the limits
// by its lag whether or not the log still runs. Judging it by memory while
// the log was down let a stalled replica outlive any limit (it holds none).
func TestJudgedOutput(t *testing.T) {
	const end = 10_000
	for _, tc := range []struct {
		name    string
		live    bool
		onDisk  bool
		diskOff int64
		want    int64
	}{
		{"on disk, log live", true, true, 1001, 9000},
		{"on disk, log down", false, true, 1001, 9000},
		{"on disk, ahead of the end", false, true, end + 5, 0},
		{"neither cursor nor disk (syncing)", true, false, 0, 0},
	} {
		if got := judgedOutput(nil, tc.live, tc.onDisk, tc.diskOff, end); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestOverLimit: a replica over the hard limit is closed at once, over the
// soft one after its period, and an online one silent for longer than
// repl-timeout for its timeout; below them it is left alone and its soft
// clock restarts.
func TestOverLimit(t *testing.T) {
	now := time.Now()
	lim := Limits{Hard: 1000, Soft: 500, SoftPeriod: time.Second, Timeout: 10 * time.Second, End: 10_000}
	onDisk := func(lag int64) *Replica {
		r := &Replica{}
		r.onDisk.Store(true)
		r.diskOff.Store(lim.End + 1 - lag)
		r.ackTime.Store(now.UnixNano())
		r.state.Store(int32(Online))
		return r
	}
	if reason, _ := onDisk(1000).OverLimit(now, lim); reason != CloseOutputHardLimit {
		t.Errorf("at the hard limit: %s", reason)
	}
	r := onDisk(600)
	if reason, _ := r.OverLimit(now, lim); reason != CloseNone || r.softSince != now {
		t.Errorf("first over the soft limit: %s, since %v", reason, r.softSince)
	}
	if reason, _ := r.OverLimit(now.Add(2*time.Second), lim); reason != CloseOutputSoftLimit {
		t.Errorf("over the soft limit past its period: %s", reason)
	}
	r = onDisk(600)
	r.OverLimit(now, lim)
	r.diskOff.Store(lim.End)
	if reason, _ := r.OverLimit(now.Add(time.Second/2), lim); reason != CloseNone || !r.softSince.IsZero() {
		t.Errorf("back under the soft limit: %s, since %v", reason, r.softSince)
	}
	if reason, _ := r.OverLimit(now.Add(11*time.Second), lim); reason != CloseReplicaTimeout {
		t.Errorf("silent past repl-timeout: %s", reason)
	}
	r.legacy = true
	if reason, _ := r.OverLimit(now.Add(11*time.Second), lim); reason != CloseNone {
		t.Errorf("a SYNC replica silent past repl-timeout: %s", reason)
	}
}

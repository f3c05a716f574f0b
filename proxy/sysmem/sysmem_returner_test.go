package sysmem

import (
	"testing"
	"time"
)

// TestMemoryReturnerDebounce: memory is returned when used_memory lies 32 MiB
// below its highest point since the last return, never twice within 5 s,
// and a fall during those 5 s is returned once they end.
func TestMemoryReturnerDebounce(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		at   time.Duration
		used int64
		want bool
	}{
		{0, 10 * mib, false},
		{100 * time.Millisecond, 200 * mib, false},               // growing
		{200 * time.Millisecond, 180 * mib, false},               // 20 MiB down
		{300 * time.Millisecond, 169 * mib, false},               // 31 MiB down
		{400 * time.Millisecond, 168 * mib, true},                // 32 MiB down from the high point
		{500 * time.Millisecond, 10 * mib, false},                // a fall within 5 s: later
		{5 * time.Second, 10 * mib, false},                       // 4.6 s since the return
		{5400 * time.Millisecond, 10 * mib, true},                // 5 s: the fall is returned
		{5500 * time.Millisecond, 10 * mib, false},               // nothing new
		{20 * time.Second, 11 * mib, false},                      // steady
		{21 * time.Second, 100 * mib, false},                     // a new peak
		{22 * time.Second, 80 * mib, false},                      // 20 MiB down
		{23 * time.Second, 90 * mib, false},                      // up again, below the peak
		{24 * time.Second, 60 * mib, true},                       // 40 MiB below the peak
		{24*time.Second + 100*time.Millisecond, 20 * mib, false}, // debounced
		{29*time.Second + 100*time.Millisecond, 20 * mib, true},  // returned after 5 s
		{60 * time.Second, 20*mib - ReturnMemoryDrop/2, false},   // small falls do not add up
		{61 * time.Second, 20*mib - ReturnMemoryDrop + 1, false}, // ... until 32 MiB in all
		{62 * time.Second, 20*mib - ReturnMemoryDrop + 0, true},  // which they do here
	}
	var m Returner
	for i, st := range steps {
		if got := m.Observe(at(st.at), st.used); got != st.want {
			t.Fatalf("step %d (at %v, used %d MiB): return %v, want %v", i, st.at, st.used/mib, got, st.want)
		}
	}
}

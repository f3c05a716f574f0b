package main

import (
	"math"
	"testing"
)

// TestGoMemoryLimit: twice maxmemory plus 64 MiB, no limit for 0, and a
// maxmemory too large to double saturates at "no limit" instead of wrapping
// to a negative or tiny limit.
func TestGoMemoryLimit(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		maxmemory, want int64
	}{
		{0, math.MaxInt64},
		{-1, math.MaxInt64},
		{1, 2 + 64*mib},
		{100 * mib, 264 * mib},
		{(math.MaxInt64 - 64*mib) / 2, math.MaxInt64 - 1},
		{(math.MaxInt64-64*mib)/2 + 1, math.MaxInt64},
		{math.MaxInt64 / 2, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
	} {
		if got := goMemoryLimit(tc.maxmemory); got != tc.want {
			t.Errorf("goMemoryLimit(%d) = %d, want %d", tc.maxmemory, got, tc.want)
		}
	}
}

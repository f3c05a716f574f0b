package replbuf

import (
	"slices"
	"testing"
	"unsafe"
)

// TestUsableSizeMatchesRuntime pins the size-class table to the running Go
// release: growing a slice through slices.Grow rounds its capacity the way the
// allocator does (growslice calls roundupsize), so the two must agree at every
// class boundary and around it.
func TestUsableSizeMatchesRuntime(t *testing.T) {
	var sizes []int
	for _, c := range sizeClasses {
		sizes = append(sizes, c-1, c, c+1)
	}
	sizes = append(sizes, 32769, 40960, 40961, 100000, 1<<20, 1<<20+1)
	for _, n := range sizes {
		if n <= 16 {
			continue // the tiny allocator packs noscan objects under 16 bytes together
		}
		got := UsableSize(n)
		want := cap(slices.Grow([]byte(nil), n))
		if got != want {
			t.Errorf("UsableSize(%d) = %d, runtime rounds to %d", n, got, want)
		}
	}
}

// TestUsableSizeWithPointers checks the malloc-header rule against the runtime:
// for pointer slices growslice leaves the header out of the capacity it reports.
func TestUsableSizeWithPointers(t *testing.T) {
	for _, k := range []int{1, 2, 16, 63, 64, 65, 100, 1000, 1023, 1024, 4095, 4096, 5000, 100000} {
		capBytes := cap(slices.Grow([]*block(nil), k)) * pointerSize
		got := usableSizeWithPointers(k * pointerSize)
		want := capBytes
		if capBytes > minSizeForMallocHeader && capBytes+mallocHeaderSize <= maxSmallSize {
			want += mallocHeaderSize
		}
		if got != want {
			t.Errorf("usableSizeWithPointers(%d pointers) = %d, runtime: %d", k, got, want)
		}
	}
}

func TestBlockOverhead(t *testing.T) {
	if got := usableSizeWithPointers(int(unsafe.Sizeof(block{}))); got != BlockOverhead {
		t.Fatalf("block node occupies %d bytes, BlockOverhead says %d", got, BlockOverhead)
	}
	if got := UsableSize(BlockSize); got != BlockSize {
		t.Fatalf("a %d-byte payload occupies %d bytes", BlockSize, got)
	}
}

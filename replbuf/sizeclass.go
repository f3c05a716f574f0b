package replbuf

import "unsafe"

// sizeClasses are the Go runtime's small-object size classes (Go 1.26,
// internal/runtime/gc/sizeclasses.go). Memory is counted by the size the
// allocator really sets aside, not by the size asked for, so this table is part
// of the accounting. TestUsableSizeMatchesRuntime pins it against slices.Grow:
// a Go release that changes the classes fails that test instead of skewing the
// figures silently. Read-only.
var sizeClasses = [...]int{
	8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280,
	1408, 1536, 1792, 2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528,
	6784, 6912, 8192, 9472, 9728, 10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072,
	20480, 21760, 24576, 27264, 28672, 32768,
}

const (
	maxSmallSize = 32768 // largest size served from a size class
	pageSize     = 8192  // larger objects are rounded up to whole pages
	// Pointer-bearing objects above this size carry an 8-byte malloc header
	// (Go 1.22+), unless they are large objects.
	minSizeForMallocHeader = 512
	mallocHeaderSize       = 8
	pointerSize            = int(unsafe.Sizeof(uintptr(0)))
)

// UsableSize reports how many bytes of heap the Go allocator sets aside for an
// allocation of n bytes that holds no pointers (a []byte payload, say): n
// rounded up to its size class, or to whole 8 KiB pages above 32 KiB.
// It is the Go counterpart of Redis's zmalloc_usable_size.
func UsableSize(n int) int {
	if n <= 0 {
		return 0
	}
	if n > maxSmallSize {
		return (n + pageSize - 1) &^ (pageSize - 1)
	}
	lo, hi := 0, len(sizeClasses)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if sizeClasses[mid] < n {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return sizeClasses[lo]
}

// usableSizeWithPointers is UsableSize for an object that holds pointers,
// which costs a malloc header when it is a small object over 512 bytes.
func usableSizeWithPointers(n int) int {
	if n > minSizeForMallocHeader && n+mallocHeaderSize <= maxSmallSize {
		return UsableSize(n + mallocHeaderSize)
	}
	return UsableSize(n)
}

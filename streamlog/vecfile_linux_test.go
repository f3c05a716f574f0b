package streamlog

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// BenchmarkSegmentWrite is the choice between the page cache and O_DIRECT
// for the segment files: 1 MiB batches of 64 distinct 16 KiB blocks (the
// stream's, page aligned as Go allocates them) written by one writev each
// over an allocated file, through the page cache (fdatasync'ed at the end,
// as a Sync makes them durable; and not at all, the kernel's writeback
// then uncounted) and with O_DIRECT (durable as written, as far as the
// device cache). Its best case: every batch whole pages at an aligned
// offset, which the stream's batches are not (they end where the stream
// does, mid-page).
//
// The -cold variants take each batch from a ring of 64 MiB of blocks,
// twice the machine's last-level cache here, so that the source bytes
// come from memory, as the follower's do: it writes blocks the socket
// filled and the replicas' writev read a few milliseconds before, which
// other work has pushed out of the cache since. The page cache then pays
// a copy from memory; O_DIRECT hands the pages to the device as they are.
func BenchmarkSegmentWrite(b *testing.B) {
	b.Run("page-cache-fdatasync", func(b *testing.B) { benchSegmentWrite(b, 0, true, 64) })
	b.Run("page-cache", func(b *testing.B) { benchSegmentWrite(b, 0, false, 64) })
	b.Run("direct", func(b *testing.B) { benchSegmentWrite(b, syscall.O_DIRECT, false, 64) })
	b.Run("page-cache-fdatasync-cold", func(b *testing.B) { benchSegmentWrite(b, 0, true, coldBlocks) })
	b.Run("direct-cold", func(b *testing.B) { benchSegmentWrite(b, syscall.O_DIRECT, false, coldBlocks) })
}

// coldBlocks is the ring of the -cold variants: 64 MiB of 16 KiB blocks.
const coldBlocks = 4096

// benchSegmentWrite writes 1 MiB batches, the next 64 of ring blocks each,
// to a file opened with flag; sync fdatasyncs it once the loop is done.
func benchSegmentWrite(b *testing.B, flag int, sync bool, ring int) {
	const size = 1 << 30 // the file written over and over
	path := filepath.Join(b.TempDir(), "seg")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|flag, 0o600)
	if err != nil {
		b.Skip("O_DIRECT refused:", err)
	}
	defer f.Close()
	if !preallocate(f, size) {
		b.Skip("no fallocate here")
	}
	blocks := make([][]byte, ring)
	for i := range blocks {
		blocks[i] = stream(16<<10, uint64(i))
		if uintptr(unsafe.Pointer(&blocks[i][0]))%4096 != 0 {
			b.Skip("blocks not page aligned")
		}
	}
	w := newVecWriter(f)
	next := 0 // the ring's block the next batch starts at
	batch := func() {
		if err := w.writeBuffers(blocks[next : next+64]); err != nil {
			b.Fatal(err)
		}
		next = (next + 64) % ring
	}
	pass := func(n int64) {
		if _, err := f.Seek(0, 0); err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < n; off += 1 << 20 {
			batch()
		}
	}
	pass(size) // every block written once: allocated and written extents, as a recycled segment's
	if err := datasync(f); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	start := cpuTime()
	written := int64(0)
	for b.Loop() {
		if written%size == 0 {
			if _, err := f.Seek(0, 0); err != nil {
				b.Fatal(err)
			}
		}
		batch()
		written += 1 << 20
	}
	if sync {
		if err := datasync(f); err != nil {
			b.Fatal(err)
		}
	}
	reportCPUPerGB(b, start, 1<<20)
}

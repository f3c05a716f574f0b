package streamlog

import (
	"io"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPUPerGB reports the CPU seconds the loop took per GB processed.
func reportCPUPerGB(b *testing.B, start time.Duration, bytesPerOp int64) {
	gb := float64(bytesPerOp) * float64(b.N) / 1e9
	b.ReportMetric((cpuTime()-start).Seconds()/gb, "cpu-s/GB")
}

// BenchmarkAppend is the log follower's work per batch: 64 slices of 16 KiB
// (one MiB, the shared blocks' size) appended, the last ending a command,
// by one AppendBuffers (the follower's call), or per-block by one Append
// each (how the follower appended before). Its CPU per GB is what the
// stream log costs the proxy. empty starts from an empty log that never
// drops a segment (every segment a new file); recycled runs a full log
// whose every new segment is a dropped one's file.
func BenchmarkAppend(b *testing.B) {
	empty := Options{MaxBytes: 1 << 50, SegmentBytes: 64 << 20}
	// Segments of 64 MiB, as the default repl-log-size (1 GiB) makes them;
	// full is prefilled past MaxBytes and two segments, so that every new
	// segment is a recycled file.
	full := Options{MaxBytes: 256 << 20, SegmentBytes: 64 << 20}
	b.Run("empty", func(b *testing.B) { benchAppend(b, empty, 0, false) })
	b.Run("recycled", func(b *testing.B) { benchAppend(b, full, 384<<20, false) })
	b.Run("empty-per-block", func(b *testing.B) { benchAppend(b, empty, 0, true) })
	b.Run("recycled-per-block", func(b *testing.B) { benchAppend(b, full, 384<<20, true) })
}

// benchAppend appends batches of 64 blocks to a log opened with opts, after
// prefill bytes appended outside the timing; perBlock appends them one by
// one.
func benchAppend(b *testing.B, opts Options, prefill int64, perBlock bool) {
	l, _ := openDir(b, b.TempDir(), opts)
	defer l.Close()
	if err := l.Reset(testID, 0); err != nil {
		b.Fatal(err)
	}
	// 64 distinct blocks, as the stream's are.
	blocks := make([][]byte, 64)
	for i := range blocks {
		blocks[i] = stream(16<<10, uint64(i))
	}
	batch := func() {
		if !perBlock {
			if err := l.AppendBuffers(blocks, true); err != nil {
				b.Fatal(err)
			}
			return
		}
		for i, block := range blocks {
			if err := l.Append(block, i == 63); err != nil {
				b.Fatal(err)
			}
		}
	}
	for range prefill / (64 << 14) {
		batch()
	}
	b.SetBytes(64 << 14)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		batch()
	}
	reportCPUPerGB(b, start, 64<<14)
}

// BenchmarkReaderWriteTo is a replica reading the log from disk: each record
// read, verified and written (here to io.Discard, the buffer path).
func BenchmarkReaderWriteTo(b *testing.B) {
	l, _ := openDir(b, b.TempDir(), Options{MaxBytes: 1 << 30})
	defer l.Close()
	l.Reset(testID, 0)
	block := stream(16<<10, 1)
	for range 1024 { // 16 MiB
		l.Append(block, true)
	}
	b.SetBytes(16 << 20)
	b.ReportAllocs()
	start := cpuTime()
	defer func() { reportCPUPerGB(b, start, 16<<20) }()
	for b.Loop() {
		r, err := l.NewReader(1)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := r.WriteTo(onlyWriter{io.Discard}, 1<<20); err != nil {
				if err == io.EOF {
					break
				}
				b.Fatal(err)
			}
		}
		r.Close()
	}
}

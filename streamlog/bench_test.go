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
// (one MiB, the shared blocks' size) appended as records, the last ending a
// command. Its CPU per GB is what the stream log costs the proxy.
func BenchmarkAppend(b *testing.B) {
	l, _ := openDir(b, b.TempDir(), Options{MaxBytes: 256 << 20})
	defer l.Close()
	if err := l.Reset(testID, 0); err != nil {
		b.Fatal(err)
	}
	block := stream(16<<10, 1)
	b.SetBytes(64 << 14)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		for i := range 64 {
			if err := l.Append(block, i == 63); err != nil {
				b.Fatal(err)
			}
		}
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

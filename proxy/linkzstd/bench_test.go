package linkzstd

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/replproxy/replproxy/internal/cachedata"
)

// benchData are the streams the codec is measured on, each 32 MiB of
// replication stream as a primary writes it:
//   - cache: internal/cachedata (JSON documents, session hashes, short
//     strings, counters; its doc gives the shape);
//   - bench-d3, bench-d512: what redis-benchmark -t set -r 1000000 writes
//     with -d 3 (its default) and -d 512: SET key:<12 digits, zero-padded
//     random below 1,000,000> and a value of d 'x' bytes.
func benchData(tb testing.TB) []struct {
	name string
	data []byte
} {
	tb.Helper()
	const size = 32 << 20
	return []struct {
		name string
		data []byte
	}{
		{"cache", cachedata.New(1).FillRESP(size)},
		{"bench-d3", redisBenchmarkSet(size, 3)},
		{"bench-d512", redisBenchmarkSet(size, 512)},
	}
}

// redisBenchmarkSet returns at least size bytes of the stream
// redis-benchmark -t set -r 1000000 -d valueSize makes a primary write.
func redisBenchmarkSet(size, valueSize int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	value := bytes.Repeat([]byte("x"), valueSize)
	out := make([]byte, 0, size+1024)
	for len(out) < size {
		out = append(out, "*3\r\n$3\r\nSET\r\n$16\r\nkey:"...)
		k := strconv.Itoa(rng.IntN(1_000_000))
		for range 12 - len(k) {
			out = append(out, '0')
		}
		out = append(out, k...)
		out = append(out, "\r\n$"...)
		out = strconv.AppendInt(out, int64(valueSize), 10)
		out = append(out, "\r\n"...)
		out = append(out, value...)
		out = append(out, "\r\n"...)
	}
	return out
}

// benchFlushes are the flush patterns: what a live stream of small
// commands does (a flush per ~600 B write), and a replica's batches at
// replbuf's 16 KiB blocks.
var benchFlushes = []int{600, 16 << 10}

// reportCodec adds the codec's figures to b: the ratio raw/wire and the
// codec's own CPU (Stats.CPU, thread time) per GB of raw stream.
func reportCodec(b *testing.B, s Stats) {
	if s.Raw == 0 || s.Wire == 0 {
		return
	}
	b.ReportMetric(float64(s.Raw)/float64(s.Wire), "ratio")
	b.ReportMetric(s.CPU.Seconds()/(float64(s.Raw)/1e9), "cpu-s/GB")
}

// compressBench writes data in writes of every bytes, each flushed, as a
// replica's writer does, over and over.
func compressBench(b *testing.B, data []byte, every int, newW func(io.Writer) *Writer) {
	w := newW(io.Discard)
	defer w.Close()
	b.SetBytes(int64(every))
	b.ReportAllocs()
	off := 0
	for b.Loop() {
		if off+every > len(data) {
			off = 0
		}
		w.Write(data[off : off+every])
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		off += every
	}
	reportCodec(b, w.Stats())
}

// BenchmarkCompress is the Writer's cost and ratio per data and flush
// pattern, at the shipped settings.
func BenchmarkCompress(b *testing.B) {
	for _, d := range benchData(b) {
		for _, every := range benchFlushes {
			b.Run(fmt.Sprintf("%s/flush=%d", d.name, every), func(b *testing.B) {
				compressBench(b, d.data, every, NewWriter)
			})
		}
	}
}

// BenchmarkDecompress is the Reader's cost per data and flush pattern:
// each op reads one flush's worth of raw bytes from a wire made by the
// shipped Writer.
func BenchmarkDecompress(b *testing.B) {
	for _, d := range benchData(b) {
		for _, every := range benchFlushes {
			b.Run(fmt.Sprintf("%s/flush=%d", d.name, every), func(b *testing.B) {
				wire := wireOf(b, d.data, every)
				buf := make([]byte, every)
				var total Stats
				r := NewReader(bytes.NewReader(wire))
				b.SetBytes(int64(every))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := io.ReadFull(r, buf); err != nil {
						if err != io.EOF && err != io.ErrUnexpectedEOF {
							b.Fatal(err)
						}
						// The wire is read whole: start over, as a new
						// link would (one Reader per 32 MiB).
						s := r.Stats()
						total.Raw, total.Wire, total.CPU = total.Raw+s.Raw, total.Wire+s.Wire, total.CPU+s.CPU
						r.Close()
						r = NewReader(bytes.NewReader(wire))
					}
				}
				s := r.Stats()
				total.Raw, total.Wire, total.CPU = total.Raw+s.Raw, total.Wire+s.Wire, total.CPU+s.CPU
				r.Close()
				reportCodec(b, total)
			})
		}
	}
}

// BenchmarkThreadCPU is what the CPU accounting adds to each measured span
// (a chunk's Flush, a chunk's decode): the lock, two clock readings, the
// unlock.
func BenchmarkThreadCPU(b *testing.B) {
	var sum int64
	for b.Loop() {
		runtime.LockOSThread()
		t0 := threadCPU()
		sum += int64(threadCPU() - t0)
		runtime.UnlockOSThread()
	}
	_ = sum
}

// BenchmarkEncoderSettings compares the encoder settings tried on the
// cache-like data, at both flush patterns. Shipped: SpeedFastest, a 1 MiB
// window, lower memory off (options.go).
func BenchmarkEncoderSettings(b *testing.B) {
	data := benchData(b)[0].data
	type setting struct {
		name      string
		level     zstd.EncoderLevel
		window    int
		lowMem    bool
		noEntropy bool
	}
	var settings []setting
	for _, level := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		for _, window := range []int{1 << 20, 4 << 20, 8 << 20} {
			settings = append(settings, setting{fmt.Sprintf("%s/window=%dM", level, window>>20), level, window, false, false})
		}
	}
	settings = append(settings,
		setting{"fastest/window=1M/lowmem", zstd.SpeedFastest, 1 << 20, true, false},
		setting{"fastest/window=1M/noentropy", zstd.SpeedFastest, 1 << 20, false, true})
	for _, s := range settings {
		for _, every := range benchFlushes {
			b.Run(fmt.Sprintf("%s/flush=%d", s.name, every), func(b *testing.B) {
				compressBench(b, data, every, func(dst io.Writer) *Writer {
					return newWriter(dst,
						zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false),
						zstd.WithEncoderLevel(s.level), zstd.WithWindowSize(s.window),
						zstd.WithLowerEncoderMem(s.lowMem), zstd.WithNoEntropyCompression(s.noEntropy))
				})
			})
		}
	}
}

// BenchmarkNewLink is a link's memory: B/op is what one Writer or one
// Reader allocates from its creation through its first chunk (the
// encoder's tables and window, the decoder's history at the Writer's
// window, the chunk buffers).
func BenchmarkNewLink(b *testing.B) {
	wire := wireOf(b, []byte("hello world"), 5)
	b.Run("writer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := NewWriter(io.Discard)
			w.Write([]byte("hello world"))
			w.Flush()
			w.Close()
		}
	})
	b.Run("reader", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := NewReader(bytes.NewReader(wire))
			io.ReadAll(r)
			r.Close()
		}
	})
}

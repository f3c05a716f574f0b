package rdbcheck

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchChunk is the size of the pieces a benchmark writes: the proxy's
// block size.
const benchChunk = 16 << 10

// benchPayloads are the RDBs the benchmarks walk: a mix of every common
// type in small values, as a cache holds them, and large strings, raw and
// compressed.
func benchPayloads() []struct {
	name string
	rdb  []byte
} {
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	large := newRDB(10).withAux()
	for i := range 64 {
		large.key(typeString, fmt.Sprint("blob:", i)).str(random(256 << 10))
	}
	compressed := newRDB(10).withAux()
	text := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 6000)
	for i := range 64 {
		compressed.key(typeString, fmt.Sprint("text:", i)).lzf(text[i : i+256<<10/2])
	}
	return []struct {
		name string
		rdb  []byte
	}{
		{"mixed", mixed(20000)},
		{"large-strings", large.end()},
		{"large-lzf-strings", compressed.end()},
	}
}

// BenchmarkWalker walks each payload in 16 KiB pieces; BenchmarkCRC64 sums
// the same bytes the same way, the cost the walk adds to.
func BenchmarkWalker(b *testing.B) {
	for _, p := range benchPayloads() {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.rdb)))
			b.ReportAllocs()
			for b.Loop() {
				w := NewWalker()
				for i := 0; i < len(p.rdb); i += benchChunk {
					if _, err := w.Write(p.rdb[i:min(i+benchChunk, len(p.rdb))]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCRC64(b *testing.B) {
	for _, p := range benchPayloads() {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(p.rdb)))
			b.ReportAllocs()
			for b.Loop() {
				var crc uint64
				for i := 0; i < len(p.rdb); i += benchChunk {
					crc = CRC64(crc, p.rdb[i:min(i+benchChunk, len(p.rdb))])
				}
			}
		})
	}
}

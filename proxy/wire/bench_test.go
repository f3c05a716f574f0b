package wire

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// BenchmarkStreamScanner scans streams in 16 KiB feeds, as the proxy receives them.
func BenchmarkStreamScanner(b *testing.B) {
	for _, bc := range []struct {
		name string
		in   []byte
	}{
		{"small-commands", realisticStream(rand.New(rand.NewPCG(1, 1)), 20000, 0)},
		{"set-1KiB", bytes.Repeat(AppendCommand(nil, "SET", "key:000001", strings.Repeat("v", 1024)), 1000)},
		{"value-20MiB", AppendCommand(nil, "SET", "big", strings.Repeat("v", 20<<20))},
		{"getack", bytes.Repeat([]byte(getAck), 10000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewStreamScanner(0)
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				s.Reset(0)
				for p := bc.in; len(p) > 0; {
					n := min(16<<10, len(p))
					if _, err := s.Feed(p[:n]); err != nil {
						b.Fatal(err)
					}
					p = p[n:]
				}
			}
		})
	}
}

// BenchmarkReadCommand reads the ACKs a replica sends once a second.
func BenchmarkReadCommand(b *testing.B) {
	in := bytes.Repeat(AppendCommand(nil, "REPLCONF", "ACK", "123456789"), 1000)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	rd := bytes.NewReader(in)
	for b.Loop() {
		rd.Reset(in)
		r := NewCommandReader(rd, Limits{})
		for range 1000 {
			if _, err := r.ReadCommand(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

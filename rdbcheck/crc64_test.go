package rdbcheck

import (
	"hash/crc64"
	"math/rand/v2"
	"testing"
)

func TestCRC64(t *testing.T) {
	// Redis's crc64.c test vector.
	if got := CRC64(0, []byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("CRC64(123456789) = %x", got)
	}
	// Against the standard library's table (which inverts before and
	// after), at every length and split.
	table := crc64.MakeTable(crcPoly)
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 300)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	for n := range len(b) {
		want := ^crc64.Update(^uint64(0), table, b[:n])
		if got := CRC64(0, b[:n]); got != want {
			t.Fatalf("length %d: %x, want %x", n, got, want)
		}
		if got := CRC64(CRC64(0, b[:n/3]), b[n/3:n]); got != want {
			t.Fatalf("length %d split at %d: %x, want %x", n, n/3, got, want)
		}
	}
	if n := testing.AllocsPerRun(10, func() { CRC64(0, make([]byte, 0)) }); n != 0 {
		t.Fatalf("CRC64 allocates %v times", n)
	}
}

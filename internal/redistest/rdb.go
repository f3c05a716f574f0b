package redistest

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"math/rand/v2"
)

// RDBWith returns a valid RDB (version 10, as Redis 7.0 writes) holding one
// string key, "k" in DB 0, whose value is value, with its CRC64 trailer: a
// payload of the tests' choosing (its size, its compressibility) that the
// proxy's RDB check accepts.
func RDBWith(value []byte) []byte {
	p := append(RDBHead(len(value)), value...)
	return append(p, RDBEnd(crc64Jones(0, p))...)
}

// RDBHead returns the bytes of the RDB RDBWith makes up to its value, for
// an n-byte value: a test streams an RDB of any size in pieces as RDBHead,
// the value's n bytes, and RDBEnd.
func RDBHead(n int) []byte {
	return appendLength(append([]byte("REDIS0010"), 0xfe, 0x00, 0x00, 0x01, 'k'), n)
}

// RDBEnd returns the end of an RDB whose bytes so far have the CRC64 crc
// (Redis's, as rdbcheck.CRC64 computes it): the end opcode and the CRC64
// trailer over them all.
func RDBEnd(crc uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{0xff}, crc64Jones(crc, []byte{0xff}))
}

// RDBOfSize returns a valid RDB of exactly n bytes (24 or more), as
// RDBWith makes it, its value bytes drawn from seed.
func RDBOfSize(n int, seed uint64) []byte {
	v := n - len(RDBHead(0)) + 1 - len(RDBEnd(0)) // the value and its length
	for _, k := range []int{1, 2, 5} {            // the length's own size
		if v-k >= 0 && len(appendLength(nil, v-k)) == k {
			value := make([]byte, v-k)
			rng := rand.New(rand.NewPCG(seed, uint64(n)))
			for i := range value {
				value[i] = byte(rng.Uint32())
			}
			return RDBWith(value)
		}
	}
	panic(fmt.Sprintf("redistest: no RDB of %d bytes", n))
}

// JunkRDB returns what an attacker's snapshot source sent: the header of
// an RDB Redis 7.0 takes, 4 KiB of junk, the end opcode and a zero trailer
// ("checksum disabled"), which a CRC64 check alone lets through and which
// makes a Redis replica loading it exit.
func JunkRDB() []byte {
	rng := rand.New(rand.NewPCG(46, 175))
	b := []byte("REDIS0010")
	for range 4096 {
		b = append(b, byte(rng.Uint32()))
	}
	b = append(b, 0xff)
	return append(b, make([]byte, 8)...)
}

// appendLength appends n in RDB's length encoding.
func appendLength(p []byte, n int) []byte {
	switch {
	case n < 1<<6:
		return append(p, byte(n))
	case n < 1<<14:
		return append(p, 0x40|byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(p, 0x80), uint32(n))
	}
}

// jonesTable is CRC-64/Jones, the RDB's checksum. The helpers compute it
// themselves, so that rdbcheck's own tests may use them.
var jonesTable = crc64.MakeTable(0x95AC9329AC4BC9B5)

// crc64Jones is Redis's CRC-64 of p, from crc: no inversion before or
// after, where hash/crc64's Update has both.
func crc64Jones(crc uint64, p []byte) uint64 { return ^crc64.Update(^crc, jonesTable, p) }

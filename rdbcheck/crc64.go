package rdbcheck

import "encoding/binary"

// crcPoly is Redis's CRC-64 polynomial (Jones, 0xad93d23594c935a9),
// bit-reversed for the reflected table.
const crcPoly = 0x95ac9329ac4bc9b5

// crcTables are the slicing-by-8 tables of crcPoly: crcTables[0] is the
// byte-at-a-time table, crcTables[k] advances a byte k further. Built once
// at start-up, read-only after.
var crcTables = makeCRCTables()

func makeCRCTables() *[8][256]uint64 {
	t := new([8][256]uint64)
	for i := range 256 {
		crc := uint64(i)
		for range 8 {
			if crc&1 == 1 {
				crc = crc>>1 ^ crcPoly
			} else {
				crc >>= 1
			}
		}
		t[0][i] = crc
	}
	for i := range 256 {
		crc := t[0][i]
		for k := 1; k < 8; k++ {
			crc = t[0][crc&0xff] ^ crc>>8
			t[k][i] = crc
		}
	}
	return t
}

// CRC64 returns crc updated with p: Redis's CRC-64 (Jones, reflected,
// polynomial 0xad93d23594c935a9, init 0, xorout 0), the RDB trailer's
// checksum. Start from 0. It allocates nothing (the standard library's
// hash/crc64 builds a 16 KiB table per call of 2 KiB or more for any
// polynomial but its own two).
//
// It is left out of the race detector's instrumentation (go:norace): a
// pure function of p and read-only tables, it holds no state of its own
// to race on, and instrumented it costs a race-built proxy a minute per
// 2 GB snapshot, which the suite's large-payload tests pay several times.
//
//go:norace
func CRC64(crc uint64, p []byte) uint64 {
	t := crcTables
	for len(p) >= 8 {
		crc ^= binary.LittleEndian.Uint64(p)
		crc = t[7][crc&0xff] ^
			t[6][crc>>8&0xff] ^
			t[5][crc>>16&0xff] ^
			t[4][crc>>24&0xff] ^
			t[3][crc>>32&0xff] ^
			t[2][crc>>40&0xff] ^
			t[1][crc>>48&0xff] ^
			t[0][crc>>56]
		p = p[8:]
	}
	for _, b := range p {
		crc = t[0][byte(crc)^b] ^ crc>>8
	}
	return crc
}

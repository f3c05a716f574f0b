package rdbcheck

import (
	"encoding/binary"
	"math"
)

// An intset (intset.c), as intsetValidateIntegrity checks it deeply:
//
//	<encoding: u32 LE, 2, 4 or 8> <count: u32 LE> <count integers of that size, LE>
//
// The blob must hold exactly the integers announced, at least one, in
// strictly increasing order.

const intsetHeaderSize = 8

func (w *walk) intset(s *src, size uint64) error {
	if d := s.peek(size); d != nil && intsetGood(d) {
		s.advance(size)
		return nil
	}
	return w.intsetBytes(s, size)
}

// intsetGood checks an intset whose bytes are all in hand. For a fault it
// says no, and intsetBytes reads the blob byte by byte, which finds it at
// the byte it is in.
func intsetGood(d []byte) bool {
	if len(d) < intsetHeaderSize {
		return false
	}
	enc := uint64(binary.LittleEndian.Uint32(d))
	count := uint64(binary.LittleEndian.Uint32(d[4:]))
	if enc != 2 && enc != 4 && enc != 8 || count == 0 || intsetHeaderSize+count*enc != uint64(len(d)) {
		return false
	}
	prev := int64(math.MinInt64)
	for i, v := uint64(0), d[intsetHeaderSize:]; i < count; i, v = i+1, v[enc:] {
		var x int64
		switch enc {
		case 2:
			x = int64(int16(binary.LittleEndian.Uint16(v)))
		case 4:
			x = int64(int32(binary.LittleEndian.Uint32(v)))
		default:
			x = int64(binary.LittleEndian.Uint64(v))
		}
		if i > 0 && x <= prev {
			return false
		}
		prev = x
	}
	return true
}

// intsetBytes checks an intset read byte by byte.
func (w *walk) intsetBytes(s *src, size uint64) error {
	fail := func(detail string) error {
		return w.fail("intset integrity check failed: %s", detail)
	}
	var buf [8]byte
	read := func(n int) error {
		for i := range n {
			b, ok, err := s.byte()
			if err != nil {
				return err
			}
			if !ok {
				return w.fail(errLZF)
			}
			buf[i] = b
		}
		return nil
	}
	if size < intsetHeaderSize {
		return fail("shorter than a header")
	}
	if err := read(4); err != nil {
		return err
	}
	enc := uint64(binary.LittleEndian.Uint32(buf[:4]))
	if enc != 2 && enc != 4 && enc != 8 {
		return fail("unknown encoding")
	}
	if err := read(4); err != nil {
		return err
	}
	count := uint64(binary.LittleEndian.Uint32(buf[:4]))
	if intsetHeaderSize+count*enc != size {
		return fail("size is not the count's")
	}
	if count == 0 {
		return fail("empty")
	}
	var prev int64
	for i := range count {
		if err := read(int(enc)); err != nil {
			return err
		}
		var v int64
		switch enc {
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(buf[:2])))
		case 4:
			v = int64(int32(binary.LittleEndian.Uint32(buf[:4])))
		default:
			v = int64(binary.LittleEndian.Uint64(buf[:8]))
		}
		if i > 0 && v <= prev {
			return fail("not strictly increasing")
		}
		prev = v
	}
	return nil
}

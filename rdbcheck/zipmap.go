package rdbcheck

import "math"

// A zipmap (zipmap.c, Redis 2.4 and before), as zipmapValidateIntegrity
// checks it deeply and the loader then reads it:
//
//	<count: 1 byte, 254 unknown> (<len> <field> <len> <free: 1 byte> <value> <free bytes>)... <0xff>
//	len: 1 byte below 254, or 254 (255 for a value) and a u32 LE
//
// It must end with 0xff, hold at least one pair, each within the blob, and
// a known count must be the pairs'; the pairs end at the first 0xff where a
// field would start, and what follows up to the last byte is not read. The loader then walks it again with
// zipmapNext, which sizes a length by its value where the check sized it by
// its first byte: the walker refuses a length written long that is short
// (below 254), where those two walks part ways. The loader converts it to a
// listpack and refuses a field twice, and pairs that would make that
// listpack pass 1 GiB (lpSafeToAdd).

const (
	zipmapBigLen  = 254
	zipmapEnd     = 0xff
	lpSafetySize  = 1 << 30
	lpEmptyBytes  = lpHeaderSize + 1
	zipmapMinSize = 2
)

func (w *walk) zipmap(s *src, size uint64) error {
	fail := func(detail string) error {
		return w.fail("zipmap integrity check failed: %s", detail)
	}
	p := uint64(0) // blob offset of the next byte
	rb := func() (byte, error) {
		b, ok, err := s.byte()
		if err == nil && !ok {
			err = w.fail(errLZF)
		}
		p++
		return b, err
	}
	// length reads a length whose first byte is b at offset p-1: its size
	// and value, after checking the size stays within the blob.
	length := func(b byte) (uint64, error) {
		if b < zipmapBigLen {
			return uint64(b), nil
		}
		if p-1+5 > size-1 {
			return 0, fail("length passes the end")
		}
		var v uint64
		for i := range 4 {
			bi, err := rb()
			if err != nil {
				return 0, err
			}
			v |= uint64(bi) << (8 * i)
		}
		if v < zipmapBigLen {
			return 0, fail("length written long")
		}
		return v, nil
	}
	if size < zipmapMinSize {
		return fail("shorter than a header")
	}
	head, err := rb()
	if err != nil {
		return err
	}
	set := w.memberSet()
	lpBytes := uint64(lpEmptyBytes)
	var count uint64
	for {
		b, err := rb()
		if err != nil {
			return err
		}
		if b == zipmapEnd {
			break
		}
		if b < zipmapBigLen && p-1+1 > size-1 {
			return fail("length passes the end")
		}
		flen, err := length(b)
		if err != nil {
			return err
		}
		if p+flen > size-1 {
			return fail("field passes the end")
		}
		field, err := w.zipmapString(s, flen, true)
		if err != nil {
			return err
		}
		p += flen
		vb, err := rb()
		if err != nil {
			return err
		}
		if vb < zipmapBigLen && p-1+1 > size-1 {
			return fail("length passes the end")
		}
		vlen, err := length(vb)
		if err != nil {
			return err
		}
		free, err := rb()
		if err != nil {
			return err
		}
		// The check adds the value's length and the free bytes in 32 bits.
		skip := (vlen + uint64(free)) & math.MaxUint32
		if p+skip > size-1 {
			return fail("value passes the end")
		}
		if lpBytes+flen+vlen > lpSafetySize {
			return w.fail("hash zipmap with dup elements, or big length (%d)", flen)
		}
		if vlen > skip {
			// The value's length wrapped past 2^32 with the free bytes:
			// the loader reads it whole, beyond the blob, where
			// lpSafeToAdd has refused it above.
			return fail("value passes the end")
		}
		value, err := w.zipmapString(s, vlen, false)
		if err != nil {
			return err
		}
		if ok, err := s.skip(skip-vlen, nil); err != nil || !ok {
			return w.lzfErr(err)
		}
		p += skip
		count++
		if set.add(field.sum) {
			return w.fail("hash zipmap with dup elements, or big length (%d)", flen)
		}
		lpBytes += lpEntrySize(field) + lpEntrySize(value)
	}
	// The check stops at the first 0xff where a field would start, and
	// looks at the last byte alone after it.
	if p < size {
		if ok, err := s.skip(size-1-p, nil); err != nil || !ok {
			return w.lzfErr(err)
		}
		last, err := rb()
		if err != nil {
			return err
		}
		if last != zipmapEnd {
			return fail("the last byte is not 0xff")
		}
	}
	if count == 0 {
		return fail("empty")
	}
	if head != zipmapBigLen && uint64(head) != count {
		return fail("count in the header is not the pairs'")
	}
	return nil
}

// lpString is what the loader's listpack needs of a zipmap string: its
// length, whether lpStringToInt64 reads it (and the integer), and for a
// field its hash.
type lpString struct {
	n     uint64
	isInt bool
	ival  int64
	sum   uint64
}

// zipmapString reads n bytes of a zipmap's field or value.
func (w *walk) zipmapString(s *src, n uint64, field bool) (lpString, error) {
	str := lpString{n: n}
	if field {
		w.h.Reset()
	}
	if n <= maxIntString {
		var d [maxIntString]byte
		for i := range n {
			b, ok, err := s.byte()
			if err != nil || !ok {
				return str, w.lzfErr(err)
			}
			d[i] = b
		}
		str.ival, str.isInt = string2ll(d[:n])
		if field {
			w.h.Write(d[:n])
		}
	} else {
		h := &w.h
		if !field {
			h = nil
		}
		if ok, err := s.skip(n, h); err != nil || !ok {
			return str, w.lzfErr(err)
		}
	}
	if field {
		str.sum = w.h.Sum64()
	}
	return str, nil
}

// lpEntrySize is the size lpAppend gives a string in a listpack: an
// integer's encoding when lpStringToInt64 reads it, else the string's,
// and its backlen.
func lpEntrySize(s lpString) uint64 {
	var enc uint64
	switch v := s.ival; {
	case !s.isInt && s.n < 64:
		enc = 1 + s.n
	case !s.isInt && s.n < 4096:
		enc = 2 + s.n
	case !s.isInt:
		enc = 5 + s.n
	case v >= 0 && v <= 127:
		enc = 1
	case v >= -4096 && v <= 4095:
		enc = 2
	case v >= math.MinInt16 && v <= math.MaxInt16:
		enc = 3
	case v >= -1<<23 && v <= 1<<23-1:
		enc = 4
	case v >= math.MinInt32 && v <= math.MaxInt32:
		enc = 5
	default:
		enc = 9
	}
	return enc + backlenSize(enc)
}

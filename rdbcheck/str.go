package rdbcheck

import (
	"encoding/binary"
	"hash/maphash"
	"strconv"
)

// lenOrEnc reads a length, or the encoding of a special string, as
// rdbLoadLenByRef does: 00xxxxxx (6 bits), 01xxxxxx xxxxxxxx (14 bits),
// 0x80 and four bytes, 0x81 and eight (big-endian); 11xxxxxx is the special
// encoding in the low six bits. 0x82 to 0xbf are refused.
func (w *walk) lenOrEnc() (v uint64, enc bool, err error) {
	b, err := w.in.byte()
	if err != nil {
		return 0, false, err
	}
	switch b >> 6 {
	case len6Bit:
		return uint64(b & 0x3f), false, nil
	case len14Bit:
		b2, err := w.in.byte()
		return uint64(b&0x3f)<<8 | uint64(b2), false, err
	case lenEnc:
		return uint64(b & 0x3f), true, nil
	}
	var n [8]byte
	switch b {
	case len32Bit:
		err = w.in.full(n[:4])
		return uint64(binary.BigEndian.Uint32(n[:4])), false, err
	case len64Bit:
		err = w.in.full(n[:])
		return binary.BigEndian.Uint64(n[:]), false, err
	}
	return 0, false, w.fail("unknown length encoding 2 in rdbLoadLen()")
}

// lengthAny reads a length as rdbLoadLen(rdb, NULL) does where Redis does
// not compare it with RDB_LENERR: a special-encoding byte reads as its low
// six bits, and all ones is a length like another.
func (w *walk) lengthAny() (uint64, error) {
	v, _, err := w.lenOrEnc()
	return v, err
}

// length is lengthAny where Redis compares the length with RDB_LENERR, so
// that a 64-bit length of all ones is refused.
func (w *walk) length() (uint64, error) {
	v, _, err := w.lenOrEnc()
	if err == nil && v == lenErr {
		return 0, w.fail("length %d reads as RDB_LENERR", v)
	}
	return v, err
}

// strHead is a string's header, as rdbGenericLoadStringObject reads it.
type strHead struct {
	enc  int    // encRaw, encInt8..encInt32 or encLZF
	size uint64 // the content's length: raw, decimal or decompressed
	clen uint64 // LZF: the compressed length
}

// encRaw marks a string stored as its bytes.
const encRaw = -1

// head reads a string's header; an integer's bytes are read too, and its
// decimal form left in w.digits.
func (w *walk) head() (strHead, error) {
	v, enc, err := w.lenOrEnc()
	if err != nil {
		return strHead{}, err
	}
	if !enc {
		if v == lenErr {
			return strHead{}, w.fail("string length %d reads as RDB_LENERR", v)
		}
		return strHead{enc: encRaw, size: v}, nil
	}
	var n int64
	var b [4]byte
	switch v {
	case encInt8:
		err = w.in.full(b[:1])
		n = int64(int8(b[0]))
	case encInt16:
		err = w.in.full(b[:2])
		n = int64(int16(binary.LittleEndian.Uint16(b[:2])))
	case encInt32:
		err = w.in.full(b[:4])
		n = int64(int32(binary.LittleEndian.Uint32(b[:4])))
	case encLZF:
		clen, err := w.length()
		if err != nil {
			return strHead{}, err
		}
		size, err := w.length()
		if err != nil {
			return strHead{}, err
		}
		return strHead{enc: encLZF, size: size, clen: clen}, nil
	default:
		return strHead{}, w.fail("unknown RDB string encoding type %d", v)
	}
	if err != nil {
		return strHead{}, err
	}
	d := strconv.AppendInt(w.digits[:0], n, 10)
	return strHead{enc: int(v), size: uint64(len(d))}, nil
}

// open returns a src over the content of the string whose header is h.
// There is one (w.src): strings are read one at a time.
func (w *walk) open(h strHead) *src {
	switch h.enc {
	case encRaw:
		w.src = src{w: w, mode: srcRaw, left: h.size}
	case encLZF:
		w.lzf.reset(&w.in, h.clen, h.size)
		w.src = src{w: w, mode: srcLZF, left: h.size}
	default:
		w.src = src{w: w, mode: srcMem, left: h.size, mem: w.digits[:h.size]}
	}
	return &w.src
}

// close checks that the content of s ended where its encoding did.
func (w *walk) close(s *src) error {
	ok, err := s.finish()
	if err == nil && !ok {
		err = w.fail(errLZF)
	}
	return err
}

// skipString reads a string nobody needs.
func (w *walk) skipString() error {
	h, err := w.head()
	if err != nil {
		return err
	}
	switch h.enc {
	case encRaw:
		return w.in.skip(h.size)
	case encLZF:
		ok, err := skipLZF(&w.in, h.clen, h.size)
		if err == nil && !ok {
			err = w.fail(errLZF)
		}
		return err
	}
	return nil
}

// hashString reads a string and returns the hash of its content (an
// integer's decimal form, which is what Redis compares): maphash with the
// walk's seed, in one call when the bytes are all in hand, else as they
// come; both give the same sum.
func (w *walk) hashString() (uint64, error) {
	h, err := w.head()
	if err != nil {
		return 0, err
	}
	s := w.open(h)
	var sum uint64
	switch b := s.contiguous(); {
	case b != nil || h.size == 0:
		sum = maphash.Bytes(w.seed, b)
		_, err = s.skip(h.size, nil)
	case s.mode == srcMem:
		sum = maphash.Bytes(w.seed, s.mem)
		_, err = s.skip(h.size, nil)
	default:
		w.h.Reset()
		var ok bool
		if ok, err = s.skip(h.size, &w.h); err == nil && !ok {
			err = w.fail(errLZF)
		}
		sum = w.h.Sum64()
	}
	if err != nil {
		return 0, err
	}
	return sum, w.close(s)
}

// smallString reads a string, keeping its first len(w.small) bytes in
// w.small; it returns the string's length.
func (w *walk) smallString() (uint64, error) {
	h, err := w.head()
	if err != nil {
		return 0, err
	}
	s := w.open(h)
	keep := min(h.size, uint64(len(w.small)))
	for i := range keep {
		b, ok, err := s.byte()
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, w.fail(errLZF)
		}
		w.small[i] = b
	}
	if ok, err := s.skip(h.size-keep, nil); err != nil || !ok {
		if err == nil {
			err = w.fail(errLZF)
		}
		return 0, err
	}
	return h.size, w.close(s)
}

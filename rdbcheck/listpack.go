package rdbcheck

import (
	"encoding/binary"
	"hash/maphash"
	"strconv"
)

// A listpack (listpack.c), as lpValidateIntegrity checks it deeply:
//
//	<total bytes: u32 LE> <count: u16 LE, 65535 unknown> <entry>... <0xff>
//	entry: <encoding and length> <content> <backlen: its size, 1 to 5 bytes>
//
// The total must be the blob's size and its last byte 0xff; every entry must
// have a known encoding, end before the last byte, and end with a backlen
// that decodes (read backwards, at most five bytes) to the entry's size
// without it; the first 0xff where an entry would start must be the last
// byte; and a known count must be the entries'. The walk reads each entry
// once, as it goes by; only the last few bytes read are kept, for the
// backlen.

const (
	lpHeaderSize   = 6
	lpCountUnknown = 65535
	lpEOF          = 0xff
	lpBacklenTail  = 4 // content bytes read one by one at an entry's end
)

// lpRole says what Redis checks in a listpack's entries beyond its
// structure.
type lpRole uint8

const (
	lpPlain   lpRole = iota // a list's node: nothing more
	lpSet                   // a set: no entry twice
	lpPairs                 // a hash: no field twice, an even count
	lpZset                  // a sorted set: lpPairs, and no NaN score (zsetScoreNaN)
	lpTriples               // a hash with TTLs: field, value, TTL (an integer, ordered)
)

// lpMode says what next does with an entry's content.
type lpMode uint8

const (
	lpSkip  lpMode = iota
	lpHash         // hash it (an integer as its decimal form) into sum
	lpInt          // read it as an integer (a string through string2ll)
	lpScore        // read a string's start, for a NaN score
)

// lpEntry is one entry as next read it.
type lpEntry struct {
	eof    bool   // the 0xff where an entry would start
	isInt  bool   // integer-encoded
	strInt bool   // lpInt: a string that string2ll reads
	nan    bool   // lpScore: a string that strtod reads as a NaN
	ival   int64  // the integer
	sum    uint64 // lpHash: the hash
}

// lpIter reads a listpack's entries one by one from a src.
type lpIter struct {
	w      *walk
	s      *src
	in     *input
	raw    bool   // s reads raw bytes: rb reads them from in directly
	what   string // "hash listpack", for errors
	size   uint64
	pos    uint64 // blob offset of the next byte
	last   uint64 // the last eight bytes read through rb, the latest lowest
	numele uint32
	count  uint32
}

func (it *lpIter) fail(detail string) error {
	return it.w.fail("%s integrity check failed: %s", it.what, detail)
}

// rb reads one byte of the blob.
func (it *lpIter) rb() (byte, error) {
	if in := it.in; it.raw && in.pos < len(in.buf) {
		b := in.buf[in.pos]
		in.pos++
		it.s.left--
		it.pos++
		it.last = it.last<<8 | uint64(b)
		return b, nil
	}
	return it.rbSlow()
}

func (it *lpIter) rbSlow() (byte, error) {
	b, ok, err := it.s.byte()
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, it.w.fail(errLZF)
	}
	it.pos++
	it.last = it.last<<8 | uint64(b)
	return b, nil
}

// content passes over an entry's n content bytes, and returns their hash
// if asked. The last few also go to it.last, for the backlen that
// follows.
func (it *lpIter) content(n uint64, hash bool) (sum uint64, err error) {
	if d := it.s.peek(n); d != nil {
		if hash {
			sum = maphash.Bytes(it.w.seed, d)
		}
		for _, b := range d[max(len(d), lpBacklenTail)-lpBacklenTail:] {
			it.last = it.last<<8 | uint64(b)
		}
		it.s.advance(n)
		it.pos += n
		return sum, nil
	}
	h := &it.w.h
	h.Reset()
	if n > lpBacklenTail {
		bulk := n - lpBacklenTail
		var hw = h
		if !hash {
			hw = nil
		}
		ok, err := it.s.skip(bulk, hw)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, it.w.fail(errLZF)
		}
		it.pos += bulk
		n = lpBacklenTail
	}
	for range n {
		b, err := it.rb()
		if err != nil {
			return 0, err
		}
		if hash {
			h.WriteByte(b)
		}
	}
	return h.Sum64(), nil
}

func (it *lpIter) init(w *walk, s *src, size uint64, what string) error {
	*it = lpIter{w: w, s: s, in: &w.in, raw: s.mode == srcRaw, what: what, size: size}
	if size < lpHeaderSize+1 {
		return it.fail("shorter than a header")
	}
	var hdr [lpHeaderSize]byte
	if d := s.peek(lpHeaderSize); d != nil && uint64(binary.LittleEndian.Uint32(d)) == size {
		copy(hdr[:], d)
		for _, c := range d {
			it.last = it.last<<8 | uint64(c)
		}
		s.advance(lpHeaderSize)
		it.pos = lpHeaderSize
	} else {
		for i := range hdr {
			b, err := it.rb()
			if err != nil {
				return err
			}
			hdr[i] = b
			if i == 3 && uint64(binary.LittleEndian.Uint32(hdr[:4])) != size {
				return it.fail("total bytes is not the blob's size")
			}
		}
	}
	it.numele = uint32(binary.LittleEndian.Uint16(hdr[4:]))
	return nil
}

// backlenSize is the size of the backlen of an entry of l bytes.
func backlenSize(l uint64) uint64 {
	switch {
	case l <= 127:
		return 1
	case l < 16383:
		return 2
	case l < 2097151:
		return 3
	case l < 268435455:
		return 4
	}
	return 5
}

// decodeBacklen decodes a backlen ending with the latest byte of last, as
// lpDecodeBacklen does: seven bits a byte, backwards, while the high bit
// is set, at most five bytes (else all ones).
func decodeBacklen(last uint64) uint64 {
	var val uint64
	for shift := uint(0); ; shift += 7 {
		c := last & 0xff
		last >>= 8
		val |= (c & 127) << shift
		if c&128 == 0 {
			return val
		}
		if shift+7 > 28 {
			return ^uint64(0)
		}
	}
}

// next reads the next entry, as lpValidateNext checks it.
func (it *lpIter) next(mode lpMode) (lpEntry, error) {
	p := it.pos
	b, err := it.rb()
	if err != nil {
		return lpEntry{}, err
	}
	if b == lpEOF {
		return lpEntry{eof: true}, nil
	}
	var e lpEntry
	var lenBytes, intBytes, slen uint64
	negStart, negMax := ^uint64(0), uint64(0)
	str := false
	switch {
	case b < 0x80: // 7-bit unsigned integer
		e.isInt, e.ival, lenBytes = true, int64(b), 1
	case b&0xc0 == 0x80: // string of up to 63 bytes
		str, lenBytes, slen = true, 1, uint64(b&0x3f)
	case b&0xe0 == 0xc0: // 13-bit integer
		lenBytes, intBytes, negStart, negMax = 1, 1, 1<<12, 8191
	case b == 0xf1:
		lenBytes, intBytes, negStart, negMax = 1, 2, 1<<15, 1<<16-1
	case b == 0xf2:
		lenBytes, intBytes, negStart, negMax = 1, 3, 1<<23, 1<<24-1
	case b == 0xf3:
		lenBytes, intBytes, negStart, negMax = 1, 4, 1<<31, 1<<32-1
	case b == 0xf4:
		lenBytes, intBytes, negStart, negMax = 1, 8, 1<<63, ^uint64(0)
	case b&0xf0 == 0xe0: // string of up to 4095 bytes
		str, lenBytes = true, 2
	case b == 0xf0: // string of up to 2^32-1 bytes
		str, lenBytes = true, 5
	default:
		return lpEntry{}, it.fail("unknown entry encoding")
	}
	if p+lenBytes > it.size-1 {
		return lpEntry{}, it.fail("entry header passes the end")
	}
	switch lenBytes {
	case 2:
		b1, err := it.rb()
		if err != nil {
			return lpEntry{}, err
		}
		slen = uint64(b&0x0f)<<8 | uint64(b1)
	case 5:
		var n uint64
		for i := range 4 {
			bi, err := it.rb()
			if err != nil {
				return lpEntry{}, err
			}
			n |= uint64(bi) << (8 * i)
		}
		slen = n
	}
	enc := lenBytes + intBytes + slen // the entry's size without its backlen
	if p+enc+backlenSize(enc) > it.size-1 {
		return lpEntry{}, it.fail("entry passes the end")
	}
	switch {
	case str && mode == lpHash:
		if e.sum, err = it.content(slen, true); err != nil {
			return lpEntry{}, err
		}
	case str && mode == lpScore:
		var d [scoreBuffer]byte
		n := min(slen, scoreBuffer)
		for i := range n {
			if d[i], err = it.rb(); err != nil {
				return lpEntry{}, err
			}
		}
		if _, err := it.content(slen-n, false); err != nil {
			return lpEntry{}, err
		}
		e.nan = scoreNaN(d[:n])
	case str && mode == lpInt && slen <= maxIntString:
		var d [maxIntString]byte
		for i := range slen {
			if d[i], err = it.rb(); err != nil {
				return lpEntry{}, err
			}
		}
		e.ival, e.strInt = string2ll(d[:slen])
	case str:
		if _, err := it.content(slen, false); err != nil {
			return lpEntry{}, err
		}
	case intBytes > 0:
		uval := uint64(b & 0x1f) // the 13-bit integer's high bits
		if intBytes > 1 {
			uval = 0
		}
		for i := range intBytes {
			bi, err := it.rb()
			if err != nil {
				return lpEntry{}, err
			}
			if intBytes == 1 {
				uval = uval<<8 | uint64(bi)
			} else {
				uval |= uint64(bi) << (8 * i)
			}
		}
		e.isInt = true
		if uval >= negStart {
			e.ival = -int64(negMax-uval) - 1
		} else {
			e.ival = int64(uval)
		}
	}
	if !str && mode == lpHash {
		var d [maxIntString]byte
		e.sum = maphash.Bytes(it.w.seed, strconv.AppendInt(d[:0], e.ival, 10))
	}
	bl := backlenSize(enc)
	for range bl {
		if _, err := it.rb(); err != nil {
			return lpEntry{}, err
		}
	}
	if decodeBacklen(it.last) != enc {
		return lpEntry{}, it.fail("backlen does not match the entry")
	}
	it.count++
	return e, nil
}

// end checks, after next returned the 0xff, that it was the last byte and
// that the count in the header (unless unknown) is the entries'.
func (it *lpIter) end() error {
	if it.pos != it.size {
		return it.fail("0xff before the end")
	}
	if it.numele != lpCountUnknown && it.numele != it.count {
		return it.fail("count in the header is not the entries'")
	}
	return nil
}

// listpack checks a listpack value and returns its entry count.
func (w *walk) listpack(s *src, size uint64, role lpRole, what string) (uint32, error) {
	var it lpIter
	if err := it.init(w, s, size, what); err != nil {
		return 0, err
	}
	var set *seen
	if role != lpPlain {
		set = w.memberSet()
	}
	lastTTL := int64(-1)
	nan := false
	for i := 0; ; i++ {
		mode := lpSkip
		field := false
		switch role {
		case lpSet:
			field = true
		case lpPairs:
			field = i%2 == 0
		case lpZset:
			field = i%2 == 0
			if !field {
				mode = lpScore
			}
		case lpTriples:
			field = i%3 == 0
		}
		if field {
			mode = lpHash
		}
		e, err := it.next(mode)
		if err != nil {
			return 0, err
		}
		if e.eof {
			break
		}
		if field && set.add(e.sum) {
			return 0, it.fail("duplicate entry")
		}
		nan = nan || e.nan
		if role == lpTriples && i%3 == 2 {
			// The TTL: an integer-encoded entry from 0 to the largest
			// expire time; those that are set are ordered, and come first.
			if !e.isInt || e.ival < 0 || e.ival > expireTimeMax {
				return 0, it.fail("invalid TTL")
			}
			if e.ival != 0 && (lastTTL == 0 || e.ival < lastTTL) {
				return 0, it.fail("TTLs out of order")
			}
			lastTTL = e.ival
		}
	}
	if err := it.end(); err != nil {
		return 0, err
	}
	switch {
	case (role == lpPairs || role == lpZset) && it.count%2 != 0:
		return 0, it.fail("odd entry count")
	case nan:
		return 0, w.zsetScoreNaN(it.count/2, it.what)
	case role == lpTriples && it.count%3 != 0:
		return 0, it.fail("entry count not a multiple of 3")
	}
	return it.count, nil
}

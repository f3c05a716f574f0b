package rdbcheck

import (
	"encoding/binary"
	"strconv"
)

// A ziplist (ziplist.c, Redis before 7.0), as ziplistValidateIntegrity
// checks it deeply:
//
//	<total bytes: u32 LE> <tail offset: u32 LE> <count: u16 LE> <entry>... <0xff>
//	entry: <prevlen: 1 byte below 254, or 254 and u32 LE> <encoding> <content>
//
// The total must be the blob's size, its last byte 0xff and the tail offset
// within it; each entry's header must be valid and the entry end before the
// last byte; each prevlen must be the previous entry's size (0 for the
// first); the first 0xff where an entry would start must be the last byte;
// the tail offset must be the last entry's; a known count (not 65535) must
// be the entries'. Sorted sets and hashes hold pairs: an even count, no
// field twice.

const (
	zlHeaderSize   = 10
	zlBigPrevlen   = 254
	zlCountUnknown = 65535
	zlEnd          = 0xff
)

// zlInt returns the size of an integer encoding's content, and whether the
// byte is one.
func zlInt(enc byte) (size uint64, ok bool) {
	switch enc {
	case 0xc0:
		return 2, true
	case 0xd0:
		return 4, true
	case 0xe0:
		return 8, true
	case 0xf0:
		return 3, true
	case 0xfe:
		return 1, true
	}
	return 0, enc >= 0xf1 && enc <= 0xfd // a 4-bit immediate
}

// zlRole says what Redis checks in a ziplist's entries beyond its
// structure.
type zlRole uint8

const (
	zlPlain zlRole = iota // a list
	zlPairs               // a hash: no field twice, an even count
	zlZset                // a sorted set: zlPairs, and no NaN score
)

// ziplist checks a ziplist and returns its entry count.
func (w *walk) ziplist(s *src, size uint64, role zlRole, what string) (uint32, error) {
	pairs := role != zlPlain
	fail := func(detail string) error {
		return w.fail("%s integrity check failed: %s", what, detail)
	}
	rb := func() (byte, error) {
		b, ok, err := s.byte()
		if err == nil && !ok {
			err = w.fail(errLZF)
		}
		return b, err
	}
	if size < zlHeaderSize+1 {
		return 0, fail("shorter than a header")
	}
	var hdr [zlHeaderSize]byte
	for i := range hdr {
		b, err := rb()
		if err != nil {
			return 0, err
		}
		hdr[i] = b
	}
	if uint64(binary.LittleEndian.Uint32(hdr[:4])) != size {
		return 0, fail("total bytes is not the blob's size")
	}
	tail := uint64(binary.LittleEndian.Uint32(hdr[4:8]))
	if tail > size-1 {
		return 0, fail("tail offset passes the end")
	}
	numele := binary.LittleEndian.Uint16(hdr[8:])
	var set *seen
	if pairs {
		set = w.memberSet()
	}
	var count uint32
	nan := false
	p, prevSize, lastStart := uint64(zlHeaderSize), uint64(0), uint64(0)
	for {
		b0, err := rb()
		if err != nil {
			return 0, err
		}
		if b0 == zlEnd {
			break
		}
		prevlen, prevlenSize := uint64(b0), uint64(1)
		if b0 >= zlBigPrevlen {
			prevlenSize = 5
			if p+prevlenSize > size-1 {
				return 0, fail("entry header passes the end")
			}
			var n [4]byte
			for i := range n {
				if n[i], err = rb(); err != nil {
					return 0, err
				}
			}
			prevlen = uint64(binary.LittleEndian.Uint32(n[:]))
		}
		if p+prevlenSize > size-1 {
			return 0, fail("entry header passes the end")
		}
		enc, err := rb()
		if err != nil {
			return 0, err
		}
		var lenSize, clen uint64
		str := enc < 0xc0
		if str {
			switch enc & 0xc0 {
			case 0x00:
				lenSize, clen = 1, uint64(enc&0x3f)
			case 0x40:
				lenSize = 2
			default:
				lenSize = 5
			}
		} else {
			n, ok := zlInt(enc)
			if !ok {
				return 0, fail("unknown entry encoding")
			}
			lenSize, clen = 1, n
		}
		if p+prevlenSize+lenSize > size-1 {
			return 0, fail("entry header passes the end")
		}
		switch lenSize {
		case 2:
			b1, err := rb()
			if err != nil {
				return 0, err
			}
			clen = uint64(enc&0x3f)<<8 | uint64(b1)
		case 5:
			var n [4]byte
			for i := range n {
				if n[i], err = rb(); err != nil {
					return 0, err
				}
			}
			clen = uint64(binary.BigEndian.Uint32(n[:]))
		}
		header := prevlenSize + lenSize
		if p+header+clen > size-1 {
			return 0, fail("entry passes the end")
		}
		if prevlen != prevSize {
			return 0, fail("prevlen is not the previous entry's size")
		}
		field := pairs && count%2 == 0
		if field {
			w.h.Reset()
		}
		switch {
		case str && role == zlZset && !field:
			var d [scoreBuffer]byte
			n := min(clen, scoreBuffer)
			for i := range n {
				if d[i], err = rb(); err != nil {
					return 0, err
				}
			}
			if ok, err := s.skip(clen-n, nil); err != nil || !ok {
				return 0, w.lzfErr(err)
			}
			nan = nan || scoreNaN(d[:n])
		case str:
			var h = &w.h
			if !field {
				h = nil
			}
			if ok, err := s.skip(clen, h); err != nil || !ok {
				return 0, w.lzfErr(err)
			}
		default:
			var v int64
			var n [8]byte
			for i := range clen {
				if n[i], err = rb(); err != nil {
					return 0, err
				}
			}
			switch enc {
			case 0xc0:
				v = int64(int16(binary.LittleEndian.Uint16(n[:])))
			case 0xd0:
				v = int64(int32(binary.LittleEndian.Uint32(n[:])))
			case 0xe0:
				v = int64(binary.LittleEndian.Uint64(n[:]))
			case 0xf0:
				v = int64(int32(uint32(n[0])<<8|uint32(n[1])<<16|uint32(n[2])<<24) >> 8)
			case 0xfe:
				v = int64(int8(n[0]))
			default:
				v = int64(enc&0x0f) - 1
			}
			if field {
				var d [maxIntString]byte
				w.h.Write(strconv.AppendInt(d[:0], v, 10))
			}
		}
		if field && set.add(w.h.Sum64()) {
			return 0, fail("duplicate field")
		}
		prevSize, lastStart = header+clen, p
		p += header + clen
		count++
	}
	if p != size-1 {
		return 0, fail("0xff before the end")
	}
	if count > 0 && lastStart != tail {
		return 0, fail("tail offset is not the last entry's")
	}
	if numele != zlCountUnknown && uint32(numele) != count {
		return 0, fail("count in the header is not the entries'")
	}
	if pairs && count%2 != 0 {
		return 0, fail("odd entry count")
	}
	if nan {
		return 0, w.zsetScoreNaN(count/2, what)
	}
	return count, nil
}

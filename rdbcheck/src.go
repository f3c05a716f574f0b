package rdbcheck

import (
	"hash/maphash"
)

// src reads the content of one string, whatever its encoding: raw bytes
// from the input, LZF decoded as it goes, or an integer's decimal digits.
// The blob checks (listpack, ziplist, intset, zipmap) read their blob
// through it, never past its length.
type src struct {
	w    *walk
	mode srcMode
	left uint64 // content bytes not yet read
	mem  []byte // srcMem: the digits not yet read
}

type srcMode uint8

const (
	srcRaw srcMode = iota
	srcLZF
	srcMem
)

// byte reads one byte of the content; ok is false when the LZF stream
// cannot produce it.
func (s *src) byte() (b byte, ok bool, err error) {
	s.left--
	switch s.mode {
	case srcRaw:
		b, err = s.w.in.byte()
		return b, err == nil, err
	case srcLZF:
		return s.w.lzf.byte()
	default:
		b, s.mem = s.mem[0], s.mem[1:]
		return b, true, nil
	}
}

// skip passes over n bytes of the content, hashing them into h unless h is
// nil.
func (s *src) skip(n uint64, h *maphash.Hash) (ok bool, err error) {
	s.left -= n
	switch s.mode {
	case srcRaw:
		if h != nil {
			err = s.w.in.hash(n, h)
		} else {
			err = s.w.in.skip(n)
		}
		return err == nil, err
	case srcLZF:
		return s.w.lzf.produce(n, h)
	default:
		if h != nil {
			h.Write(s.mem[:n])
		}
		s.mem = s.mem[n:]
		return true, nil
	}
}

// finish checks, once the content was read whole, that its encoding ended
// there too.
func (s *src) finish() (ok bool, err error) {
	if s.mode == srcLZF {
		return s.w.lzf.finish()
	}
	return true, nil
}

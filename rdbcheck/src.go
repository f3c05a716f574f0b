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
	if in := &s.w.in; s.mode == srcRaw && in.pos < len(in.buf) {
		b = in.buf[in.pos]
		in.pos++
		s.left--
		return b, true, nil
	}
	return s.byteSlow()
}

func (s *src) byteSlow() (b byte, ok bool, err error) {
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

// contiguous returns the content not yet read if all of it is raw bytes
// in the current Write's; nil otherwise. The caller consumes it with
// skip.
func (s *src) contiguous() []byte { return s.peek(s.left) }

// peek returns the next n bytes (n at most s.left) if they are raw bytes
// in the current Write's; nil otherwise. advance consumes them.
func (s *src) peek(n uint64) []byte {
	if in := &s.w.in; s.mode == srcRaw && uint64(len(in.buf)-in.pos) >= n {
		return in.buf[in.pos : in.pos+int(n)]
	}
	return nil
}

// advance consumes n bytes that peek returned.
func (s *src) advance(n uint64) {
	s.w.in.pos += int(n)
	s.left -= n
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

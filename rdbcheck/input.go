package rdbcheck

import (
	"hash/maphash"
)

// input is the walk's view of the payload: the bytes of the current Write,
// and a way to wait for the next ones. The walk reads it as a plain reader;
// when a Write's bytes are used up, more suspends the walk (its coroutine
// yields) until the next Write resumes it with new bytes.
//
// The CRC-64 is folded over the bytes in bulk: over the rest of a Write's
// bytes when the walk asks for more, and over the bytes up to the EOF
// opcode when the walk reaches it (stopCRC), so that the trailer is not in
// it.
type input struct {
	buf  []byte // the current Write's bytes; nil while the walk waits
	pos  int    // next byte of buf to read
	base int64  // payload offset of buf[0]

	// yield suspends the walk until Write has set buf again; false means
	// the walk was stopped (Close, or the garbage collector).
	yield func(struct{}) bool

	crc     uint64 // CRC-64 of the bytes before buf[crcFrom]
	crcFrom int    // first byte of buf not yet in crc
	crcOn   bool   // false once the EOF opcode was read
}

// offset is the payload offset of the next byte to read.
func (in *input) offset() int64 { return in.base + int64(in.pos) }

// more folds the CRC over the rest of buf and waits for the next Write.
func (in *input) more() error {
	if in.crcOn {
		in.crc = CRC64(in.crc, in.buf[in.crcFrom:])
	}
	in.base += int64(len(in.buf))
	in.buf, in.pos, in.crcFrom = nil, 0, 0
	if !in.yield(struct{}{}) {
		return errStopped
	}
	return nil
}

// stopCRC ends the checksummed part of the payload at the last byte read.
func (in *input) stopCRC() {
	in.crc = CRC64(in.crc, in.buf[in.crcFrom:in.pos])
	in.crcFrom = in.pos
	in.crcOn = false
}

// byte reads one byte.
func (in *input) byte() (byte, error) {
	if in.pos < len(in.buf) {
		b := in.buf[in.pos]
		in.pos++
		return b, nil
	}
	return in.byteSlow()
}

func (in *input) byteSlow() (byte, error) {
	for in.pos >= len(in.buf) {
		if err := in.more(); err != nil {
			return 0, err
		}
	}
	b := in.buf[in.pos]
	in.pos++
	return b, nil
}

// full reads len(dst) bytes into dst.
func (in *input) full(dst []byte) error {
	for len(dst) > 0 {
		if in.pos >= len(in.buf) {
			if err := in.more(); err != nil {
				return err
			}
			continue
		}
		n := copy(dst, in.buf[in.pos:])
		in.pos += n
		dst = dst[n:]
	}
	return nil
}

// skip passes over n bytes.
func (in *input) skip(n uint64) error {
	for n > 0 {
		avail := uint64(len(in.buf) - in.pos)
		if avail == 0 {
			if err := in.more(); err != nil {
				return err
			}
			continue
		}
		step := min(n, avail)
		in.pos += int(step)
		n -= step
	}
	return nil
}

// hash passes over n bytes, writing them to h.
func (in *input) hash(n uint64, h *maphash.Hash) error {
	for n > 0 {
		avail := uint64(len(in.buf) - in.pos)
		if avail == 0 {
			if err := in.more(); err != nil {
				return err
			}
			continue
		}
		step := min(n, avail)
		h.Write(in.buf[in.pos : in.pos+int(step)])
		in.pos += int(step)
		n -= step
	}
	return nil
}

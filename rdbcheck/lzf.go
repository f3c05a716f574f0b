package rdbcheck

import (
	"hash/maphash"
)

// LZF (liblzf's format, as Redis's lzf_d.c decodes it): a sequence of
// operations, each starting with a control byte c.
//
//	c < 32:  a literal run: the next c+1 input bytes are output.
//	c >= 32: a back reference: l = c>>5 (7 means 7 plus the next byte),
//	         then one more byte b; output l+2 bytes copied from
//	         ((c&31)<<8) + b + 1 bytes back, which may overlap.
//
// Redis's decoder fails on a run or a reference that would pass the
// announced length, on input that ends inside an operation, and on a
// reference before the output's start; and the string is refused unless
// the output is exactly the announced length. A reference reaches at most
// 8 KiB back, so a window of the last 8 KiB of output decodes any stream.
//
// One quirk is kept: the decoder reports an error by returning 0, which
// Redis compares with the announced length. So a string announced as empty
// is accepted whatever its compressed bytes are.

const (
	lzfWindow = 8192 // the farthest a back reference reaches
	lzfMask   = lzfWindow - 1
)

// lzfReader decodes one LZF string from the input as its reader asks for
// bytes, keeping the last 8 KiB of output for back references.
type lzfReader struct {
	in    *input
	cleft uint64 // compressed bytes not yet read
	out   uint64 // bytes output so far
	size  uint64 // the announced length
	lit   uint64 // literal bytes of the current run still to output
	ref   uint64 // bytes of the current back reference still to output
	dist  uint64 // the current back reference's distance
	win   [lzfWindow]byte
}

// errLZF is the reason for every LZF failure: Redis gives no detail either.
const errLZF = "invalid LZF compressed string"

func (z *lzfReader) reset(in *input, clen, size uint64) {
	z.in, z.cleft, z.out, z.size, z.lit, z.ref, z.dist = in, clen, 0, size, 0, 0, 0
}

// op reads the next control byte and its operands. ok is false, with no
// error, for a stream Redis's decoder refuses.
func (z *lzfReader) op() (ok bool, err error) {
	if z.cleft == 0 {
		return false, nil
	}
	c, err := z.in.byte()
	if err != nil {
		return false, err
	}
	z.cleft--
	if c < 32 {
		run := uint64(c) + 1
		if run > z.size-z.out || run > z.cleft {
			return false, nil
		}
		z.lit = run
		return true, nil
	}
	l := uint64(c >> 5)
	if z.cleft == 0 {
		return false, nil
	}
	if l == 7 {
		b, err := z.in.byte()
		if err != nil {
			return false, err
		}
		z.cleft--
		l += uint64(b)
		if z.cleft == 0 {
			return false, nil
		}
	}
	b, err := z.in.byte()
	if err != nil {
		return false, err
	}
	z.cleft--
	dist := uint64(c&31)<<8 + uint64(b) + 1
	if l+2 > z.size-z.out || dist > z.out {
		return false, nil
	}
	z.ref, z.dist = l+2, dist
	return true, nil
}

// byte outputs one byte; ok is false for a stream Redis refuses.
func (z *lzfReader) byte() (b byte, ok bool, err error) {
	for z.lit == 0 && z.ref == 0 {
		if ok, err := z.op(); !ok || err != nil {
			return 0, false, err
		}
	}
	if z.lit > 0 {
		b, err = z.in.byte()
		if err != nil {
			return 0, false, err
		}
		z.cleft--
		z.lit--
	} else {
		b = z.win[(z.out-z.dist)&lzfMask]
		z.ref--
	}
	z.win[z.out&lzfMask] = b
	z.out++
	return b, true, nil
}

// produce outputs n bytes, writing them to h when h is not nil.
func (z *lzfReader) produce(n uint64, h *maphash.Hash) (ok bool, err error) {
	for n > 0 {
		if z.lit == 0 && z.ref == 0 {
			if ok, err := z.op(); !ok || err != nil {
				return false, err
			}
		}
		start := z.out
		if z.lit > 0 {
			step := min(n, z.lit, lzfWindow-z.out&lzfMask)
			dst := z.win[z.out&lzfMask : z.out&lzfMask+step]
			if err := z.in.full(dst); err != nil {
				return false, err
			}
			z.cleft -= step
			z.lit -= step
			z.out += step
			n -= step
		} else {
			step := min(n, z.ref)
			for range step {
				z.win[z.out&lzfMask] = z.win[(z.out-z.dist)&lzfMask]
				z.out++
			}
			z.ref -= step
			n -= step
		}
		if h != nil {
			z.hashOut(start, h)
		}
	}
	return true, nil
}

// hashOut writes the output from start to z.out (less than the window) to h.
func (z *lzfReader) hashOut(start uint64, h *maphash.Hash) {
	for start < z.out {
		i := start & lzfMask
		end := min(z.out-start, lzfWindow-i)
		h.Write(z.win[i : i+end])
		start += end
	}
}

// finish checks the end of the string once its reader has had all size
// bytes: no compressed byte may be left, since any further operation would
// pass the announced length. A string announced empty skips its bytes.
func (z *lzfReader) finish() (ok bool, err error) {
	if z.size == 0 {
		err := z.in.skip(z.cleft)
		z.cleft = 0
		return err == nil, err
	}
	return z.out == z.size && z.cleft == 0, nil
}

// skipLZF checks an LZF string whose bytes nobody needs: the operations'
// bounds alone decide, so no window is kept and literal runs are skipped
// in bulk.
func skipLZF(in *input, clen, size uint64) (ok bool, err error) {
	if size == 0 {
		return true, in.skip(clen)
	}
	var out uint64
	for clen > 0 {
		c, err := in.byte()
		if err != nil {
			return false, err
		}
		clen--
		if c < 32 {
			run := uint64(c) + 1
			if run > size-out || run > clen {
				return false, nil
			}
			if err := in.skip(run); err != nil {
				return false, err
			}
			clen -= run
			out += run
			continue
		}
		l := uint64(c >> 5)
		if clen == 0 {
			return false, nil
		}
		if l == 7 {
			b, err := in.byte()
			if err != nil {
				return false, err
			}
			clen--
			l += uint64(b)
			if clen == 0 {
				return false, nil
			}
		}
		b, err := in.byte()
		if err != nil {
			return false, err
		}
		clen--
		dist := uint64(c&31)<<8 + uint64(b) + 1
		if l+2 > size-out || dist > out {
			return false, nil
		}
		out += l + 2
	}
	return out == size, nil
}

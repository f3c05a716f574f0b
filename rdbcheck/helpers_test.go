package rdbcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
)

// rdb builds an RDB payload by hand, from the format's pieces.
type rdb struct {
	b []byte
}

// newRDB starts a payload of the given version.
func newRDB(version int) *rdb {
	return &rdb{b: fmt.Appendf(nil, "REDIS%04d", version)}
}

func (r *rdb) raw(b ...byte) *rdb { r.b = append(r.b, b...); return r }

func (r *rdb) bytes(s string) *rdb { r.b = append(r.b, s...); return r }

// len writes n in its shortest length encoding.
func (r *rdb) len(n uint64) *rdb { r.b = appendLen(r.b, n); return r }

func appendLen(b []byte, n uint64) []byte {
	switch {
	case n < 1<<6:
		return append(b, byte(n))
	case n < 1<<14:
		return append(b, byte(n>>8)|0x40, byte(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0x80), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0x81), n)
}

// str writes s as a raw string.
func (r *rdb) str(s string) *rdb { r.len(uint64(len(s))); return r.bytes(s) }

// strs writes each of ss as a raw string.
func (r *rdb) strs(ss ...string) *rdb {
	for _, s := range ss {
		r.str(s)
	}
	return r
}

// intStr writes v as an integer-encoded string of the given size (1, 2, 4).
func (r *rdb) intStr(v int64, size int) *rdb {
	switch size {
	case 1:
		return r.raw(0xc0, byte(v))
	case 2:
		return r.raw(0xc1).raw(binary.LittleEndian.AppendUint16(nil, uint16(v))...)
	}
	return r.raw(0xc2).raw(binary.LittleEndian.AppendUint32(nil, uint32(v))...)
}

// lzf writes s LZF-compressed.
func (r *rdb) lzf(s string) *rdb {
	c := lzfCompress([]byte(s))
	return r.raw(0xc3).len(uint64(len(c))).len(uint64(len(s))).bytes(string(c))
}

// blob writes b as a raw string.
func (r *rdb) blob(b []byte) *rdb { return r.str(string(b)) }

// key writes a type byte and a key.
func (r *rdb) key(t byte, k any) *rdb { return r.raw(t).str(fmt.Sprintf("%s", k)) }

// u64 writes v little-endian.
func (r *rdb) u64(v uint64) *rdb { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }

// end writes the EOF opcode and the checksum.
func (r *rdb) end() []byte {
	r.raw(opEOF)
	return binary.LittleEndian.AppendUint64(r.b, CRC64(0, r.b))
}

// endZero writes the EOF opcode and a zero checksum.
func (r *rdb) endZero() []byte { return append(r.raw(opEOF).b, make([]byte, 8)...) }

// at is the offset of the next byte to write: where a fault placed there is.
func (r *rdb) at() int64 { return int64(len(r.b)) }

// lzfCompress compresses s in LZF's format, greedily (for tests: slow).
func lzfCompress(s []byte) []byte {
	var out, lit []byte
	flush := func() {
		for len(lit) > 0 {
			n := min(len(lit), 32)
			out = append(out, byte(n-1))
			out = append(out, lit[:n]...)
			lit = lit[n:]
		}
	}
	for i := 0; i < len(s); {
		best, dist := 0, 0
		for j := max(0, i-lzfWindow); j < i; j++ {
			n := 0
			for i+n < len(s) && n < 264 && s[j+n] == s[i+n] {
				n++
			}
			if n > best {
				best, dist = n, i-j
			}
		}
		if best < 3 {
			lit = append(lit, s[i])
			i++
			continue
		}
		flush()
		l, off := best-2, dist-1
		if l < 7 {
			out = append(out, byte(l<<5|off>>8))
		} else {
			out = append(out, byte(7<<5|off>>8), byte(l-7))
		}
		out = append(out, byte(off))
		i += best
	}
	flush()
	return out
}

// lpEntry encodes one listpack entry: an int64 or a string.
func lpEncode(v any) []byte {
	var e []byte
	switch x := v.(type) {
	case int:
		n := int64(x)
		switch {
		case n >= 0 && n <= 127:
			e = []byte{byte(n)}
		case n >= -4096 && n <= 4095:
			u := uint64(n) & (1<<13 - 1)
			e = []byte{0xc0 | byte(u>>8), byte(u)}
		case n >= math.MinInt16 && n <= math.MaxInt16:
			e = binary.LittleEndian.AppendUint16([]byte{0xf1}, uint16(n))
		case n >= -1<<23 && n < 1<<23:
			u := uint32(n)
			e = []byte{0xf2, byte(u), byte(u >> 8), byte(u >> 16)}
		case n >= math.MinInt32 && n <= math.MaxInt32:
			e = binary.LittleEndian.AppendUint32([]byte{0xf3}, uint32(n))
		default:
			e = binary.LittleEndian.AppendUint64([]byte{0xf4}, uint64(n))
		}
	case string:
		switch n := len(x); {
		case n < 64:
			e = append([]byte{0x80 | byte(n)}, x...)
		case n < 4096:
			e = append([]byte{0xe0 | byte(n>>8), byte(n)}, x...)
		default:
			e = append(binary.LittleEndian.AppendUint32([]byte{0xf0}, uint32(n)), x...)
		}
	case []byte: // a raw entry, as is
		return x
	}
	return append(e, lpBacklen(uint64(len(e)))...)
}

// lpBacklen encodes a backlen as lpEncodeBacklen does.
func lpBacklen(l uint64) []byte {
	switch n := backlenSize(l); n {
	case 1:
		return []byte{byte(l)}
	default:
		b := make([]byte, n)
		for i := range n {
			shift := 7 * (n - 1 - i)
			b[i] = byte(l>>shift) & 127
			if i > 0 {
				b[i] |= 128
			}
		}
		return b
	}
}

// listpack builds a listpack of entries (int, string or a raw []byte).
func listpack(entries ...any) []byte {
	body := []byte{}
	for _, e := range entries {
		body = append(body, lpEncode(e)...)
	}
	lp := binary.LittleEndian.AppendUint32(nil, uint32(lpHeaderSize+len(body)+1))
	lp = binary.LittleEndian.AppendUint16(lp, uint16(min(len(entries), lpCountUnknown)))
	return append(append(lp, body...), lpEOF)
}

// ziplist builds a ziplist of entries (int or string).
func ziplist(entries ...any) []byte {
	var body []byte
	prev, tail := 0, zlHeaderSize
	for _, v := range entries {
		var e []byte
		if prev < zlBigPrevlen {
			e = []byte{byte(prev)}
		} else {
			e = binary.LittleEndian.AppendUint32([]byte{zlBigPrevlen}, uint32(prev))
		}
		switch x := v.(type) {
		case int:
			n := int64(x)
			switch {
			case n >= 0 && n <= 12:
				e = append(e, 0xf1+byte(n))
			case n >= math.MinInt8 && n <= math.MaxInt8:
				e = append(e, 0xfe, byte(n))
			case n >= math.MinInt16 && n <= math.MaxInt16:
				e = binary.LittleEndian.AppendUint16(append(e, 0xc0), uint16(n))
			case n >= -1<<23 && n < 1<<23:
				u := uint32(n)
				e = append(e, 0xf0, byte(u), byte(u>>8), byte(u>>16))
			case n >= math.MinInt32 && n <= math.MaxInt32:
				e = binary.LittleEndian.AppendUint32(append(e, 0xd0), uint32(n))
			default:
				e = binary.LittleEndian.AppendUint64(append(e, 0xe0), uint64(n))
			}
		case string:
			switch n := len(x); {
			case n < 64:
				e = append(e, byte(n))
			case n < 16384:
				e = append(e, 0x40|byte(n>>8), byte(n))
			default:
				e = binary.BigEndian.AppendUint32(append(e, 0x80), uint32(n))
			}
			e = append(e, x...)
		}
		tail = zlHeaderSize + len(body)
		body = append(body, e...)
		prev = len(e)
	}
	zl := binary.LittleEndian.AppendUint32(nil, uint32(zlHeaderSize+len(body)+1))
	zl = binary.LittleEndian.AppendUint32(zl, uint32(tail))
	zl = binary.LittleEndian.AppendUint16(zl, uint16(min(len(entries), zlCountUnknown)))
	return append(append(zl, body...), zlEnd)
}

// intset builds an intset of the given encoding (2, 4, 8).
func intset(enc int, vals ...int64) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(enc))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(vals)))
	for _, v := range vals {
		switch enc {
		case 2:
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		case 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		default:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

// zipmap builds a zipmap of field, value pairs, with a free byte of 0.
func zipmap(pairs ...string) []byte {
	b := []byte{byte(min(len(pairs)/2, zipmapBigLen))}
	zl := func(n int) {
		if n < zipmapBigLen {
			b = append(b, byte(n))
		} else {
			b = binary.LittleEndian.AppendUint32(append(b, zipmapBigLen), uint32(n))
		}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		zl(len(pairs[i]))
		b = append(b, pairs[i]...)
		zl(len(pairs[i+1]))
		b = append(b, 0)
		b = append(b, pairs[i+1]...)
	}
	return append(b, zipmapEnd)
}

// streamLP builds a stream node's listpack: count entries with the master
// fields, each with values for the same fields (SAMEFIELDS).
func streamLP(fields []string, entries int) []byte {
	e := []any{entries, 0, len(fields)}
	for _, f := range fields {
		e = append(e, f)
	}
	e = append(e, 0)
	for i := range entries {
		e = append(e, streamFlagSameFields, i, 0)
		for j := range fields {
			e = append(e, fmt.Sprint("v", i, j))
		}
		e = append(e, len(fields)+3)
	}
	return listpack(e...)
}

// verdict is what a walk said about a payload.
type verdict struct {
	err    error
	offset int64 // the CorruptError's, or -1
}

func (v verdict) String() string {
	if v.err == nil {
		return "accepted"
	}
	return fmt.Sprintf("refused at %d: %v", v.offset, v.err)
}

func verdictOf(err error) verdict {
	v := verdict{err: err, offset: -1}
	var ce *CorruptError
	if errors.As(err, &ce) {
		v.offset = ce.Offset
	}
	return v
}

// walkPieces walks b cut at the given offsets and returns the verdict,
// checking what Write and Walked say along the way.
func walkPieces(t testing.TB, b []byte, cuts ...int) verdict {
	t.Helper()
	w := NewWalker()
	prev := 0
	for _, c := range append(cuts, len(b)) {
		n, err := w.Write(b[prev:c])
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Write returned %v, not a *CorruptError", err)
			}
			if want := ce.Offset - int64(prev); int64(n) != want {
				t.Fatalf("cuts %v: Write returned %d for a fault at %d in a piece from %d", cuts, n, ce.Offset, prev)
			}
			if w.Walked() != ce.Offset {
				t.Fatalf("cuts %v: Walked %d, fault at %d", cuts, w.Walked(), ce.Offset)
			}
			if _, again := w.Write(b[c:]); again != err && c < len(b) {
				t.Fatalf("cuts %v: the error is not sticky: %v then %v", cuts, err, again)
			}
			if cerr := w.Close(); cerr != err {
				t.Fatalf("cuts %v: Close returned %v after Write's %v", cuts, cerr, err)
			}
			return verdictOf(err)
		}
		if n != c-prev {
			t.Fatalf("cuts %v: Write accepted %d of %d bytes with no error", cuts, n, c-prev)
		}
		prev = c
	}
	if w.Walked() != int64(len(b)) {
		t.Fatalf("Walked %d after %d bytes", w.Walked(), len(b))
	}
	err := w.Close()
	if (err == nil) != w.Ended() {
		t.Fatalf("Close returned %v, Ended %v", err, w.Ended())
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Close returned %v for a payload Write accepted whole", err)
	}
	return verdictOf(err)
}

// walkEverySplit walks b whole, cut in two at every offset, byte by byte,
// and through Check; every walk must give the same verdict, at the same
// offset, for the same reason. It returns that verdict.
func walkEverySplit(t testing.TB, b []byte) verdict {
	t.Helper()
	whole := walkPieces(t, b)
	same := func(how string, v verdict) {
		t.Helper()
		if (v.err == nil) != (whole.err == nil) || v.offset != whole.offset ||
			v.err != nil && v.err.Error() != whole.err.Error() {
			t.Fatalf("%s: %v; whole: %v", how, v, whole)
		}
	}
	// Every cut of a small payload; of a large one, every cut near its
	// ends and a sample in between. Then byte by byte (a large one in
	// pieces of 7 bytes).
	for i := 1; i < len(b); i++ {
		if len(b) > 4096 && i > 256 && i < len(b)-256 && i%509 != 0 {
			continue
		}
		same(fmt.Sprintf("cut at %d", i), walkPieces(t, b, i))
	}
	step := 1
	if len(b) > 16384 {
		step = 7
	}
	cuts := make([]int, 0, len(b))
	for i := step; i < len(b); i += step {
		cuts = append(cuts, i)
	}
	same(fmt.Sprintf("in pieces of %d", step), walkPieces(t, b, cuts...))
	same("Check", verdictOf(Check(bytes.NewReader(b))))
	return whole
}

// walkCase is a payload and what the walk must say of it.
type walkCase struct {
	name string
	rdb  []byte
	ok   bool
	at   int64 // where a refused payload goes wrong; -1 when the case does not say
	is   error // a sentinel the error must wrap, if any
	rule rule  // the rule that refuses it
}

// good is a case the walk must accept.
func good(name string, b []byte) walkCase { return walkCase{name: name, rdb: b, ok: true, at: -1} }

// bad is a case the walk must refuse at the given offset (-1: anywhere).
func bad(name string, b []byte, at int64) walkCase { return walkCase{name: name, rdb: b, at: at} }

// runCases walks each case at every split.
func runCases(t *testing.T, cases []walkCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := walkEverySplit(t, c.rdb)
			switch {
			case c.ok && v.err != nil:
				t.Fatalf("refused a good payload: %v", v)
			case !c.ok && v.err == nil:
				t.Fatalf("accepted a bad payload")
			case !c.ok && c.at >= 0 && v.offset != c.at:
				t.Fatalf("%v; want the fault at %d", v, c.at)
			case c.is != nil && !errors.Is(v.err, c.is):
				t.Fatalf("%v; want an error wrapping %v", v, c.is)
			}
			var ce *CorruptError
			if !c.ok && errors.As(v.err, &ce) && ce.rule != c.rule {
				t.Fatalf("%v: rule %d, want %d", v, ce.rule, c.rule)
			}
		})
	}
}

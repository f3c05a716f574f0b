package rdbcheck

import (
	"strings"
	"testing"
)

// lzfRaw writes an LZF string from its compressed bytes and announced size.
func (r *rdb) lzfRaw(size uint64, comp ...byte) *rdb {
	return r.raw(0xc3).len(uint64(len(comp))).len(size).raw(comp...)
}

// value writes a string key k whose value the callback writes.
func strKey(v int, value func(r *rdb)) []byte {
	r := newRDB(v).key(typeString, "k")
	value(r)
	return r.end()
}

func casesLengths() []walkCase {
	cases := []walkCase{
		good("6-bit", strKey(10, func(r *rdb) { r.raw(3).bytes("abc") })),
		good("14-bit", strKey(10, func(r *rdb) { r.raw(0x40, 3).bytes("abc") })),
		good("32-bit", strKey(10, func(r *rdb) { r.raw(0x80, 0, 0, 0, 3).bytes("abc") })),
		good("64-bit", strKey(10, func(r *rdb) { r.raw(0x81, 0, 0, 0, 0, 0, 0, 0, 3).bytes("abc") })),
		good("a 14-bit length of 300", strKey(10, func(r *rdb) { r.str(strings.Repeat("x", 300)) })),
		good("a 32-bit length of 70000", strKey(10, func(r *rdb) { r.str(strings.Repeat("x", 70000)) })),
		bad("length encoding 0x82", strKey(10, func(r *rdb) { r.raw(0x82).bytes("abc") }), 12),
		bad("length encoding 0xbf", strKey(10, func(r *rdb) { r.raw(0xbf).bytes("abc") }), 12),
		bad("a length of 2^64-1 (RDB_LENERR)", strKey(10, func(r *rdb) { r.raw(0x81).u64(^uint64(0)) }), 20),
		bad("a length past the payload", strKey(10, func(r *rdb) { r.raw(0x80, 0, 1, 0, 0) }), -1),
		good("a list length written as a special encoding (0xc2: 2)", newRDB(10).key(typeList, "k").raw(0xc2).strs("a", "b").end()),
	}
	return cases
}

func TestLengths(t *testing.T) { runCases(t, casesLengths()) }

func casesStringEncodings() []walkCase {
	cases := []walkCase{
		good("INT8", strKey(10, func(r *rdb) { r.intStr(-5, 1) })),
		good("INT16", strKey(10, func(r *rdb) { r.intStr(-3000, 2) })),
		good("INT32", strKey(10, func(r *rdb) { r.intStr(-2147483648, 4) })),
		good("an integer key", newRDB(10).raw(typeString).intStr(7, 1).str("v").end()),
		bad("special encoding 4", strKey(10, func(r *rdb) { r.raw(0xc4, 1) }), 12),
		bad("special encoding 63", strKey(10, func(r *rdb) { r.raw(0xff) }), 12),
		bad("a truncated INT32", strKey(10, func(r *rdb) { r.raw(0xc2, 1, 2) })[:15], -1),
		good("LZF", strKey(10, func(r *rdb) { r.lzf(strings.Repeat("abcdefgh", 100)) })),
		good("LZF of incompressible bytes", strKey(10, func(r *rdb) { r.lzf("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ!") })),
	}
	return cases
}

func TestStringEncodings(t *testing.T) { runCases(t, casesStringEncodings()) }

func TestLZF(t *testing.T) {
	// "abcabcabc": the literal "abc", then 6 bytes from 3 back (overlapping).
	abc := []byte{0x02, 'a', 'b', 'c', 0x80, 0x02}
	long := strings.Repeat("0123456789", 1000) // back references of 7+ bytes
	far := strings.Repeat("x", 8192)           // a reference 8192 bytes back
	farRef := append(lzfCompress([]byte("q"+far[:8191])), 0x20|0x1f, 0xff)
	// As a value (checked without a window), as a key (decoded and
	// hashed) and inside a listpack (decoded and read entry by entry).
	in := map[string]func(body func(r *rdb)) []byte{
		"value": func(body func(r *rdb)) []byte { return strKey(10, body) },
		"key": func(body func(r *rdb)) []byte {
			r := newRDB(10).raw(typeString)
			body(r)
			return r.str("v").end()
		},
	}
	for where, wrap := range in {
		t.Run(where, func(t *testing.T) {
			runCases(t, []walkCase{
				good("overlapping reference", wrap(func(r *rdb) { r.lzfRaw(9, abc...) })),
				good("long references", wrap(func(r *rdb) { r.lzf(long) })),
				good("a reference 8192 bytes back", wrap(func(r *rdb) { r.lzfRaw(8192+3, farRef...) })),
				good("an empty string with junk for compressed bytes", wrap(func(r *rdb) { r.lzfRaw(0, 0xff, 0xff, 0xff) })),
				good("an empty string with nothing compressed", wrap(func(r *rdb) { r.lzfRaw(0) })),
				good("lengths written as special encodings", wrap(func(r *rdb) { r.raw(0xc3, 0xc6, 0xc9).raw(abc...) })),
				bad("announced longer", wrap(func(r *rdb) { r.lzfRaw(10, abc...) }), -1),
				bad("announced shorter", wrap(func(r *rdb) { r.lzfRaw(8, abc...) }), -1),
				bad("a literal run past the input", wrap(func(r *rdb) { r.lzfRaw(3, 0x05, 'a', 'b', 'c') }), -1),
				bad("a reference before the start", wrap(func(r *rdb) { r.lzfRaw(9, 0x02, 'a', 'b', 'c', 0x80, 0x03) }), -1),
				bad("a reference with no offset byte", wrap(func(r *rdb) { r.lzfRaw(9, 0x02, 'a', 'b', 'c', 0x80) }), -1),
				bad("a long reference with no length byte", wrap(func(r *rdb) { r.lzfRaw(9, 0x02, 'a', 'b', 'c', 0xe0) }), -1),
				bad("compressed bytes after the output", wrap(func(r *rdb) { r.lzfRaw(3, 0x02, 'a', 'b', 'c', 0x00, 'd') }), -1),
				bad("no compressed bytes", wrap(func(r *rdb) { r.lzfRaw(5) }), -1),
				bad("compressed length RDB_LENERR", wrap(func(r *rdb) { r.raw(0xc3, 0x81).u64(^uint64(0)).len(3) }), -1),
			})
		})
	}
}

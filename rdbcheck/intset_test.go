package rdbcheck

import "testing"

func casesIntset() []walkCase {
	set := func(is []byte) []byte { return val(10, typeSetIntset, func(r *rdb) { r.blob(is) }) }
	return []walkCase{
		good("16-bit", set(intset(2, -5, 0, 32767))),
		good("32-bit", set(intset(4, -70000, 70000))),
		good("64-bit", set(intset(8, -1<<62, 1<<62))),
		good("one member", set(intset(2, 1))),
		bad("empty", set(intset(2)), -1),
		bad("an unknown encoding", set(intset(3, 1)), 16),
		bad("out of order", set(intset(2, 5, 3)), -1),
		bad("a member twice", set(intset(4, 5, 5)), -1),
		bad("a count too large", set(edit(intset(2, 1, 2), func(b []byte) []byte { b[4] = 3; return b })), 20),
		bad("a size not the count's", set(append(intset(2, 1, 2), 0)), -1),
		bad("shorter than a header", set([]byte{2, 0, 0, 0, 1}), -1),
		good("compressed", val(10, typeSetIntset, func(r *rdb) { r.lzf(string(intset(8, 1, 2, 3, 4, 5, 6, 7, 8))) })),
	}
}

func TestIntset(t *testing.T) { runCases(t, casesIntset()) }

package rdbcheck

import (
	"strings"
	"testing"
)

func casesZipmap() []walkCase {
	hash := func(zm []byte) []byte { return val(10, typeHashZipmap, func(r *rdb) { r.blob(zm) }) }
	zm := zipmap("f1", "v1", "f2", "v2")
	long := strings.Repeat("L", 300)
	return []walkCase{
		good("a zipmap", hash(zm)),
		good("long fields and values", hash(zipmap(long, long, "f", long))),
		good("a count of 254 (unknown)", hash(edit(zm, func(b []byte) []byte { b[0] = zipmapBigLen; return b }))),
		good("free bytes after a value", hash([]byte{1, 1, 'f', 1, 2, 'v', 0, 0, zipmapEnd})),
		good("bytes after the end of the pairs", hash([]byte{1, 1, 'f', 1, 0, 'v', zipmapEnd, 'x', zipmapEnd})),
		bad("the last byte is not 0xff", hash(edit(zm, func(b []byte) []byte { b[len(b)-1] = 0; return b })), -1),
		bad("bytes after the pairs, the last not 0xff", hash([]byte{1, 1, 'f', 1, 0, 'v', zipmapEnd, 'x', 'y'}), -1),
		bad("a count wrong", hash(edit(zm, func(b []byte) []byte { b[0] = 3; return b })), -1),
		bad("empty", hash([]byte{0, zipmapEnd}), -1),
		bad("a field twice", hash(zipmap("f", "v", "f", "w")), -1),
		bad("a field past the end", hash([]byte{1, 9, 'f', zipmapEnd}), -1),
		bad("free bytes past the end", hash([]byte{1, 1, 'f', 1, 9, 'v', zipmapEnd}), -1),
		bad("a length written long", hash([]byte{1, zipmapBigLen, 1, 0, 0, 0, 'f', 1, 0, 'v', zipmapEnd}), -1),
		bad("a value over 1 GiB (its length wraps with the free bytes)",
			hash([]byte{1, 1, 'f', zipmapBigLen, 0xff, 0xff, 0xff, 0xff, 2, 'v', zipmapEnd}), -1),
		bad("shorter than a header", hash([]byte{zipmapEnd}), -1),
	}
}

func TestZipmap(t *testing.T) { runCases(t, casesZipmap()) }

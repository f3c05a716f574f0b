package rdbcheck

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

func casesZiplist() []walkCase {
	list := func(zl []byte) []byte { return val(10, typeListZiplist, func(r *rdb) { r.blob(zl) }) }
	hash := func(zl []byte) []byte { return val(10, typeHashZiplist, func(r *rdb) { r.blob(zl) }) }
	zset := func(zl []byte) []byte { return val(10, typeZsetZiplist, func(r *rdb) { r.blob(zl) }) }
	all := ziplist(0, 12, 13, -128, 127, -32768, 32767, -1<<23, 1<<23-1, -1<<31, 1<<31-1, 1<<40, -1<<63,
		"", "a", strings.Repeat("b", 63), strings.Repeat("c", 64), strings.Repeat("d", 300), strings.Repeat("e", 16384))
	zl := ziplist("a", "b", 5)
	last := len(zl) - 1
	return []walkCase{
		good("every encoding", list(all)),
		good("a hash", hash(ziplist("f", "v", 1, 2))),
		good("a sorted set", zset(ziplist("m", "1.5", "n", "2"))),
		good("a count of 65535 (unknown)", list(edit(zl, func(b []byte) []byte { b[8], b[9] = 0xff, 0xff; return b }))),
		good("a prevlen written long", list(func() []byte {
			// "a", then "b" whose prevlen (3) is in its five-byte form.
			body := []byte{0, 1, 'a', zlBigPrevlen, 3, 0, 0, 0, 1, 'b'}
			b := binary.LittleEndian.AppendUint32(nil, uint32(zlHeaderSize+len(body)+1))
			b = binary.LittleEndian.AppendUint32(b, zlHeaderSize+3)
			b = binary.LittleEndian.AppendUint16(b, 2)
			return append(append(b, body...), zlEnd)
		}())),
		bad("total bytes wrong", list(edit(zl, func(b []byte) []byte { b[0]++; return b })), -1),
		bad("the last byte is not 0xff", list(edit(zl, func(b []byte) []byte { b[last] = 0; return b })), -1),
		bad("a tail offset past the end", list(edit(zl, func(b []byte) []byte { b[4] = byte(len(b)); return b })), -1),
		bad("a tail offset not the last entry's", list(edit(zl, func(b []byte) []byte { b[4] = 10; return b })), -1),
		bad("a count too large", list(edit(zl, func(b []byte) []byte { b[8] = 4; return b })), -1),
		bad("a prevlen wrong", list(edit(zl, func(b []byte) []byte { b[13] = 2; return b })), -1),
		bad("an unknown encoding", list(edit(zl, func(b []byte) []byte { b[11] = 0xc1; return b })), -1),
		bad("an entry past the end", list(edit(zl, func(b []byte) []byte { b[11] = 20; return b })), -1),
		bad("a 0xff before the end", list(edit(zl, func(b []byte) []byte {
			b = append(b, zlEnd)
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		})), -1),
		bad("a hash field twice", hash(ziplist("f", "v", "f", "w")), -1),
		bad("a hash field twice, once an integer", hash(ziplist("7", "v", 7, "w")), -1),
		bad("a hash with an odd count", hash(ziplist("f", "v", "g")), -1),
		bad("a sorted set member twice", zset(ziplist(1, "1", 1, "2")), -1),
		{name: "a sorted set with a NaN score", rdb: zset(ziplist("m", "NAN")), at: -1, rule: ruleReplica},
		{name: "a sorted set of 129 with a NaN score", rdb: zset(func() []byte {
			var e []any
			for i := range 129 {
				e = append(e, fmt.Sprint("m", i), "nan")
			}
			return ziplist(e...)
		}()), at: -1, rule: ruleLoader},
		bad("shorter than a header", list([]byte{11, 0, 0, 0, 10, 0, 0, 0, 0, 0xff}), -1),
	}
}

func TestZiplist(t *testing.T) { runCases(t, casesZiplist()) }

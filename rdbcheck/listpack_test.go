package rdbcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// edit returns a copy of b changed by f.
func edit(b []byte, f func(b []byte) []byte) []byte { return f(bytes.Clone(b)) }

// hashLP writes a key whose value is a hash listpack.
func hashLP(lp []byte) []byte { return val(10, typeHashListpack, func(r *rdb) { r.blob(lp) }) }

// lpAt is the payload offset of a listpack's byte i in hashLP.
func lpAt(lp []byte, i int) int64 {
	return int64(len(newRDB(10).key(typeHashListpack, "k").len(uint64(len(lp))).b) + i)
}

func casesListpackEncodings() []walkCase {
	big := strings.Repeat("x", 5000)
	all := listpack(0, 127, -1, -4096, 4095, 4096, -32768, 32767, 1<<23-1, -1<<23, 1<<31-1, -1<<31, 1<<62, -1<<63,
		"", "a", strings.Repeat("y", 63), strings.Repeat("y", 64), strings.Repeat("z", 4095), big)
	return []walkCase{
		good("every encoding", hashLP(all)),
		good("a count of 65535 (unknown)", hashLP(edit(listpack("f", "v"), func(b []byte) []byte { b[4], b[5] = 0xff, 0xff; return b }))),
		good("a list node", val(10, typeListQuicklist2, func(r *rdb) { r.len(1).len(containerPacked).blob(all) })),
		good("compressed", val(10, typeHashListpack, func(r *rdb) { r.lzf(string(all)) })),
	}
}

func TestListpackEncodings(t *testing.T) { runCases(t, casesListpackEncodings()) }

func casesListpackStructure() []walkCase {
	lp := listpack("f1", "v1", "f2", 300)
	last := len(lp) - 1
	setU32 := func(i int, v uint32) []byte {
		return edit(lp, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[i:], v); return b })
	}
	// A longer 0xff at the end: the entries end before the last byte.
	early := edit(lp, func(b []byte) []byte {
		b = append(b, lpEOF)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	})
	return []walkCase{
		bad("total bytes too small", hashLP(setU32(0, uint32(len(lp)-1))), lpAt(lp, 3)),
		bad("total bytes too large", hashLP(setU32(0, uint32(len(lp)+1))), lpAt(lp, 3)),
		bad("shorter than a header", hashLP([]byte{7, 0, 0, 0, 0, 0}), lpAt(nil, -1)),
		bad("the last byte is not 0xff", hashLP(edit(lp, func(b []byte) []byte { b[last] = 0; return b })), lpAt(lp, last)),
		bad("count too small", hashLP(edit(lp, func(b []byte) []byte { b[4] = 3; return b })), lpAt(lp, last)),
		bad("count too large", hashLP(edit(lp, func(b []byte) []byte { b[4] = 6; return b })), lpAt(lp, last)),
		bad("entries end before the last byte", hashLP(early), lpAt(early, last)),
		bad("an unknown encoding (0xf5)", hashLP(edit(lp, func(b []byte) []byte { b[6] = 0xf5; return b })), lpAt(lp, 6)),
		bad("an entry past the end", hashLP(edit(lp, func(b []byte) []byte { b[6] = 0x80 | 20; return b })), lpAt(lp, 6)),
		bad("a backlen that does not match", hashLP(edit(lp, func(b []byte) []byte { b[9] = 2; return b })), lpAt(lp, 9)),
		bad("a backlen of six bytes", hashLP(listpack([]byte{0x81, 'x', 0x82, 0x82, 0x82, 0x82, 0x82, 0x82}, "v")), -1),
	}
}

func TestListpackStructure(t *testing.T) { runCases(t, casesListpackStructure()) }

func TestListpackBacklens(t *testing.T) {
	// Entries around each backlen size's edge, walked whole and cut in
	// their backlen (every split of payloads this large is slow).
	for _, n := range []int{125, 126, 127, 128, 16377, 16378, 16379, 16380, 20000} {
		b := hashLP(listpack(strings.Repeat("s", n), "v"))
		for _, cuts := range [][]int{nil, {len(b) - 14}, {len(b) - 15}, {len(b) - 16}} {
			if v := walkPieces(t, b, cuts...); v.err != nil {
				t.Errorf("a string of %d bytes, cut at %v: %v", n, cuts, v)
			}
		}
	}
	// A backlen written longer than it needs is refused: its value must
	// be the entry's size, and here it is not.
	long := []byte{0x81, 'x', 0x00, 0x82}
	runCases(t, []walkCase{
		bad("a backlen of two bytes for a short entry", hashLP(listpack(long, "v")), -1),
	})
}

// many is a sorted set listpack of n members whose last score is last.
func many(n int, last string) []byte {
	var e []any
	for i := range n {
		e = append(e, fmt.Sprint("m", i), i)
	}
	e[len(e)-1] = last
	return listpack(e...)
}

func casesListpackRoles() []walkCase {
	zset := func(lp []byte) []byte { return val(10, typeZsetListpack, func(r *rdb) { r.blob(lp) }) }
	set := func(lp []byte) []byte { return val(11, typeSetListpack, func(r *rdb) { r.blob(lp) }) }
	ttl := func(lp []byte) []byte { return val(12, typeHashListpackEx, func(r *rdb) { r.u64(1).blob(lp) }) }
	return []walkCase{
		bad("a hash field twice", hashLP(listpack("f", "v", "f", "w")), -1),
		bad("a hash field twice, once an integer", hashLP(listpack("5", "v", 5, "w")), -1),
		good("a hash value equal to a field", hashLP(listpack("f", "g", "g", "f"))),
		bad("an odd count", hashLP(listpack("f", "v", "g")), -1),
		good("a set", set(listpack("a", 1, "b"))),
		bad("a set member twice", set(listpack("a", 1, "a")), -1),
		bad("a set member twice, integers", set(listpack(-70000, "-70000")), -1),
		good("TTLs", ttl(listpack("f1", "v", 10, "f2", "v", 20, "f3", "v", 0))),
		good("no TTLs", ttl(listpack("f1", "v", 0, "f2", "v", 0))),
		good("the largest TTL", ttl(listpack("f1", "v", expireTimeMax))),
		bad("a TTL past the largest", ttl(listpack("f1", "v", expireTimeMax+1)), -1),
		bad("a negative TTL", ttl(listpack("f1", "v", -1)), -1),
		bad("a TTL that is a string", ttl(listpack("f1", "v", "10")), -1),
		bad("TTLs out of order", ttl(listpack("f1", "v", 20, "f2", "v", 10)), -1),
		bad("a TTL after none", ttl(listpack("f1", "v", 0, "f2", "v", 10)), -1),
		bad("a count not a multiple of 3", ttl(listpack("f1", "v", 0, "f2")), -1),
		bad("a field twice with TTLs", ttl(listpack("f", "v", 0, "f", "v", 0)), -1),
		good("TTLs in the release candidates' type", val(12, typeHashListpackExPre, func(r *rdb) { r.blob(listpack("f1", "v", 10)) })),
		good("sorted set scores", zset(listpack("a", "1.5", "b", 2, "c", "inf", "d", "-inf", "e", "1nan", "f", "na"))),
		good("a hash value of nan", hashLP(listpack("f", "nan"))),
		{name: "a NaN score", rdb: zset(listpack("a", "nan")), at: -1, rule: ruleReplica},
		{name: "a NaN score after spaces and a sign", rdb: zset(listpack("a", 1, "b", " \t-NaN(x)")), at: -1, rule: ruleReplica},
		{name: "a NaN score in a set of 129", rdb: zset(many(129, "nan")), at: -1, rule: ruleLoader},
		good("a set of 129 members", zset(many(129, "1"))),
	}
}

func TestListpackRoles(t *testing.T) { runCases(t, casesListpackRoles()) }

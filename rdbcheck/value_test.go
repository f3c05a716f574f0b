package rdbcheck

import (
	"fmt"
	"math"
	"testing"
)

// val writes one key of type t named "k" and its value.
func val(v int, t byte, value func(r *rdb)) []byte {
	r := newRDB(v).key(t, "k")
	value(r)
	return r.end()
}

func casesList() []walkCase {
	return []walkCase{
		good("a linked list", val(10, typeList, func(r *rdb) { r.len(3).str("a").intStr(5, 1).lzf("cccccccccccccccccccccc") })),
		bad("an empty list", val(10, typeList, func(r *rdb) { r.len(0) }), 12),
		bad("a list of RDB_LENERR elements", val(10, typeList, func(r *rdb) { r.raw(0x81).u64(math.MaxUint64) }), 20),
		bad("a list longer than its elements", val(10, typeList, func(r *rdb) { r.len(3).strs("a", "b") }), -1),
	}
}

func TestList(t *testing.T) { runCases(t, casesList()) }

func casesSet() []walkCase {
	return []walkCase{
		good("a set", val(10, typeSet, func(r *rdb) { r.len(3).strs("a", "b", "c") })),
		good("a set of integers", val(10, typeSet, func(r *rdb) { r.len(3).intStr(1, 1).intStr(-1, 2).str("01") })),
		bad("an empty set", val(10, typeSet, func(r *rdb) { r.len(0) }), 12),
		bad("a member twice", val(10, typeSet, func(r *rdb) { r.len(3).strs("a", "b", "a") }), 18),
		bad("a member twice, once an integer", val(10, typeSet, func(r *rdb) { r.len(2).str("12").intStr(12, 4) }), 20),
		bad("a member twice, once compressed", val(10, typeSet, func(r *rdb) {
			r.len(2).str("aaaaaaaaaaaaaaaaaaaaaaaa").lzf("aaaaaaaaaaaaaaaaaaaaaaaa")
		}), -1),
	}
}

func TestSet(t *testing.T) { runCases(t, casesSet()) }

func casesZset() []walkCase {
	score := func(r *rdb, f float64) *rdb { return r.u64(math.Float64bits(f)) }
	old := func(r *rdb, s string) *rdb { return r.raw(byte(len(s))).bytes(s) }
	return []walkCase{
		good("ZSET_2", val(10, typeZset2, func(r *rdb) { score(score(r.len(2).str("a"), 1.5).str("b"), math.Inf(-1)) })),
		bad("ZSET_2 with a NaN", val(10, typeZset2, func(r *rdb) { score(r.len(1).str("a"), math.NaN()) }), 22),
		bad("ZSET_2 with a member twice", val(10, typeZset2, func(r *rdb) { score(score(r.len(2).str("a"), 1).str("a"), 2) }), 32),
		bad("an empty ZSET_2", val(10, typeZset2, func(r *rdb) { r.len(0) }), 12),
		good("ZSET (old scores)", val(10, typeZset, func(r *rdb) {
			old(old(r.len(4).str("a"), "1.5").str("b"), "-3e10").str("c").raw(254).str("d").raw(255)
		})),
		bad("ZSET with NaN (253)", val(10, typeZset, func(r *rdb) { r.len(1).str("a").raw(253) }), 15),
		bad("ZSET with \"nan\"", val(10, typeZset, func(r *rdb) { old(r.len(1).str("a"), "nan") }), 18),
		bad("ZSET with a score sscanf cannot read", val(10, typeZset, func(r *rdb) { old(r.len(1).str("a"), "x1") }), 17),
		good("ZSET with a score sscanf reads a prefix of", val(10, typeZset, func(r *rdb) { old(r.len(1).str("a"), "1e+x") })),
		good("ZSET with an empty score after a NUL", val(10, typeZset, func(r *rdb) { old(r.len(1).str("a"), "2\x00junk") })),
		bad("ZSET with an empty score", val(10, typeZset, func(r *rdb) { old(r.len(1).str("a"), "") }), 15),
	}
}

func TestZset(t *testing.T) { runCases(t, casesZset()) }

func casesHash() []walkCase {
	return []walkCase{
		good("a hash", val(10, typeHash, func(r *rdb) { r.len(2).strs("f1", "v1", "f2", "v2") })),
		good("a field equal to another's value", val(10, typeHash, func(r *rdb) { r.len(2).strs("f1", "f2", "f2", "f1") })),
		bad("a field twice", val(10, typeHash, func(r *rdb) { r.len(2).strs("f", "v1", "f", "v2") }), 22),
		bad("an empty hash", val(10, typeHash, func(r *rdb) { r.len(0) }), 12),
	}
}

func TestHash(t *testing.T) { runCases(t, casesHash()) }

func casesHashMetadata() []walkCase {
	const now = 1700000000000
	ga := func(min uint64, fields ...any) []byte { // ttl, field, value...
		return val(12, typeHashMetadata, func(r *rdb) {
			r.u64(min).len(uint64(len(fields) / 3))
			for i := 0; i < len(fields); i += 3 {
				r.len(fields[i].(uint64)).strs(fields[i+1].(string), fields[i+2].(string))
			}
		})
	}
	pre := func(fields ...any) []byte {
		return val(12, typeHashMetadataPre, func(r *rdb) {
			r.len(uint64(len(fields) / 3))
			for i := 0; i < len(fields); i += 3 {
				r.len(fields[i].(uint64)).strs(fields[i+1].(string), fields[i+2].(string))
			}
		})
	}
	return []walkCase{
		good("TTLs relative to the smallest", ga(now, uint64(1), "f1", "v", uint64(0), "f2", "v", uint64(500), "f3", "v")),
		good("no TTL at all", ga(expireTimeInvalid, uint64(0), "f1", "v")),
		bad("a smallest expire time past the largest", ga(expireTimeInvalid+1, uint64(0), "f1", "v"), 19),
		bad("a TTL past the largest expire time", ga(now, uint64(expireTimeMax), "f1", "v"), 29),
		good("a TTL that wraps to 0", ga(2, uint64(math.MaxUint64), "f1", "v")),
		bad("a field twice", ga(now, uint64(0), "f", "v", uint64(0), "f", "w"), 30),
		bad("an empty hash", ga(now), 20),
		good("absolute TTLs (release candidates)", pre(uint64(now), "f1", "v", uint64(0), "f2", "v")),
		bad("an absolute TTL past the largest", pre(uint64(expireTimeMax+1), "f1", "v"), 21),
		bad("a TTL with a bad length encoding", val(12, typeHashMetadataPre, func(r *rdb) { r.len(1).raw(0x90).strs("f", "v") }), 13),
	}
}

func TestHashMetadata(t *testing.T) { runCases(t, casesHashMetadata()) }

func casesQuicklist() []walkCase {
	ql2 := func(nodes ...any) []byte { // container, blob...
		return val(10, typeListQuicklist2, func(r *rdb) {
			r.len(uint64(len(nodes) / 2))
			for i := 0; i < len(nodes); i += 2 {
				r.len(uint64(nodes[i].(int))).blob(nodes[i+1].([]byte))
			}
		})
	}
	return []walkCase{
		good("packed and plain nodes", ql2(containerPacked, listpack("a", 1, "b"), containerPlain, []byte("a large element"))),
		good("an empty node among others", ql2(containerPacked, listpack(), containerPacked, listpack("a"))),
		bad("only empty nodes", ql2(containerPacked, listpack(), containerPacked, listpack()), 30),
		bad("an unknown container", ql2(3, listpack("a")), 13),
		bad("an empty plain node", ql2(containerPlain, []byte{}), 14),
		bad("a node that is no listpack", ql2(containerPacked, []byte("not a listpack")), -1),
		bad("no nodes", ql2(), 12),
		good("ziplist nodes (type 14)", val(10, typeListQuicklist, func(r *rdb) {
			r.len(2).blob(ziplist("a", 1, 300)).blob(ziplist(fmt.Sprint(make([]byte, 300))))
		})),
		bad("a ziplist node that is a listpack (type 14)", val(10, typeListQuicklist, func(r *rdb) { r.len(1).blob(listpack("a")) }), -1),
		good("a node compressed", val(10, typeListQuicklist2, func(r *rdb) {
			r.len(1).len(containerPacked).lzf(string(listpack("aaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaa", 5)))
		})),
	}
}

func TestQuicklist(t *testing.T) { runCases(t, casesQuicklist()) }

func casesEncodedEmpty() []walkCase {
	return []walkCase{
		bad("an empty hash listpack", val(10, typeHashListpack, func(r *rdb) { r.blob(listpack()) }), 19),
		bad("an empty zset listpack", val(10, typeZsetListpack, func(r *rdb) { r.blob(listpack()) }), 19),
		bad("an empty set listpack", val(11, typeSetListpack, func(r *rdb) { r.blob(listpack()) }), 19),
		bad("an empty list ziplist", val(10, typeListZiplist, func(r *rdb) { r.blob(ziplist()) }), 23),
		bad("an empty hash ziplist", val(10, typeHashZiplist, func(r *rdb) { r.blob(ziplist()) }), 23),
		bad("an empty zset ziplist", val(10, typeZsetZiplist, func(r *rdb) { r.blob(ziplist()) }), 23),
		bad("an empty hash listpack with TTLs", val(12, typeHashListpackEx, func(r *rdb) { r.u64(0).blob(listpack()) }), 27),
		bad("a blob integer-encoded", val(10, typeHashListpack, func(r *rdb) { r.intStr(-2147483648, 4) }), -1),
	}
}

func TestEncodedEmpty(t *testing.T) { runCases(t, casesEncodedEmpty()) }

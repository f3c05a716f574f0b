package rdbcheck

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"
)

// endNoSum ends a payload of a version with no checksum.
func (r *rdb) endNoSum() []byte { return r.raw(opEOF).b }

// withAux adds the aux fields Redis 7.0 writes at the start.
func (r *rdb) withAux() *rdb {
	for _, kv := range [][2]string{{"redis-ver", "7.0.15"}, {"redis-bits", "64"}} {
		r.raw(opAux).strs(kv[0], kv[1])
	}
	r.raw(opAux).str("ctime").intStr(1700000000, 4)
	r.raw(opAux).str("used-mem").intStr(1000000, 4)
	r.raw(opAux).str("aof-base").intStr(0, 1)
	return r
}

func casesHeader() []walkCase {
	cases := []walkCase{
		good("empty v10", newRDB(10).end()),
		good("empty v10 with a zero checksum", newRDB(10).endZero()),
		good("aux fields", newRDB(10).withAux().end()),
		good("v11", newRDB(11).end()),
		good("v12", newRDB(12).end()),
		good("v5 has a checksum", newRDB(5).end()),
		good("v4 has none", newRDB(4).endNoSum()),
		good("v1", newRDB(1).endNoSum()),
		good("a version atoi reads after spaces", (&rdb{b: []byte("REDIS 010")}).end()),
		good("a version with a plus", (&rdb{b: []byte("REDIS+010")}).end()),
		good("a version atoi stops reading", (&rdb{b: []byte("REDIS10x!")}).end()),
		good("a version ended by a NUL", (&rdb{b: []byte("REDIS9\x0077")}).end()),
		{name: "the signature alone", rdb: []byte("REDIS"), at: 5, is: io.ErrUnexpectedEOF},
		{name: "version 0", rdb: newRDB(0).end(), at: 8, is: ErrVersion},
		{name: "version 13", rdb: newRDB(13).end(), at: 8, is: ErrVersion},
		{name: "a negative version", rdb: (&rdb{b: []byte("REDIS-010")}).end(), at: 8, is: ErrVersion},
		{name: "no digits", rdb: (&rdb{b: []byte("REDISx010")}).end(), at: 8, is: ErrVersion},
		bad("signature", (&rdb{b: []byte("REDIX0010")}).end(), 4),
		bad("lower case signature", (&rdb{b: []byte("redis0010")}).end(), 0),
		{name: "truncated header", rdb: []byte("REDIS00"), at: 7, is: io.ErrUnexpectedEOF},
		{name: "empty payload", rdb: []byte{}, at: 0, is: io.ErrUnexpectedEOF},
	}
	return cases
}

func TestHeader(t *testing.T) { runCases(t, casesHeader()) }

func casesEnd() []walkCase {
	sum := newRDB(10).withAux().end()
	wrong := bytes.Clone(sum)
	wrong[len(wrong)-3] ^= 1
	flipped := bytes.Clone(sum)
	flipped[21] ^= 1 // in an aux value
	cases := []walkCase{
		{name: "checksum mismatch", rdb: wrong, at: int64(len(wrong) - 1), is: ErrChecksum},
		{name: "a flipped byte", rdb: flipped, at: int64(len(flipped) - 1), is: ErrChecksum},
		{name: "a byte after the checksum", rdb: append(bytes.Clone(sum), 0), at: int64(len(sum)), rule: ruleTrailing},
		{name: "a byte after a zero checksum", rdb: append(newRDB(10).endZero(), 'x'), at: 18, rule: ruleTrailing},
		{name: "a byte after the EOF of v4", rdb: append(newRDB(4).endNoSum(), 0), at: 10, rule: ruleTrailing},
		{name: "truncated checksum", rdb: sum[:len(sum)-1], at: int64(len(sum) - 1), is: io.ErrUnexpectedEOF},
		{name: "no EOF", rdb: newRDB(10).withAux().b, at: -1, is: io.ErrUnexpectedEOF},
		bad("REDIS0010, junk, 0xff and a zero checksum (the attack)", func() []byte {
			r := newRDB(10)
			for i := range 4096 {
				r.raw(byte(0xaf + i))
			}
			return r.endZero()
		}(), 9),
	}
	return cases
}

func TestEnd(t *testing.T) { runCases(t, casesEnd()) }

func casesOpcodes() []walkCase {
	str := func(r *rdb) []byte { return r.key(typeString, "k").str("v").end() }
	cases := []walkCase{
		good("SELECTDB", str(newRDB(10).raw(opSelectDB).len(3))),
		good("SELECTDB of 2^40", str(newRDB(10).raw(opSelectDB).len(1<<40))),
		good("RESIZEDB", str(newRDB(10).raw(opSelectDB).len(0).raw(opResizeDB).len(1).len(0))),
		good("RESIZEDB of 2^62 keys", str(newRDB(10).raw(opResizeDB).len(1<<62).len(1<<62))),
		bad("RESIZEDB of RDB_LENERR keys", str(newRDB(10).raw(opResizeDB).len(1).raw(0x81).u64(^uint64(0))), 19),
		good("EXPIRETIME", str(newRDB(10).raw(opExpireTime, 1, 2, 3, 4))),
		good("EXPIRETIME_MS", str(newRDB(10).raw(opExpireTimeMS).u64(1700000000000))),
		good("FREQ", str(newRDB(10).raw(opFreq, 200))),
		good("IDLE", str(newRDB(10).raw(opIdle).len(12345))),
		good("every key opcode before a key", str(newRDB(10).raw(opExpireTimeMS).u64(1).raw(opIdle).len(1).raw(opFreq, 1))),
		good("an opcode with no key after it", newRDB(10).raw(opExpireTimeMS).u64(1).end()),
		bad("IDLE of RDB_LENERR", str(newRDB(10).raw(opIdle, 0x81).u64(^uint64(0))), 18),
		good("FUNCTION2", str(newRDB(10).raw(opFunction2).str("#!lua name=lib\nredis.register_function('f', function() return 1 end)"))),
		{name: "FUNCTION (7.0's release candidates)", rdb: str(newRDB(10).raw(opFunctionPre).strs("lib", "LUA").len(0).str("code")), at: 9, rule: ruleNewer},
		good("MODULE_AUX", str(newRDB(10).raw(opModuleAux).len(12345<<10|1).len(moduleOpUInt).len(2).
			len(moduleOpSInt).len(5).len(moduleOpString).str("x").len(moduleOpFloat).raw(1, 2, 3, 4).
			len(moduleOpDouble).u64(7).len(moduleOpUInt).len(1).len(moduleOpEOF))),
		bad("MODULE_AUX with a when opcode not UINT", str(newRDB(10).raw(opModuleAux).len(1).len(moduleOpSInt).len(2).len(moduleOpEOF)), 12),
		good("SLOT_INFO in v12", str(newRDB(12).raw(opSlotInfo).len(100).len(5).len(1))),
		{name: "SLOT_INFO for slot 16384", rdb: str(newRDB(12).raw(opSlotInfo).len(16384).len(5).len(1)), at: 14, rule: ruleReplica},
		good("SLOT_INFO of 2^33 keys", str(newRDB(12).raw(opSlotInfo).len(1).len(1<<33).len(1))),
		bad("SLOT_INFO in v11", str(newRDB(11).raw(opSlotInfo).len(100).len(5).len(1)), 9),
		bad("an unknown opcode", str(newRDB(10).raw(243)), 9),
	}
	return cases
}

func TestOpcodes(t *testing.T) { runCases(t, casesOpcodes()) }

func casesTypesByVersion() []walkCase {
	set := func(v int, typ byte) []byte {
		return newRDB(v).key(typ, "k").blob(listpack("a", "b")).end()
	}
	hashTTL := func(v int) []byte {
		return newRDB(v).key(typeHashListpackExPre, "k").blob(listpack("f", "v", 0)).end()
	}
	cases := []walkCase{
		bad("a set listpack in v10", set(10, typeSetListpack), 9),
		good("a set listpack in v11", set(11, typeSetListpack)),
		good("a set listpack in v12", set(12, typeSetListpack)),
		bad("a hash with TTLs in v11", hashTTL(11), 9),
		good("a hash with TTLs in v12", hashTTL(12)),
		bad("type 8", newRDB(10).key(8, "k").str("v").end(), 9),
		bad("type 26", newRDB(12).key(26, "k").str("v").end(), 9),
		bad("the 4.0 release candidates' module type", newRDB(10).key(typeModulePre, "k").len(1).len(0).end(), 9),
	}
	return cases
}

func TestTypesByVersion(t *testing.T) { runCases(t, casesTypesByVersion()) }

func casesDuplicateKeys() []walkCase {
	dup := func(between func(r *rdb)) []byte {
		r := newRDB(10).raw(opSelectDB).len(0).key(typeString, "k").str("v")
		between(r)
		return r.key(typeString, "k").str("w").end()
	}
	cases := []walkCase{
		{name: "a key twice", rdb: dup(func(*rdb) {}), at: 18, rule: ruleDuplicateKey},
		{name: "a key twice, once integer-encoded", rdb: newRDB(10).key(typeString, "12").str("v").raw(typeString).intStr(12, 1).str("w").end(), at: 17, rule: ruleDuplicateKey},
		{name: "a key twice, once compressed", rdb: newRDB(10).key(typeString, "aaaaaaaaaaaa").str("v").raw(typeString).lzf("aaaaaaaaaaaa").str("w").end(), at: -1, rule: ruleDuplicateKey},
		good("a key in two DBs", dup(func(r *rdb) { r.raw(opSelectDB).len(1) })),
		{name: "a key twice in DB 0, selected twice", rdb: dup(func(r *rdb) { r.raw(opSelectDB).len(1).raw(opSelectDB).len(0) }), at: 22, rule: ruleDuplicateKey},
		good("keys that differ", newRDB(10).key(typeString, "k1").str("v").key(typeString, "k2").str("v").end()),
	}
	return cases
}

func TestDuplicateKeys(t *testing.T) { runCases(t, casesDuplicateKeys()) }

// TestManyKeys: past the keys remembered, a key is still looked up among
// those remembered; duplicates among the others go unseen.
func TestManyKeys(t *testing.T) {
	limit := 1 << keysBits / 2
	r := newRDB(10)
	for i := range limit + 10 {
		r.key(typeString, binary.BigEndian.AppendUint32(nil, uint32(i))[:]).str("")
	}
	payload := r.end()
	if v := walkPieces(t, payload); v.err != nil {
		t.Fatalf("%d distinct keys: %v", limit+10, v)
	}
	for _, c := range []struct {
		name string
		key  int
		ok   bool
	}{
		{"a remembered key again", 7, false},
		{"the last remembered key again", limit - 1, false},
		{"a key past the bound again", limit + 3, true},
	} {
		b := append([]byte(nil), payload[:len(payload)-9]...)
		r := &rdb{b: b}
		r.key(typeString, binary.BigEndian.AppendUint32(nil, uint32(c.key))[:]).str("")
		v := walkPieces(t, r.end())
		if (v.err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, v)
		}
	}
}

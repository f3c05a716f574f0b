package rdbcheck

import "testing"

func casesModule() []walkCase {
	mod := func(items func(r *rdb)) []byte {
		return val(10, typeModule2, func(r *rdb) { r.len(0x1234567 << 10); items(r) })
	}
	return []walkCase{
		good("every item", mod(func(r *rdb) {
			r.len(moduleOpSInt).len(5).len(moduleOpUInt).raw(0x81).u64(^uint64(0)).len(moduleOpFloat).raw(0, 0, 0x80, 0x3f).
				len(moduleOpDouble).u64(0).len(moduleOpString).str("s").len(moduleOpString).lzf("zzzzzzzzzzzzzzzzzzzzzz").len(moduleOpEOF)
		})),
		good("no item", mod(func(r *rdb) { r.len(moduleOpEOF) })),
		good("an unknown opcode, passed over as redis-check-rdb does", mod(func(r *rdb) { r.len(9).len(moduleOpEOF) })),
		good("an opcode of RDB_LENERR, unknown", mod(func(r *rdb) { r.raw(0x81).u64(^uint64(0)).len(moduleOpEOF) })),
		good("an opcode written as a special encoding", mod(func(r *rdb) { r.raw(0xc1).len(7).raw(0xc0) })),
		bad("an integer with a bad length encoding", mod(func(r *rdb) { r.len(moduleOpUInt).raw(0x90).len(moduleOpEOF) }), 22),
		bad("a string with a bad encoding", mod(func(r *rdb) { r.len(moduleOpString).raw(0xc9).len(moduleOpEOF) }), 22),
		bad("no EOF", mod(func(r *rdb) { r.len(moduleOpSInt).len(5) })[:18], -1),
	}
}

func TestModule(t *testing.T) { runCases(t, casesModule()) }

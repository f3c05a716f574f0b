package acl

import (
	"slices"
	"testing"
)

// TestKeys checks the key positions (and flags) found for commands, by
// their specs and, where those do not decide, by Redis's key functions.
func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []int
	}{
		{[]string{"get", "k"}, []int{1}},
		{[]string{"mset", "a", "1", "b", "2"}, []int{1, 3}},
		{[]string{"copy", "a", "b"}, []int{1, 2}},
		{[]string{"eval", "s", "2", "a", "b", "x"}, []int{3, 4}},
		{[]string{"eval", "s", "0"}, nil},
		{[]string{"eval", "s", "x"}, nil},
		{[]string{"eval", "s", "3", "a"}, nil},
		{[]string{"eval", "s", "4294967297", "a"}, []int{3}}, // Redis adds the count as a 32-bit int
		{[]string{"zunionstore", "d", "2", "a", "b"}, []int{1, 3, 4}},
		{[]string{"zunionstore", "d", "5", "a", "b"}, nil}, // the specs do not fit, and the key function refuses the count
		{[]string{"sort", "k", "by", "w", "store", "d"}, []int{1, 5}},
		{[]string{"sort", "k", "limit", "0", "1", "store", "d", "store", "e"}, []int{1, 8}},
		{[]string{"sort_ro", "k"}, []int{1}},
		{[]string{"migrate", "h", "p", "k", "0", "5"}, []int{3}},
		{[]string{"migrate", "h", "p", "", "0", "5", "keys", "a", "b"}, []int{7, 8}},
		{[]string{"migrate", "h", "p", "x", "0", "5", "keys", "a", "b"}, nil},
		{[]string{"set", "k", "v"}, []int{1}},
		{[]string{"xread", "count", "1", "streams", "a", "b", "0", "0"}, []int{4, 5}},
		{[]string{"xread", "streams", "a"}, nil},
		{[]string{"georadius", "k", "0", "0", "1", "m", "store", "d"}, []int{1, 7}},
		{[]string{"ping"}, nil},
	} {
		id, ok := table.lookupArgs(bs(tc.args...))
		if !ok {
			t.Fatalf("%q: no command", tc.args)
		}
		var got []int
		for _, k := range table.cmds[id].keys(bs(tc.args...)) {
			got = append(got, k.pos)
		}
		if !slices.Equal(got, tc.pos) {
			t.Errorf("keys(%q) = %v, want %v", tc.args, got, tc.pos)
		}
	}
}

// TestKeyFlags checks the flags the key functions give, which decide the
// %R~ / %W~ patterns.
func TestKeyFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		flags keyFlag
	}{
		{[]string{"set", "k", "v"}, keyOW | keyUpdate},
		{[]string{"set", "k", "v", "GET"}, keyRW | keyAccess | keyUpdate},
		{[]string{"bitfield", "k", "get", "u8", "0"}, keyRO | keyAccess},
		{[]string{"bitfield", "k", "get", "u8", "0", "incrby", "u8", "0", "1"}, keyRW | keyAccess | keyUpdate},
		{[]string{"bitfield", "k", "overflow", "sat"}, keyRO | keyAccess},
		{[]string{"bitfield", "k", "bogus"}, keyRW | keyAccess | keyUpdate},
	} {
		id, _ := table.lookupArgs(bs(tc.args...))
		keys := table.cmds[id].keys(bs(tc.args...))
		if len(keys) != 1 || keys[0].flags != tc.flags {
			t.Errorf("keys(%q) = %+v, want flags %b", tc.args, keys, tc.flags)
		}
	}
}

func TestCAtoi(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"12", 12}, {" 12x", 12}, {"-3", -3}, {"+4", 4}, {"x", 0}, {"", 0},
		{"4294967297", 1}, {"99999999999999999999", -1}, {"-99999999999999999999", 0}, {"1\x002", 1},
	} {
		if got := cAtoi(tc.in); got != tc.want {
			t.Errorf("cAtoi(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseKeySpec(t *testing.T) {
	for _, bad := range []string{"RO", "RO/index/range:0:1:0", "XX/index:1/range:0:1:0", "RO/index:1/range:0:1",
		"RO/keyword:A/range:0:1:0", "RO/index:x/range:0:1:0"} {
		if _, err := parseKeySpec(bad); err == nil {
			t.Errorf("parseKeySpec(%q) accepted", bad)
		}
	}
}

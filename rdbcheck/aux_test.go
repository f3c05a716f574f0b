package rdbcheck

import (
	"strings"
	"testing"
)

func casesAux() []walkCase {
	aux := func(v int, key, value string) []byte { return newRDB(v).raw(opAux).strs(key, value).end() }
	name := strings.Repeat("a", clusterNameLen)
	valkey := func(name, value string, ok bool) walkCase {
		c := walkCase{name: name, rdb: aux(11, auxSlotInfo, value), ok: ok, at: -1, rule: ruleReplica}
		return c
	}
	states := func(name, value string, ok bool) walkCase {
		return walkCase{name: name, rdb: aux(11, auxClusterSlotStates, value), ok: ok, at: -1, rule: ruleReplica}
	}
	return []walkCase{
		good("unknown aux fields", aux(10, "%custom", "x")),
		valkey("slot-info", "100,5,0", true),
		valkey("slot-info with spaces and signs", " +1,\t-2,\n3", true),
		valkey("slot-info in hexadecimal", "0x1f,1,2", true),
		valkey("slot-info with 0x alone", "0x,1,2", true),
		valkey("slot-info in octal", "017,1,2", true),
		valkey("slot-info with a trailer", "1,2,3junk", true),
		valkey("slot-info that overflows", "99999999999999999999,1,2", true),
		valkey("slot-info with an 8 in octal", "08,1,2", false),
		valkey("slot-info with a space before a comma", "5 ,1,2", false),
		valkey("slot-info of two numbers", "1,2", false),
		valkey("slot-info of two numbers and a comma", "1,2,", false),
		valkey("slot-info empty", "", false),
		valkey("slot-info with 0x then junk", "0xg,1,2", false),
		valkey("slot-info with hexadecimal for %lu", "1,0x5,2", false),
		valkey("slot-info cut by a NUL", "1,2\x00,3", false),
		good("slot-info in a version Valkey 8 does not load", aux(12, auxSlotInfo, "x")),
		{name: "slot-info in v10", rdb: aux(10, auxSlotInfo, "x"), at: -1, rule: ruleReplica},
		{name: "SLOT-INFO, in capitals", rdb: aux(11, "SLOT-INFO", "x"), at: -1, rule: ruleReplica},
		{name: "slot-info, as a C string", rdb: aux(11, "slot-info\x00more", "x"), at: -1, rule: ruleReplica},
		good("a longer key", aux(11, "slot-infos", "x")),
		states("cluster-slot-states empty", "", true),
		states("cluster-slot-states", "5<"+name+",16383>"+name+",", true),
		states("cluster-slot-states with junk before the sign", "5junk<"+name+",", true),
		states("cluster-slot-states with a slot underflowing to 0", "-99999999999999999999<"+name+",", true),
		states("cluster-slot-states with a slot of 16384", "16384<"+name+",", false),
		states("cluster-slot-states with a slot overflowing", "99999999999999999999<"+name+",", false),
		states("cluster-slot-states with a short name", "5<abc,", false),
		states("cluster-slot-states with a long name", "5<"+name+"x,", false),
		states("cluster-slot-states without a direction", "5", false),
		states("cluster-slot-states without the last comma", "5<"+name, false),
		good("cluster-slot-states with a NUL in the key", aux(11, auxClusterSlotStates+"\x00", "junk")),
	}
}

func TestAux(t *testing.T) { runCases(t, casesAux()) }

package rdbcheck

import (
	"encoding/binary"
	"testing"
)

// streamID16 is a raw 16-byte stream ID.
func streamID16(ms, seq uint64) string {
	return string(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, ms), seq))
}

type testGroup struct {
	name      string
	pel       []string // raw IDs
	consumers []testConsumer
}

type testConsumer struct {
	name string
	pel  []string
}

// testStream is a stream value built by hand.
type testStream struct {
	keys   []string // node keys, raw (normally 16 bytes)
	lps    [][]byte
	length uint64
	groups []testGroup
}

// write writes the stream of type t.
func (s testStream) write(r *rdb, t byte) {
	r.len(uint64(len(s.lps)))
	for i, lp := range s.lps {
		r.str(s.keys[i]).blob(lp)
	}
	r.len(s.length).len(1).len(2) // length, last ID
	if t >= typeStreamListpacks2 {
		r.len(1).len(0).len(0).len(0).len(s.length) // first ID, max deleted ID, entries added
	}
	r.len(uint64(len(s.groups)))
	for _, g := range s.groups {
		r.str(g.name).len(1).len(0) // last delivered ID
		if t >= typeStreamListpacks2 {
			r.len(3) // entries read
		}
		r.len(uint64(len(g.pel)))
		for _, id := range g.pel {
			r.bytes(id).u64(1700000000000).len(1)
		}
		r.len(uint64(len(g.consumers)))
		for _, c := range g.consumers {
			r.str(c.name).u64(1700000000000)
			if t >= typeStreamListpacks3 {
				r.u64(1700000000001)
			}
			r.len(uint64(len(c.pel)))
			for _, id := range c.pel {
				r.bytes(id)
			}
		}
	}
}

// streamVal writes a key whose value is the stream s of type t.
func streamVal(v int, t byte, s testStream) []byte {
	r := newRDB(v).key(t, "x")
	s.write(r, t)
	return r.end()
}

// oneNode is a stream of one node of n entries, whose IDs are 1-0..n-0.
func oneNode(n int) testStream {
	return testStream{keys: []string{streamID16(1, 0)}, lps: [][]byte{streamLP([]string{"f"}, n)}, length: uint64(n)}
}

func casesStream() []walkCase {
	id1, id2, id3 := streamID16(1, 0), streamID16(2, 0), streamID16(3, 0)
	withGroups := func(gs ...testGroup) testStream { s := oneNode(3); s.groups = gs; return s }
	g := testGroup{name: "g", pel: []string{id1, id2}, consumers: []testConsumer{{"c1", []string{id1}}, {"c2", []string{id2}}}}
	s15, s19 := func(s testStream) []byte { return streamVal(10, typeStreamListpacks, s) },
		func(s testStream) []byte { return streamVal(10, typeStreamListpacks2, s) }
	twoNodes := oneNode(2)
	twoNodes.keys = append(twoNodes.keys, streamID16(5, 0))
	twoNodes.lps = append(twoNodes.lps, streamLP([]string{"a", "b"}, 2))
	twoNodes.length = 4
	// An entry with its own fields, then one deleted with the master's.
	own := listpack(1, 1, 1, "f", 0,
		0, 0, 0, 2, "a", "1", "b", "2", 2+4+2,
		streamFlagSameFields|1, 1, 0, "v", 1+3)
	mod := func(f func(s *testStream)) testStream { s := oneNode(2); f(&s); return s }
	return []walkCase{
		good("STREAM_LISTPACKS", s15(oneNode(3))),
		good("STREAM_LISTPACKS_2", s19(oneNode(3))),
		good("STREAM_LISTPACKS_3", streamVal(11, typeStreamListpacks3, withGroups(g))),
		good("two nodes", s19(twoNodes)),
		good("no node and no entry", s19(testStream{})),
		good("entries with their own fields, and deleted ones", s19(mod(func(s *testStream) { s.lps[0] = own }))),
		good("numbers written as strings", s19(mod(func(s *testStream) {
			s.lps[0] = listpack("1", "0", "1", "f", "0", "2", "0", "0", "v", "4")
		}))),
		good("a listpack count that is wrong", s19(mod(func(s *testStream) { s.lps[0][4] = 99 }))),
		good("bytes after the entries' end", s19(mod(func(s *testStream) {
			lp := append(s.lps[0], 'x', 'y', lpEOF)
			binary.LittleEndian.PutUint32(lp, uint32(len(lp)))
			s.lps[0] = lp
		}))),
		bad("bytes after the entries' end, the last not 0xff", s19(mod(func(s *testStream) {
			lp := append(s.lps[0], 'x', 'y')
			binary.LittleEndian.PutUint32(lp, uint32(len(lp)))
			s.lps[0] = lp
		})), -1),
		bad("a length and no node", s19(testStream{length: 1}), -1),
		bad("a node key of 15 bytes", s19(mod(func(s *testStream) { s.keys[0] = s.keys[0][:15] })), -1),
		bad("a node key twice", s19(func() testStream { s := twoNodes; s.keys = []string{id1, id1}; return s }()), -1),
		bad("an empty listpack", s19(mod(func(s *testStream) { s.lps[0] = listpack() })), -1),
		bad("a master entry without its 0", s19(mod(func(s *testStream) { s.lps[0] = listpack(1, 0, 1, "f", 1) })), -1),
		bad("fewer entries than counted", s19(mod(func(s *testStream) { s.lps[0] = streamLP([]string{"f"}, 2)[:0] })), -1),
		bad("an entry's size wrong", s19(mod(func(s *testStream) {
			s.lps[0] = listpack(1, 0, 1, "f", 0, streamFlagSameFields, 0, 0, "v", 5)
		})), -1),
		bad("an entry more than counted", s19(mod(func(s *testStream) {
			s.lps[0] = listpack(0, 0, 1, "f", 0, streamFlagSameFields, 0, 0, "v", 4)
		})), -1),
		bad("a number that is not one", s19(mod(func(s *testStream) { s.lps[0] = listpack("x", 0, 0, 0) })), -1),
		bad("counts that add up to a negative", s19(mod(func(s *testStream) { s.lps[0] = listpack(-1, 0, 0, 0) })), -1),
		bad("a group name twice", s19(withGroups(testGroup{name: "g"}, testGroup{name: "g"})), -1),
		bad("a pending ID twice", s19(withGroups(testGroup{name: "g", pel: []string{id1, id1}})), -1),
		bad("a pending ID with no consumer", s19(withGroups(testGroup{name: "g", pel: []string{id1}})), -1),
		bad("a consumer name twice", s19(withGroups(testGroup{name: "g", consumers: []testConsumer{{"c", nil}, {"c", nil}}})), -1),
		bad("a consumer's ID its group does not have", s19(withGroups(testGroup{name: "g", pel: []string{id1},
			consumers: []testConsumer{{"c", []string{id1, id3}}}})), -1),
		bad("a consumer's ID twice", s19(withGroups(testGroup{name: "g", pel: []string{id1},
			consumers: []testConsumer{{"c", []string{id1, id1}}}})), -1),
		bad("an ID two consumers have", s19(withGroups(testGroup{name: "g", pel: []string{id1},
			consumers: []testConsumer{{"c1", []string{id1}}, {"c2", []string{id1}}}})), -1),
		good("the same consumer name in two groups", s19(withGroups(
			testGroup{name: "g1", consumers: []testConsumer{{"c", nil}}},
			testGroup{name: "g2", consumers: []testConsumer{{"c", nil}}}))),
		good("groups, pending IDs and consumers", s15(withGroups(g, testGroup{name: "empty"}))),
		bad("a truncated pending ID", s19(withGroups(g))[:200], -1),
		good("a group name and a node key compressed", func() []byte {
			r := newRDB(10).key(typeStreamListpacks2, "x").len(1).lzf(streamID16(1, 0)).blob(streamLP([]string{"f"}, 1))
			r.len(1).len(1).len(2).len(1).len(0).len(0).len(0).len(1)
			r.len(1).lzf("aaaaaaaaaaaaaaaaaaaaaaaaaa").len(1).len(0).len(3).len(0).len(0)
			return r.end()
		}()),
	}
}

func TestStream(t *testing.T) { runCases(t, casesStream()) }

// TestStreamManyPending: past the pending IDs remembered, a consumer's ID
// may be one of those not kept, and is let through.
func TestStreamManyPending(t *testing.T) {
	n := 1<<pelBits/2 + 100
	var pel []string
	for i := range n {
		pel = append(pel, streamID16(uint64(i), 0))
	}
	s := oneNode(1)
	s.groups = []testGroup{{name: "g", pel: pel, consumers: []testConsumer{{"c", pel}}}}
	if v := walkPieces(t, streamVal(10, typeStreamListpacks2, s)); v.err != nil {
		t.Fatalf("%d pending IDs: %v", n, v)
	}
	s.groups[0].consumers[0].pel = append(pel[:len(pel):len(pel)], streamID16(1<<40, 0))
	if v := walkPieces(t, streamVal(10, typeStreamListpacks2, s)); v.err != nil {
		t.Fatalf("an ID the group may have: %v", v)
	}
	s.groups[0].consumers[0].pel = pel[:10]
	if v := walkPieces(t, streamVal(10, typeStreamListpacks2, s)); v.err == nil {
		t.Fatal("remembered IDs no consumer has: accepted")
	}
}

package clustertopo

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"testing/iotest"
)

// FuzzParseReply reads any bytes as a node's reply to each of the three
// cluster commands, and as the text of CLUSTER NODES's reply: the reader
// never panics and reads the same however the bytes arrive, and a
// topology a parser accepts holds what Topology
// promises (every node ID valid and in one shard, every slot in range and
// served once, ranges merged and in order, primaries first, shards in
// order of their first slot) and can be followed: each of its slots and
// IDs selects its own shard, and Primary either names a node of role
// master or says why not.
func FuzzParseReply(f *testing.F) {
	for _, state := range recordedStates {
		for _, source := range []Source{FromShards, FromNodes, FromSlots} {
			f.Add(recordedReply(f, state, source))
		}
	}
	for _, state := range recordedStates {
		f.Add([]byte(decode(f, recordedReply(f, state, FromNodes), Limits{}).str))
	}
	f.Add([]byte(oneShard))
	f.Add([]byte(enc([]any{[]any{0, 16383, slotsNode("?", 7000, idA, "ip", "::1"), slotsNode("h", 7001, idB)}})))
	f.Add([]byte(enc(nodesLine(idA, "::1:7000@17000,h", "myself,master", "-", "0-5", "[6->-"+idB+"]") +
		nodesLine(idB, ":0@0", "slave,fail,noaddr", idA) + nodesLine(idC, "127.0.0.1:1@2", "slave", idD))))
	f.Add([]byte("*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*-1\r\n"))
	f.Add([]byte("*3\r\n*1\r\n*1\r\n*1\r\n"))
	for _, small := range []string{"*-1\r\n", "$-1\r\n", ":0\r\n", "+OK\r\n", "-ERR x\r\n", "*2\r\n$1\r\na\r\n:1\r\n"} {
		f.Add([]byte(small))
	}
	lim := Limits{MaxReplyBytes: 1 << 16, MaxValues: 4096}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if topo, err := parseNodes(value{kind: '$', str: string(raw)}); err == nil {
			checkTopology(t, topo, FromNodes)
		}
		checkReply(t, raw, lim)
		checkReply(t, recipe(raw), lim)
	})
}

// recipe reads fuzz bytes as a recipe for a reply, so that the fuzzer
// reaches deep into the parsers without having to find RESP's framing and
// the commands' keys by chance: each byte picks a piece (a header with a
// small, maybe negative, count or length; an integer; a simple string or
// an error; a key, a role or a health word the parsers look for; a node
// ID; a host; or a byte as it is), the next byte its number where it takes
// one.
func recipe(raw []byte) []byte {
	words := []string{"slots", "nodes", "id", "port", "tls-port", "ip", "endpoint", "hostname", "role",
		"replication-offset", "health", "master", "replica", "slave", "online", "fail", "failed", "loading", "?", ""}
	ids := []string{idA, idB, idC, idD}
	hosts := []string{"127.0.0.1", "::1", "node-a", "10.0.0.1"}
	var b []byte
	for i := 0; i < len(raw); i++ {
		arg := 0
		if i+1 < len(raw) {
			arg = int(int8(raw[i+1]))
		}
		switch raw[i] % 10 {
		case 0:
			b = fmt.Appendf(b, "*%d\r\n", arg%8)
			i++
		case 1:
			b = fmt.Appendf(b, ":%d\r\n", arg*131)
			i++
		case 2:
			b = fmt.Appendf(b, ":%d\r\n", int(uint8(arg))*64)
			i++
		case 3:
			b = fmt.Appendf(b, "$%d\r\n", arg%4)
			i++
		case 4:
			b = append(b, enc(words[int(uint8(arg))%len(words)])...)
			i++
		case 5:
			b = append(b, enc(ids[int(uint8(arg))%len(ids)])...)
			i++
		case 6:
			b = append(b, enc(hosts[int(uint8(arg))%len(hosts)])...)
			i++
		case 7:
			b = append(b, "+OK\r\n"...)
		case 8:
			b = append(b, "-ERR x\r\n"...)
		default:
			b = append(b, raw[i])
		}
	}
	return b
}

// checkReply reads raw as a node's reply, whole and a byte at a time, and
// parses what it reads as each command's reply.
func checkReply(t *testing.T, raw []byte, lim Limits) {
	t.Helper()
	v, err := newReplyReader(bytes.NewReader(raw), lim).read()
	v2, err2 := newReplyReader(iotest.OneByteReader(bytes.NewReader(raw)), lim).read()
	if (err == nil) != (err2 == nil) {
		t.Fatalf("read whole: %v; read a byte at a time: %v", err, err2)
	}
	if err != nil {
		return
	}
	for source, parse := range parsers {
		topo, err := parse(v)
		topo2, err2 := parse(v2)
		if (err == nil) != (err2 == nil) || render(topo) != render(topo2) {
			t.Fatalf("%v: the same reply read two ways parsed as %v / %v", source, err, err2)
		}
		if err != nil {
			continue
		}
		checkTopology(t, topo, source)
	}
}

// checkTopology fails t when topo breaks a promise of Topology.
func checkTopology(t *testing.T, topo Topology, source Source) {
	t.Helper()
	if topo.Source != source || len(topo.Shards) == 0 {
		t.Fatalf("%v: Source %v with %d shards", source, topo.Source, len(topo.Shards))
	}
	ids := map[string]bool{}
	served := 0
	prevFirst := -1
	for i, sh := range topo.Shards {
		if len(sh.Nodes) == 0 || sh.ID == "" {
			t.Fatalf("%v: shard %d has ID %q and %d nodes", source, i, sh.ID, len(sh.Nodes))
		}
		first := firstSlot(sh)
		if first < prevFirst {
			t.Fatalf("%v: shard %d's first slot %d comes after %d", source, i, first, prevFirst)
		}
		prevFirst = first
		for j, r := range sh.Slots {
			if r.First < 0 || r.Last < r.First || r.Last >= Slots || (j > 0 && r.First <= sh.Slots[j-1].Last+1) {
				t.Fatalf("%v: shard %s's ranges %v", source, sh.ID, sh.Slots)
			}
			served += r.Last - r.First + 1
			for _, slot := range []int{r.First, r.Last} {
				if got, err := topo.ShardBySlot(slot); err != nil || got.ID != sh.ID {
					t.Fatalf("%v: ShardBySlot(%d) = %s, %v; want %s", source, slot, got.ID, err, sh.ID)
				}
			}
		}
		if got, err := topo.ShardByID(sh.ID); err != nil || got.ID != sh.ID {
			t.Fatalf("%v: ShardByID(%s) = %s, %v", source, sh.ID, got.ID, err)
		}
		for j, n := range sh.Nodes {
			if !validID(n.ID) || ids[n.ID] {
				t.Fatalf("%v: node ID %q invalid or in two shards", source, n.ID)
			}
			ids[n.ID] = true
			if n.Role != RolePrimary && n.Role != RoleReplica {
				t.Fatalf("%v: node %s has role %q", source, n.ID, n.Role)
			}
			if j > 0 && n.Role == RolePrimary && sh.Nodes[j-1].Role == RoleReplica {
				t.Fatalf("%v: shard %s lists a primary after a replica", source, sh.ID)
			}
			if len(n.Health) > maxWord || !printable(string(n.Health)) {
				t.Fatalf("%v: node %s has health %q", source, n.ID, n.Health)
			}
			for _, addr := range []string{n.Addr, n.TLSAddr} {
				if addr == "" {
					continue
				}
				if _, _, err := net.SplitHostPort(addr); err != nil {
					t.Fatalf("%v: node %s's address %q: %v", source, n.ID, addr, err)
				}
			}
			if got, err := topo.ShardByID(n.ID); err != nil || !slices.ContainsFunc(got.Nodes, func(m Node) bool { return m.ID == n.ID }) {
				t.Fatalf("%v: ShardByID(%s) = %s, %v", source, n.ID, got.ID, err)
			}
		}
		p, err := sh.Primary()
		switch {
		case err != nil && !errors.Is(err, ErrNoPrimary):
			t.Fatalf("%v: Primary() of %s: %v, not ErrNoPrimary", source, sh.ID, err)
		case err == nil && (p.Role != RolePrimary || p.ID != sh.Nodes[0].ID):
			t.Fatalf("%v: Primary() of %s is %+v", source, sh.ID, p)
		}
	}
	if served > Slots {
		t.Fatalf("%v: %d slots served", source, served)
	}
}

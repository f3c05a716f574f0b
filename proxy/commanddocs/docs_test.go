package commanddocs

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/replproxy/replproxy/proxy/wire"
)

// TestEmbeddedLoads: the built-in entries parse, name each command once in
// order, and write back as they were read.
func TestEmbeddedLoads(t *testing.T) {
	d, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(d.Names()) || len(slices.Compact(slices.Clone(d.Names()))) != len(d.Names()) {
		t.Fatalf("names not sorted and unique: %q", d.Names())
	}
	info, rest, err := Parse(Embedded())
	if err != nil {
		t.Fatal(err)
	}
	docs, _, err := Parse(rest)
	if err != nil {
		t.Fatal(err)
	}
	again := AppendRESP3(AppendRESP3(nil, info), docs)
	if !bytes.Equal(again, Embedded()) {
		t.Fatal("the entries do not write back as read")
	}
}

// TestLookupAndList: a subcommand is found by its full name and its docs
// come from its parent's; LIST filters by ACL category and pattern over
// commands and subcommands, and refuses a filter Redis does not know.
func TestLookupAndList(t *testing.T) {
	d, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	info, docs, ok := d.Lookup("CONFIG|GET")
	if !ok || info.Elems[0].Str != "config|get" {
		t.Fatalf("config|get: %v %+v", ok, info)
	}
	if _, ok := MapGet(docs, "summary"); !ok {
		t.Fatalf("config|get's docs have no summary: %+v", docs)
	}
	if _, _, ok := d.Lookup("config|nosuch"); ok {
		t.Fatal("an unknown subcommand was found")
	}
	list, ok := d.List("PATTERN", "config|*")
	if !ok || !slices.Contains(list, "config|get") || slices.Contains(list, "config") {
		t.Fatalf("pattern config|*: %v %q", ok, list)
	}
	if list, ok = d.List("aclcat", "connection"); !ok || !slices.Contains(list, "ping") {
		t.Fatalf("aclcat connection: %v %q", ok, list)
	}
	if _, ok := d.List("nosuch", "x"); ok {
		t.Fatal("an unknown filter was accepted")
	}
}

// TestParseBounds: input cut short is ErrIncomplete (read more), nesting
// past the bound and bad lengths are errors, and RESP2 nulls read as nulls.
func TestParseBounds(t *testing.T) {
	if _, _, err := Parse([]byte("*2\r\n$3\r\nfoo\r\n")); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("cut short: %v", err)
	}
	deep := bytes.Repeat([]byte("*1\r\n"), maxDocsDepth+2)
	if _, _, err := Parse(deep); err == nil || errors.Is(err, ErrIncomplete) {
		t.Fatalf("nested too deep: %v", err)
	}
	if _, _, err := Parse([]byte("*99999999\r\n")); err == nil || errors.Is(err, ErrIncomplete) {
		t.Fatalf("huge length: %v", err)
	}
	if v, _, err := Parse([]byte("$-1\r\n")); err != nil || v.Kind != '_' {
		t.Fatalf("RESP2 null: %+v %v", v, err)
	}
	if got := Append(nil, wire.RESP2, Value{Kind: '%', Elems: []Value{{Kind: '+', Str: "k"}, {Kind: ':', Num: 1}}}); string(got) != "*2\r\n+k\r\n:1\r\n" {
		t.Fatalf("a map in RESP2: %q", got)
	}
}

// TestReplyMisuse: COUNT with arguments and an unknown subcommand append
// nothing and say which misuse it was; a bad LIST filter is Redis's syntax
// error; COUNT answers what the caller counts.
func TestReplyMisuse(t *testing.T) {
	d, err := LoadEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	args := func(s string) [][]byte { return bytes.Fields([]byte(s)) }
	for _, tc := range []struct {
		args   [][]byte
		reply  string
		misuse Misuse
	}{
		{args("COMMAND COUNT"), ":42\r\n", Fine},
		{args("COMMAND COUNT x"), "", WrongArity},
		{args("COMMAND NOSUCH"), "", UnknownSubcommand},
		{args("COMMAND LIST FILTERBY nosuch x"), "-ERR syntax error\r\n", Fine},
		{args("COMMAND LIST x"), "-ERR syntax error\r\n", Fine},
		{args("COMMAND INFO nosuch"), "*1\r\n$-1\r\n", Fine},
	} {
		got, misuse := d.Reply(nil, wire.RESP2, tc.args, 42)
		if string(got) != tc.reply || misuse != tc.misuse {
			t.Errorf("%q: %q, %v; want %q, %v", tc.args, got, misuse, tc.reply, tc.misuse)
		}
	}
}

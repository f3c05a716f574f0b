package acl

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/tidwall/resp"
)

var updateACLCommands = flag.Bool("update-acl-commands", false,
	"rewrite redis_commands.txt from the redis-server on PATH (TestCommandTableMatchesRedis)")

// TestCommandTableMatchesRedis checks redis_commands.txt against a live
// redis-server 7.0 (COMMAND and ACL CAT), or rewrites it with
// -update-acl-commands.
func TestCommandTableMatchesRedis(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	c := redistest.Dial(t, srv.Addr())
	version := c.Info(t, "server")["redis_version"]
	if !strings.HasPrefix(version, "7.0.") {
		t.Fatalf("redis-server %s: the ACL table is Redis 7.0's; run this test with a redis-server 7.0", version)
	}
	var cats []string
	for _, v := range c.MustDo(t, "ACL", "CAT").Array() {
		cats = append(cats, v.String())
	}
	var lines []string
	for _, v := range c.MustDo(t, "COMMAND").Array() {
		lines = append(lines, commandLines(t, v)...)
	}
	slices.SortFunc(lines, func(a, b string) int {
		// A container's line before its subcommands' ("acl" < "acl|cat"
		// already, but "acl|cat" must not sort after "aclx").
		na, _, _ := strings.Cut(a, " ")
		nb, _, _ := strings.Cut(b, " ")
		return strings.Compare(strings.Replace(na, "|", "\x00", 1), strings.Replace(nb, "|", "\x00", 1))
	})
	text := renderTable(version, cats, lines)
	if *updateACLCommands {
		if err := os.WriteFile("redis_commands.txt", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote redis_commands.txt from redis-server %s: %d commands and subcommands", version, len(lines))
		return
	}
	if got, want := dataLines(commandsText), dataLines(text); !slices.Equal(got, want) {
		for i := 0; i < max(len(got), len(want)); i++ {
			g, w := at2(got, i), at2(want, i)
			if g != w {
				t.Errorf("redis_commands.txt differs from redis-server %s at data line %d:\n file:  %s\n redis: %s", version, i+1, g, w)
				break
			}
		}
		t.Fatalf("redis_commands.txt has %d data lines, redis-server %s gives %d: run go test ./proxy/acl -run TestCommandTableMatchesRedis -update-acl-commands",
			len(got), version, len(want))
	}
	if len(table.cmds) != len(lines) {
		t.Fatalf("parsed table has %d commands, the file %d lines", len(table.cmds), len(lines))
	}
}

func at2(ss []string, i int) string {
	if i < len(ss) {
		return ss[i]
	}
	return "(none)"
}

// dataLines returns the table's lines that are not comments.
func dataLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && l[0] != '#' {
			out = append(out, l)
		}
	}
	return out
}

// renderTable writes the table file: a header, the categories, the lines.
func renderTable(version string, cats, lines []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Redis %s's commands and subcommands, for ACL rules: generated from COMMAND and ACL CAT\n", version)
	b.WriteString("# by `go test ./proxy/acl -run TestCommandTableMatchesRedis -update-acl-commands`; do not edit.\n")
	b.WriteString("# The categories in Redis's order, then one line per command:\n")
	b.WriteString("#   name[|sub] arity flags|- @category... key=<flags>/<begin_search>/<find_keys>...\n")
	for i, c := range cats {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("@" + c)
	}
	b.WriteByte('\n')
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// commandLines renders one entry of COMMAND's reply, and its subcommands.
func commandLines(t *testing.T, v resp.Value) []string {
	t.Helper()
	f := v.Array()
	if len(f) < 10 {
		t.Fatalf("COMMAND entry with %d fields: %v", len(f), v)
	}
	fields := []string{strings.ToLower(f[0].String()), fmt.Sprint(f[1].Integer())}
	var flags []string
	for _, fl := range f[2].Array() {
		flags = append(flags, fl.String())
	}
	if flags == nil {
		flags = []string{"-"}
	}
	fields = append(fields, strings.Join(flags, ","))
	for _, cat := range f[6].Array() {
		fields = append(fields, cat.String())
	}
	for _, ks := range f[8].Array() {
		fields = append(fields, "key="+renderKeySpec(t, ks))
	}
	lines := []string{strings.Join(fields, " ")}
	for _, sub := range f[9].Array() {
		lines = append(lines, commandLines(t, sub)...)
	}
	return lines
}

// renderKeySpec renders a key spec (a map, flat in RESP2) as parseKeySpec
// reads it.
func renderKeySpec(t *testing.T, v resp.Value) string {
	t.Helper()
	m := flatMap(v)
	var flags []string
	for _, fl := range m["flags"].Array() {
		flags = append(flags, fl.String())
	}
	if flags == nil {
		flags = []string{"-"}
	}
	part := func(name string, keys ...string) string {
		sm := flatMap(m[name])
		typ := sm["type"].String()
		if typ == "unknown" {
			return typ
		}
		spec := flatMap(sm["spec"])
		out := []string{typ}
		for _, k := range keys {
			if val, ok := spec[k]; ok {
				out = append(out, val.String())
			}
		}
		return strings.Join(out, ":")
	}
	begin := part("begin_search", "index", "keyword", "startfrom")
	find := part("find_keys", "lastkey", "keystep", "limit", "keynumidx", "firstkey")
	if strings.HasPrefix(find, "keynum:") {
		// keynum's order is keynumidx, firstkey, keystep.
		sm := flatMap(flatMap(m["find_keys"])["spec"])
		find = fmt.Sprintf("keynum:%s:%s:%s", sm["keynumidx"], sm["firstkey"], sm["keystep"])
	}
	s := strings.Join(flags, ",") + "/" + begin + "/" + find
	if _, err := parseKeySpec(s); err != nil {
		t.Fatalf("key spec %v renders as %q: %v", v, s, err)
	}
	return s
}

// flatMap reads a RESP2 map (a flat array of keys and values).
func flatMap(v resp.Value) map[string]resp.Value {
	m := map[string]resp.Value{}
	a := v.Array()
	for i := 0; i+1 < len(a); i += 2 {
		m[a[i].String()] = a[i+1]
	}
	return m
}

// TestParseTable checks the parsed table's shape and the lookups ACL rules
// use.
func TestParseTable(t *testing.T) {
	if got := len(table.categories); got != 21 {
		t.Fatalf("%d categories, want 21", got)
	}
	if table.categories[0] != "keyspace" || table.categories[20] != "scripting" {
		t.Fatalf("categories out of Redis's order: %q", table.categories)
	}
	for _, tc := range []struct {
		name string
		ok   bool
		full string
	}{
		{"get", true, "get"},
		{"GET", true, "get"},
		{"config|get", true, "config|get"},
		{"CONFIG|GET", true, "config|get"},
		{"config", true, "config"},
		{"config|", false, ""},
		{"config|nosuch", false, ""},
		{"config|get|x", false, ""},
		{"select|0", false, ""},
		{"", false, ""},
		{"|", false, ""},
		{"get\x00x", true, "get"},
		{"nosuch", false, ""},
	} {
		id, ok := table.lookupName(tc.name)
		if ok != tc.ok || (ok && table.cmds[id].name != tc.full) {
			t.Errorf("lookupName(%q) = %v %v, want %v %q", tc.name, table.cmds[id].name, ok, tc.ok, tc.full)
		}
	}
	id, _ := table.lookupName("auth")
	if !table.cmds[id].noAuth {
		t.Error("auth is not no_auth")
	}
	id, _ = table.lookupName("config|get")
	if c := table.cmds[id]; c.parent < 0 || table.cmds[c.parent].name != "config" || c.arity != -3 {
		t.Errorf("config|get: %+v", c)
	}
	if _, err := parseTable("@a\nx|y 1 -\n"); err == nil {
		t.Error("a subcommand before its container parsed")
	}
	if _, err := parseTable("@a\nx 1 - @b\n"); err == nil {
		t.Error("an unknown category parsed")
	}
}

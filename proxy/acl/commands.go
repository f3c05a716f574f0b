package acl

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// commandsText is Redis 7.0's command table as ACL rules see it, generated
// from a real redis-server by TestCommandTableMatchesRedis (-update-acl-commands).
//
//go:embed redis_commands.txt
var commandsText string

// table is the parsed commandsText. It is built once, at package
// initialisation, and never written afterwards: every user, selector and
// check reads it without a lock.
var table = mustParseTable(commandsText)

// maxCommands bounds the table so that a command set is a fixed-size array
// (copied by value, compared with ==). Redis 7.0 has 366 commands and
// subcommands; Redis itself reserves 1024 bits.
const maxCommands = 512

// cmdSet is a set of commands by id: one bit per command or subcommand.
type cmdSet [maxCommands / 64]uint64

func (s *cmdSet) has(id int) bool { return s[id/64]&(1<<(id%64)) != 0 }

func (s *cmdSet) set(id int, on bool) {
	if on {
		s[id/64] |= 1 << (id % 64)
	} else {
		s[id/64] &^= 1 << (id % 64)
	}
}

// command is one command or subcommand of the table.
type command struct {
	id       int    // index in commandTable.cmds, and bit in a cmdSet
	name     string // full name, lowercase: "get", "config|get"
	parent   int    // id of the container for a subcommand; -1 otherwise
	subs     []int  // ids of the subcommands, sorted by name; nil for none
	arity    int    // Redis's arity: n exact, -n at least n (the name included)
	noAuth   bool   // flag no_auth: runs whatever the user's commands (AUTH, HELLO, QUIT, RESET)
	cats     uint32 // categories, one bit per index in categories
	keySpecs []keySpec
}

// commandTable is the whole command table: every command and subcommand,
// and the 21 categories in Redis's order.
type commandTable struct {
	cmds       []command
	top        map[string]int   // top-level name (lowercase) → id
	subByName  []map[string]int // per container id: subcommand name (lowercase, no parent) → id
	categories []string         // in Redis's order: ACL CAT, and the order describe tries them
	order      []int            // top-level commands sorted by name: the order rules are described in
	byCategory [][]int          // per category index: the ids of its commands and subcommands
}

// lookupTop returns the id of the top-level command name, case-insensitively
// (ASCII only, as strcasecmp in the C locale).
func (t *commandTable) lookupTop(name string) (int, bool) {
	id, ok := t.top[name]
	if !ok {
		id, ok = t.top[wire.Lower(name)]
	}
	return id, ok
}

// lookupSub returns the id of subcommand name of container parent.
func (t *commandTable) lookupSub(parent int, name string) (int, bool) {
	m := t.subByName[parent]
	if m == nil {
		return 0, false
	}
	id, ok := m[name]
	if !ok {
		id, ok = m[wire.Lower(name)]
	}
	return id, ok
}

// lookupName finds "cmd" or "cmd|sub" as ACL rules name them: one level of
// subcommand at most, and "cmd|sub" only for a command that has
// subcommands (so "select|0" names nothing). It stops at a NUL byte, as
// Redis's lookup of a C string does.
func (t *commandTable) lookupName(name string) (int, bool) {
	name = wire.CString(name)
	if name == "" {
		return 0, false
	}
	base, sub, hasSub := strings.Cut(name, "|")
	if hasSub && strings.Contains(sub, "|") {
		return 0, false
	}
	id, ok := t.lookupTop(base)
	if !ok || !hasSub {
		return id, ok
	}
	return t.lookupSub(id, sub)
}

// lookupArgs finds the command args name, as Redis does for a command it is
// about to run: a container with more than one argument resolves to the
// subcommand args[1] names (nothing if it names none); a container alone
// resolves to itself.
func (t *commandTable) lookupArgs(args [][]byte) (int, bool) {
	if len(args) == 0 {
		return 0, false
	}
	id, ok := t.lookupTop(string(args[0]))
	if !ok || len(args) == 1 || t.cmds[id].subs == nil {
		return id, ok
	}
	return t.lookupSub(id, string(args[1]))
}

// category returns the bit of a category name (case-insensitive), or 0.
func (t *commandTable) category(name string) uint32 {
	name = wire.CString(name)
	for i, c := range t.categories {
		if wire.EqualFold(c, name) {
			return 1 << i
		}
	}
	return 0
}

// each calls fn for every command in description order: each top-level
// command by name, followed by its subcommands by name.
func (t *commandTable) each(fn func(c *command)) {
	for _, id := range t.order {
		fn(&t.cmds[id])
		for _, sub := range t.cmds[id].subs {
			fn(&t.cmds[sub])
		}
	}
}

// mustParseTable parses the embedded table; a broken file is a build
// mistake, caught by every test, so it panics.
func mustParseTable(text string) *commandTable {
	t, err := parseTable(text)
	if err != nil {
		panic("acl: redis_commands.txt: " + err.Error())
	}
	return t
}

// parseTable parses the format renderTable writes: comment lines (#), one
// line of categories (@name ...), then one line per command or subcommand,
// a container before its subcommands:
//
//	name[|sub] arity flags|- [@category ...] [key=<flags>/<begin>/<find> ...]
func parseTable(text string) (*commandTable, error) {
	t := &commandTable{top: map[string]int{}}
	for n, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if line[0] == '@' {
			for _, f := range fields {
				t.categories = append(t.categories, strings.TrimPrefix(f, "@"))
			}
			continue
		}
		if err := t.addLine(fields); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
	}
	switch {
	case len(t.categories) == 0 || len(t.categories) > 32:
		return nil, fmt.Errorf("%d categories", len(t.categories))
	case len(t.cmds) == 0 || len(t.cmds) > maxCommands:
		return nil, fmt.Errorf("%d commands (at most %d)", len(t.cmds), maxCommands)
	}
	for _, id := range t.top {
		t.order = append(t.order, id)
	}
	slices.SortFunc(t.order, func(a, b int) int { return strings.Compare(t.cmds[a].name, t.cmds[b].name) })
	for i := range t.cmds {
		c := &t.cmds[i]
		slices.SortFunc(c.subs, func(a, b int) int { return strings.Compare(t.cmds[a].name, t.cmds[b].name) })
	}
	t.byCategory = make([][]int, len(t.categories))
	t.each(func(c *command) {
		for j := range t.categories {
			if c.cats&(1<<j) != 0 {
				t.byCategory[j] = append(t.byCategory[j], c.id)
			}
		}
	})
	return t, nil
}

// addLine adds one command line of the table.
func (t *commandTable) addLine(fields []string) error {
	if len(fields) < 3 {
		return fmt.Errorf("want name, arity and flags: %q", fields)
	}
	c := command{id: len(t.cmds), name: fields[0], parent: -1}
	if c.name != wire.Lower(c.name) {
		return fmt.Errorf("name %q is not lowercase", c.name)
	}
	arity, err := strconv.Atoi(fields[1])
	if err != nil {
		return fmt.Errorf("arity: %w", err)
	}
	c.arity = arity
	if fields[2] != "-" {
		c.noAuth = slices.Contains(strings.Split(fields[2], ","), "no_auth")
	}
	for _, f := range fields[3:] {
		switch {
		case strings.HasPrefix(f, "@"):
			bit := t.category(f[1:])
			if bit == 0 {
				return fmt.Errorf("unknown category %q", f)
			}
			c.cats |= bit
		case strings.HasPrefix(f, "key="):
			ks, err := parseKeySpec(f[len("key="):])
			if err != nil {
				return err
			}
			c.keySpecs = append(c.keySpecs, ks)
		default:
			return fmt.Errorf("unknown field %q", f)
		}
	}
	base, sub, isSub := strings.Cut(c.name, "|")
	if !isSub {
		if _, dup := t.top[base]; dup {
			return fmt.Errorf("duplicate command %q", base)
		}
		t.top[base] = c.id
		t.cmds = append(t.cmds, c)
		t.subByName = append(t.subByName, nil)
		return nil
	}
	parent, ok := t.top[base]
	if !ok || sub == "" || strings.Contains(sub, "|") {
		return fmt.Errorf("subcommand %q before its container, or malformed", c.name)
	}
	if _, dup := t.subByName[parent][sub]; dup {
		return fmt.Errorf("duplicate subcommand %q", c.name)
	}
	c.parent = parent
	if t.subByName[parent] == nil {
		t.subByName[parent] = map[string]int{}
	}
	t.subByName[parent][sub] = c.id
	t.cmds[parent].subs = append(t.cmds[parent].subs, c.id)
	t.cmds = append(t.cmds, c)
	t.subByName = append(t.subByName, nil)
	return nil
}

// Categories returns the ACL categories in Redis's order, as ACL CAT with no
// argument lists them. The slice is the caller's.
func Categories() []string { return slices.Clone(table.categories) }

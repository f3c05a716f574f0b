// Package commanddocs holds what COMMAND, COMMAND INFO, COMMAND DOCS and
// COMMAND LIST say of the commands the proxy serves, and only those, in
// Redis 7.0's formats: each entry is redis-server 7.0's own for that
// command, with its subcommands cut to the ones the proxy serves. The
// entries are kept in command_docs.resp, as redis-server 7.0 sends them
// under RESP3 (so that maps stay maps for a RESP3 reply); the proxy's
// TestCommandDocsMatchRedis checks them against a real redis-server and
// rewrites the file with -update-command-docs. A Docs is read-only once
// loaded: any goroutine may use it.
package commanddocs

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

//go:embed command_docs.resp
var embedded []byte

// Embedded returns a copy of command_docs.resp as built in.
func Embedded() []byte { return slices.Clone(embedded) }

// LoadEmbedded parses the built-in entries; it fails only on a broken
// build, which the package's tests rule out.
func LoadEmbedded() (*Docs, error) { return Load(embedded) }

// MapGet returns the value of key in m, a '%' value.
func MapGet(m Value, key string) (Value, bool) {
	for i := 0; i+1 < len(m.Elems); i += 2 {
		if m.Elems[i].Str == key {
			return m.Elems[i+1], true
		}
	}
	return Value{}, false
}

// Append appends v in protocol p: as stored (RESP3's maps and
// sets) for a RESP3 client, flattened for a RESP2 one.
func Append(b []byte, p wire.Proto, v Value) []byte {
	switch v.Kind {
	case '+':
		return wire.AppendSimple(b, v.Str)
	case '$':
		return wire.AppendBulkString(b, v.Str)
	case ':':
		return wire.AppendInt(b, v.Num)
	case '_':
		return p.AppendNull(b)
	}
	if p == wire.RESP3 {
		n := len(v.Elems)
		if v.Kind == '%' {
			n /= 2
		}
		b = append(b, v.Kind)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '\r', '\n')
	} else {
		// RESP2 as Redis writes it: sets as arrays, maps as arrays of
		// keys and values.
		b = wire.AppendArrayHeader(b, len(v.Elems))
	}
	for _, e := range v.Elems {
		b = Append(b, p, e)
	}
	return b
}

// AppendRESP3 appends v in RESP3, as parsed.
func AppendRESP3(b []byte, v Value) []byte { return Append(b, wire.RESP3, v) }

// ErrIncomplete is Parse's error for input that stops inside a
// value.
var ErrIncomplete = errors.New("incomplete value")

// maxDocsDepth bounds parse's nesting (Redis's docs nest arguments a
// few levels deep).
const maxDocsDepth = 16

// parse parses one RESP3 value of the kinds the command docs use
// (simple, bulk, integer, null, array, set, map) off the front of b; a
// RESP2 null bulk ($-1) reads as a null. Tests read replies with it too,
// errors ('-') and doubles (',', ACL LOG's age) included, kept in str.
func parse(b []byte, depth int) (Value, []byte, error) {
	if depth > maxDocsDepth {
		return Value{}, nil, errors.New("nested too deep")
	}
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return Value{}, nil, ErrIncomplete
	}
	line, rb := string(b[:i]), b[i+2:]
	v := Value{Kind: line[0]}
	switch v.Kind {
	case '+', '-', ',':
		v.Str = line[1:]
		return v, rb, nil
	case '_':
		return v, rb, nil
	case ':':
		n, err := strconv.ParseInt(line[1:], 10, 64)
		v.Num = n
		return v, rb, err
	case '$':
		n, err := strconv.Atoi(line[1:])
		if n == -1 && err == nil {
			return Value{Kind: '_'}, rb, nil // RESP2's null
		}
		if err != nil || n < 0 {
			return Value{}, nil, fmt.Errorf("bad bulk %q", line)
		}
		if n+2 > len(rb) {
			return Value{}, nil, ErrIncomplete
		}
		if string(rb[n:n+2]) != "\r\n" {
			return Value{}, nil, fmt.Errorf("bad bulk %q", line)
		}
		v.Str = string(rb[:n])
		return v, rb[n+2:], nil
	case '*', '~', '%':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > 1<<20 {
			return Value{}, nil, fmt.Errorf("bad length %q", line)
		}
		if v.Kind == '%' {
			n *= 2
		}
		for range n {
			var e Value
			if e, rb, err = parse(rb, depth+1); err != nil {
				return Value{}, nil, err
			}
			v.Elems = append(v.Elems, e)
		}
		return v, rb, nil
	}
	return Value{}, nil, fmt.Errorf("unexpected type %q", line[:1])
}

// A Value is one RESP3 reply value of the command docs: '+' and '$'
// in str, ':' in num, '*' and '~' in elems, '%' in elems as key, value,
// key, value. Read-only once parsed.
type Value struct {
	Kind  byte
	Str   string
	Num   int64
	Elems []Value
}

// Docs are the parsed entries, by command name.
type Docs struct {
	names []string         // sorted
	info  map[string]Value // COMMAND INFO's entry (an array of 10)
	docs  map[string]Value // COMMAND DOCS's map for the command
}

// Names are the served commands' names, sorted; not to be changed.
func (d *Docs) Names() []string { return d.names }

// Info is name's COMMAND INFO entry (a command, not a subcommand).
func (d *Docs) Info(name string) Value { return d.info[name] }

// Docs is name's COMMAND DOCS map (a command, not a subcommand).
func (d *Docs) Docs(name string) Value { return d.docs[name] }

// Load parses command_docs.resp: COMMAND INFO's reply for every
// served command, then COMMAND DOCS's. It fails only if the embedded file
// is broken, which its test rules out.
func Load(data []byte) (*Docs, error) {
	info, rest, err := parse(data, 0)
	if err != nil {
		return nil, fmt.Errorf("command info: %w", err)
	}
	docs, rest, err := parse(rest, 0)
	if err != nil {
		return nil, fmt.Errorf("command docs: %w", err)
	}
	if len(rest) != 0 || info.Kind != '*' || docs.Kind != '%' {
		return nil, errors.New("command docs: not one array and one map")
	}
	d := &Docs{info: make(map[string]Value), docs: make(map[string]Value)}
	for _, e := range info.Elems {
		if e.Kind != '*' || len(e.Elems) != 10 {
			return nil, errors.New("command info: an entry is not an array of 10")
		}
		d.names = append(d.names, e.Elems[0].Str)
		d.info[e.Elems[0].Str] = e
	}
	for i := 0; i+1 < len(docs.Elems); i += 2 {
		d.docs[docs.Elems[i].Str] = docs.Elems[i+1]
	}
	slices.Sort(d.names)
	return d, nil
}

// Lookup finds name's COMMAND INFO entry and docs, a subcommand by its
// full name ("config|get") as Redis 7 does.
func (d *Docs) Lookup(name string) (info, docs Value, ok bool) {
	name = wire.Lower(name)
	parent, sub, isSub := strings.Cut(name, "|")
	info, ok = d.info[parent]
	if !ok {
		return Value{}, Value{}, false
	}
	docs = d.docs[parent]
	if !isSub {
		return info, docs, true
	}
	full := parent + "|" + sub
	var found bool
	for _, s := range info.Elems[9].Elems {
		if s.Elems[0].Str == full {
			info, found = s, true
		}
	}
	if !found {
		return Value{}, Value{}, false
	}
	subDocs, _ := MapGet(docs, "subcommands")
	docs, _ = MapGet(subDocs, full)
	return info, docs, true
}

// Parse parses one RESP3 value off the front of b, as parse does from the
// top: tests read redis-server's replies with it, errors included.
func Parse(b []byte) (Value, []byte, error) { return parse(b, 0) }

// List is COMMAND LIST FILTERBY kind arg's matches among the commands and
// their subcommands, as Redis 7.0 lists them; ok is false for a kind
// Redis does not know.
func (d *Docs) List(kind, arg string) (list []string, ok bool) {
	var match func(info Value) bool
	switch wire.Word(kind) {
	case "module":
		match = func(Value) bool { return false } // no module commands
	case "aclcat":
		match = func(info Value) bool {
			return slices.ContainsFunc(info.Elems[6].Elems, func(v Value) bool {
				return wire.EqualFold(v.Str, "@"+arg)
			})
		}
	case "pattern":
		match = func(info Value) bool {
			ok, _ := path.Match(wire.Lower(arg), info.Elems[0].Str)
			return ok
		}
	default:
		return nil, false
	}
	for _, n := range d.names {
		info := d.info[n]
		if match(info) {
			list = append(list, n)
		}
		for _, sub := range info.Elems[9].Elems {
			if match(sub) {
				list = append(list, sub.Elems[0].Str)
			}
		}
	}
	return list, true
}

// A Misuse is what is wrong with a COMMAND call, for the caller to answer
// as it answers any command's.
type Misuse int

const (
	Fine              Misuse = iota
	WrongArity               // a subcommand with the wrong number of arguments
	UnknownSubcommand        // no such subcommand
)

// Reply appends COMMAND's reply to args (COMMAND [COUNT | INFO [name ...] |
// DOCS [name ...] | LIST [FILTERBY MODULE m | ACLCAT c | PATTERN p]]) in
// protocol p, as Redis 7.0 answers over the served commands; count is
// COMMAND COUNT's answer. A misuse appends nothing and says what it was.
func (d *Docs) Reply(b []byte, p wire.Proto, args [][]byte, count int) ([]byte, Misuse) {
	if len(args) == 1 {
		return d.appendInfo(b, p, d.names), Fine
	}
	switch wire.Lower(string(args[1])) {
	case "count":
		if len(args) != 2 {
			return b, WrongArity
		}
		return wire.AppendInt(b, int64(count)), Fine
	case "info":
		if len(args) == 2 {
			return d.appendInfo(b, p, d.names), Fine
		}
		b = wire.AppendArrayHeader(b, len(args)-2)
		for _, n := range args[2:] {
			if info, _, ok := d.Lookup(string(n)); ok {
				b = Append(b, p, info)
			} else {
				b = p.AppendNull(b)
			}
		}
		return b, Fine
	case "docs":
		return d.appendDocs(b, p, args[2:]), Fine
	case "list":
		list, ok := d.names, true
		if len(args) != 2 {
			if len(args) != 5 || !wire.EqualFold(args[2], "filterby") {
				ok = false
			} else {
				list, ok = d.List(string(args[3]), string(args[4]))
			}
		}
		if !ok {
			return wire.AppendError(b, "ERR syntax error"), Fine
		}
		b = wire.AppendArrayHeader(b, len(list))
		for _, n := range list {
			b = wire.AppendBulkString(b, n)
		}
		return b, Fine
	}
	return b, UnknownSubcommand
}

// appendInfo appends the COMMAND INFO entries of names.
func (d *Docs) appendInfo(b []byte, p wire.Proto, names []string) []byte {
	b = wire.AppendArrayHeader(b, len(names))
	for _, n := range names {
		b = Append(b, p, d.info[n])
	}
	return b
}

// appendDocs appends COMMAND DOCS of names (all commands when none):
// Redis's map, flattened into an array in RESP2.
func (d *Docs) appendDocs(b []byte, p wire.Proto, names [][]byte) []byte {
	var found []string
	var docs []Value
	if len(names) == 0 {
		for _, n := range d.names {
			found, docs = append(found, n), append(docs, d.docs[n])
		}
	}
	for _, n := range names {
		if info, doc, ok := d.Lookup(string(n)); ok {
			found, docs = append(found, info.Elems[0].Str), append(docs, doc)
		}
	}
	b = p.AppendMapHeader(b, len(found))
	for i, n := range found {
		b = wire.AppendBulkString(b, n)
		b = Append(b, p, docs[i])
	}
	return b
}

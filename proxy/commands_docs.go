package proxy

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

// COMMAND, COMMAND INFO, COMMAND DOCS, COMMAND LIST and COMMAND COUNT
// describe the commands the proxy serves, and only those, in Redis 7.0's
// formats: each entry is redis-server 7.0's own for that command, with its
// subcommands cut to the ones the proxy serves (servedSubcommands). The
// entries are kept in command_docs.resp, as redis-server 7.0 sends them
// under RESP3 (so that maps stay maps for a RESP3 reply), and
// TestCommandDocsMatchRedis checks them against a real redis-server and
// rewrites the file with -update.

//go:embed command_docs.resp
var commandDocsRESP []byte

// servedSubcommands are the subcommands the proxy serves, for the commands
// that have them. Read-only. cmdConfig, cmdClient, cmdCommand, cmdSlowlog
// and cmdLatency must serve each one listed (a test sends each).
var servedSubcommands = map[string][]string{
	"client":  {"getname", "id", "info", "kill", "list", "setname"},
	"command": {"count", "docs", "info", "list"},
	"config":  {"get", "resetstat", "rewrite", "set"},
	"latency": {"doctor", "graph", "histogram", "history", "latest", "reset"},
	"slowlog": {"get", "len", "reset"},
}

// A respValue is one RESP3 reply value of the command docs: '+' and '$'
// in str, ':' in num, '*' and '~' in elems, '%' in elems as key, value,
// key, value. Read-only once parsed.
type respValue struct {
	kind  byte
	str   string
	num   int64
	elems []respValue
}

// commandDocs are the parsed entries, by command name.
type commandDocs struct {
	names []string             // sorted
	info  map[string]respValue // COMMAND INFO's entry (an array of 10)
	docs  map[string]respValue // COMMAND DOCS's map for the command
}

// loadCommandDocs parses command_docs.resp: COMMAND INFO's reply for every
// served command, then COMMAND DOCS's. It fails only if the embedded file
// is broken, which its test rules out.
func loadCommandDocs(data []byte) (*commandDocs, error) {
	info, rest, err := parseRESP3(data, 0)
	if err != nil {
		return nil, fmt.Errorf("command info: %w", err)
	}
	docs, rest, err := parseRESP3(rest, 0)
	if err != nil {
		return nil, fmt.Errorf("command docs: %w", err)
	}
	if len(rest) != 0 || info.kind != '*' || docs.kind != '%' {
		return nil, errors.New("command docs: not one array and one map")
	}
	d := &commandDocs{info: make(map[string]respValue), docs: make(map[string]respValue)}
	for _, e := range info.elems {
		if e.kind != '*' || len(e.elems) != 10 {
			return nil, errors.New("command info: an entry is not an array of 10")
		}
		d.names = append(d.names, e.elems[0].str)
		d.info[e.elems[0].str] = e
	}
	for i := 0; i+1 < len(docs.elems); i += 2 {
		d.docs[docs.elems[i].str] = docs.elems[i+1]
	}
	slices.Sort(d.names)
	return d, nil
}

// lookup finds name's COMMAND INFO entry and docs, a subcommand by its
// full name ("config|get") as Redis 7 does.
func (d *commandDocs) lookup(name string) (info, docs respValue, ok bool) {
	name = strings.ToLower(name)
	parent, sub, isSub := strings.Cut(name, "|")
	info, ok = d.info[parent]
	if !ok {
		return respValue{}, respValue{}, false
	}
	docs = d.docs[parent]
	if !isSub {
		return info, docs, true
	}
	full := parent + "|" + sub
	var found bool
	for _, s := range info.elems[9].elems {
		if s.elems[0].str == full {
			info, found = s, true
		}
	}
	if !found {
		return respValue{}, respValue{}, false
	}
	subDocs, _ := mapGet(docs, "subcommands")
	docs, _ = mapGet(subDocs, full)
	return info, docs, true
}

// cmdCommand is COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST
// [FILTERBY MODULE m | ACLCAT c | PATTERN p]], with Redis 7.0's replies,
// over the commands the proxy serves.
func (s *Server) cmdCommand(c *client, args [][]byte) bool {
	d := s.cmdDocs
	if len(args) == 1 {
		c.out = wire.AppendArrayHeader(c.out, len(d.names))
		for _, n := range d.names {
			c.out = appendDocValue(c.out, c.proto(), d.info[n])
		}
		return false
	}
	switch strings.ToLower(string(args[1])) {
	case "count":
		if subArity(c, args, 2) {
			c.out = wire.AppendInt(c.out, int64(len(s.commands)))
		}
	case "info":
		names := args[2:]
		if len(names) == 0 {
			c.out = wire.AppendArrayHeader(c.out, len(d.names))
			for _, n := range d.names {
				c.out = appendDocValue(c.out, c.proto(), d.info[n])
			}
			break
		}
		c.out = wire.AppendArrayHeader(c.out, len(names))
		for _, n := range names {
			if info, _, ok := d.lookup(string(n)); ok {
				c.out = appendDocValue(c.out, c.proto(), info)
			} else {
				c.out = c.proto().AppendNull(c.out)
			}
		}
	case "docs":
		var found []string
		var docs []respValue
		if len(args) == 2 {
			for _, n := range d.names {
				found, docs = append(found, n), append(docs, d.docs[n])
			}
		}
		for _, n := range args[2:] {
			if info, doc, ok := d.lookup(string(n)); ok {
				found, docs = append(found, info.elems[0].str), append(docs, doc)
			}
		}
		// Redis's map (flattened into an array in RESP2).
		c.out = c.proto().AppendMapHeader(c.out, len(found))
		for i, n := range found {
			c.out = wire.AppendBulkString(c.out, n)
			c.out = appendDocValue(c.out, c.proto(), docs[i])
		}
	case "list":
		s.commandList(c, args[2:])
	default:
		unknownSub(c, args)
	}
	return false
}

// commandList is COMMAND LIST [FILTERBY ...]: every name, a filter's
// matches among the commands and their subcommands, as Redis 7.0 lists
// them.
func (s *Server) commandList(c *client, args [][]byte) {
	d := s.cmdDocs
	if len(args) == 0 {
		c.out = wire.AppendArrayHeader(c.out, len(d.names))
		for _, n := range d.names {
			c.out = wire.AppendBulkString(c.out, n)
		}
		return
	}
	if len(args) != 3 || !strings.EqualFold(string(args[0]), "filterby") {
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return
	}
	arg := string(args[2])
	var match func(info respValue) bool
	switch strings.ToLower(string(args[1])) {
	case "module":
		match = func(respValue) bool { return false } // no module commands
	case "aclcat":
		match = func(info respValue) bool {
			return slices.ContainsFunc(info.elems[6].elems, func(v respValue) bool {
				return strings.EqualFold(v.str, "@"+arg)
			})
		}
	case "pattern":
		match = func(info respValue) bool {
			ok, _ := path.Match(strings.ToLower(arg), info.elems[0].str)
			return ok
		}
	default:
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return
	}
	var list []string
	for _, n := range d.names {
		info := d.info[n]
		if match(info) {
			list = append(list, n)
		}
		for _, sub := range info.elems[9].elems {
			if match(sub) {
				list = append(list, sub.elems[0].str)
			}
		}
	}
	c.out = wire.AppendArrayHeader(c.out, len(list))
	for _, n := range list {
		c.out = wire.AppendBulkString(c.out, n)
	}
}

// mapGet returns the value of key in m, a '%' value.
func mapGet(m respValue, key string) (respValue, bool) {
	for i := 0; i+1 < len(m.elems); i += 2 {
		if m.elems[i].str == key {
			return m.elems[i+1], true
		}
	}
	return respValue{}, false
}

// appendDocValue appends v in protocol p: as stored (RESP3's maps and
// sets) for a RESP3 client, flattened for a RESP2 one.
func appendDocValue(b []byte, p wire.Proto, v respValue) []byte {
	switch v.kind {
	case '+':
		return wire.AppendSimple(b, v.str)
	case '$':
		return wire.AppendBulkString(b, v.str)
	case ':':
		return wire.AppendInt(b, v.num)
	case '_':
		return p.AppendNull(b)
	}
	if p == wire.RESP3 {
		n := len(v.elems)
		if v.kind == '%' {
			n /= 2
		}
		b = append(b, v.kind)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, '\r', '\n')
	} else {
		// RESP2 as Redis writes it: sets as arrays, maps as arrays of
		// keys and values.
		b = wire.AppendArrayHeader(b, len(v.elems))
	}
	for _, e := range v.elems {
		b = appendDocValue(b, p, e)
	}
	return b
}

// appendRESP3 appends v in RESP3, as parsed.
func appendRESP3(b []byte, v respValue) []byte { return appendDocValue(b, wire.RESP3, v) }

// errIncompleteDocs is parseRESP3's error for input that stops inside a
// value.
var errIncompleteDocs = errors.New("incomplete value")

// maxDocsDepth bounds parseRESP3's nesting (Redis's docs nest arguments a
// few levels deep).
const maxDocsDepth = 16

// parseRESP3 parses one RESP3 value of the kinds the command docs use
// (simple, bulk, integer, null, array, set, map) off the front of b; a
// RESP2 null bulk ($-1) reads as a null. Tests read replies with it too,
// errors ('-') included, kept in str.
func parseRESP3(b []byte, depth int) (respValue, []byte, error) {
	if depth > maxDocsDepth {
		return respValue{}, nil, errors.New("nested too deep")
	}
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return respValue{}, nil, errIncompleteDocs
	}
	line, rb := string(b[:i]), b[i+2:]
	v := respValue{kind: line[0]}
	switch v.kind {
	case '+', '-':
		v.str = line[1:]
		return v, rb, nil
	case '_':
		return v, rb, nil
	case ':':
		n, err := strconv.ParseInt(line[1:], 10, 64)
		v.num = n
		return v, rb, err
	case '$':
		n, err := strconv.Atoi(line[1:])
		if n == -1 && err == nil {
			return respValue{kind: '_'}, rb, nil // RESP2's null
		}
		if err != nil || n < 0 {
			return respValue{}, nil, fmt.Errorf("bad bulk %q", line)
		}
		if n+2 > len(rb) {
			return respValue{}, nil, errIncompleteDocs
		}
		if string(rb[n:n+2]) != "\r\n" {
			return respValue{}, nil, fmt.Errorf("bad bulk %q", line)
		}
		v.str = string(rb[:n])
		return v, rb[n+2:], nil
	case '*', '~', '%':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 || n > 1<<20 {
			return respValue{}, nil, fmt.Errorf("bad length %q", line)
		}
		if v.kind == '%' {
			n *= 2
		}
		for range n {
			var e respValue
			if e, rb, err = parseRESP3(rb, depth+1); err != nil {
				return respValue{}, nil, err
			}
			v.elems = append(v.elems, e)
		}
		return v, rb, nil
	}
	return respValue{}, nil, fmt.Errorf("unexpected type %q", line[:1])
}

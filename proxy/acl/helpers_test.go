package acl

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/resp"
)

// plain is a reply as RESP2 carries it, for comparing ours with Redis's:
// nil for null, string for simple and bulk strings, errReply for errors,
// int64, and []any for arrays (maps and sets flattened, as in RESP2).
type errReply string

// plainOf converts our Value to its RESP2 shape.
func plainOf(v Value) any {
	switch v.Kind {
	case KindNull:
		return nil
	case KindSimple, KindBulk:
		return v.Str
	case KindError:
		return errReply(v.Str)
	case KindInt:
		return v.Int
	case KindDouble:
		return FormatDouble(v.Double)
	}
	out := make([]any, len(v.Elems))
	for i, e := range v.Elems {
		out[i] = plainOf(e)
	}
	return out
}

// plainOfResp converts a reply read from Redis.
func plainOfResp(v resp.Value) any {
	switch v.Type() {
	case resp.Error:
		return errReply(v.String())
	case resp.Integer:
		return int64(v.Integer())
	case resp.Array:
		if v.IsNull() {
			return nil
		}
		out := []any{}
		for _, e := range v.Array() {
			out = append(out, plainOfResp(e))
		}
		return out
	}
	if v.IsNull() {
		return nil
	}
	return v.String()
}

// normRules puts in a canonical order the single-command rules of a rules
// string (ACL LIST's rules, or GETUSER's commands): Redis writes them in
// the order of its command dictionary, which changes with every process.
// Within each selector (the root, each "(...)"), the +cmd/-cmd tokens are
// sorted in place; every other token keeps its place.
func normRules(s string) string {
	// Parentheses become tokens of their own, to be glued back after.
	var tokens []string
	for _, tok := range strings.Split(s, " ") {
		open := strings.HasPrefix(tok, "(")
		tok = strings.TrimPrefix(tok, "(")
		closing := strings.HasSuffix(tok, ")")
		tok = strings.TrimSuffix(tok, ")")
		if open {
			tokens = append(tokens, "(")
		}
		tokens = append(tokens, tok)
		if closing {
			tokens = append(tokens, ")")
		}
	}
	var idx []int
	var vals []string
	flush := func() {
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		for i, j := range idx {
			tokens[j] = sorted[i]
		}
		idx, vals = nil, nil
	}
	for i, tok := range tokens {
		switch {
		case tok == "(" || tok == ")":
			flush()
		case (strings.HasPrefix(tok, "+") || strings.HasPrefix(tok, "-")) && !strings.HasPrefix(tok[1:], "@"):
			idx, vals = append(idx, i), append(vals, tok)
		}
	}
	flush()
	out := strings.Join(tokens, " ")
	return strings.ReplaceAll(strings.ReplaceAll(out, "( ", "("), " )", ")")
}

// normLines applies normRules to each line of text.
func normLines(text string) string {
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = normRules(lines[i])
	}
	return strings.Join(lines, "\n")
}

// normGetUser applies normRules to the commands fields of a GETUSER reply
// in its RESP2 shape.
func normGetUser(v any) any {
	a, ok := v.([]any)
	if !ok {
		return v
	}
	out := slices.Clone(a)
	for i := 0; i+1 < len(out); i += 2 {
		switch out[i] {
		case "commands":
			out[i+1] = normRules(out[i+1].(string))
		case "selectors":
			sels := slices.Clone(out[i+1].([]any))
			for j := range sels {
				sels[j] = normGetUser(sels[j])
			}
			out[i+1] = sels
		}
	}
	return out
}

// show formats a plain reply for failure messages.
func show(v any) string { return fmt.Sprintf("%#v", v) }

// bs converts strings to the [][]byte arguments the API takes.
func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// mustSetUser applies rules to a user and fails the test on an error.
func mustSetUser(t testing.TB, s *Users, name string, rules ...string) *User {
	t.Helper()
	u, _, err := s.SetUser(name, bs(rules...))
	if err != nil {
		t.Fatalf("SETUSER %s %q: %v", name, rules, err)
	}
	return u
}

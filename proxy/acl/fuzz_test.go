package acl

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// FuzzSetUser applies any rule list (the input's lines) to a user. No rule
// may panic; a refused list must change nothing; and an accepted one must
// describe itself: its ACL LIST line, applied to a new user (split as ACL
// LOAD splits it), gives the same permissions and the same line, and
// survives Save and Load.
func FuzzSetUser(f *testing.F) {
	for _, rules := range ruleCorpus {
		f.Add(strings.Join(rules, "\n"))
	}
	f.Add("+@all\n-@dangerous\n(+get ~k*)\n+select|0\n%R~x\n&c*")
	f.Add("(+get\n~a)\n(\"+set\" '~b')\n+debug|\x00x")
	f.Fuzz(func(t *testing.T, in string) {
		s := NewUsers()
		mustSetUser(t, s, "u", "on", "+ping", "~k") // an existing user, for a refused list to leave alone
		before := s.List()
		rules := bs(strings.Split(in, "\n")...)
		u, _, err := s.SetUser("u", rules)
		if err != nil {
			if !slices.Equal(s.List(), before) {
				t.Fatalf("refused %q (%v) changed the user: %q, was %q", in, err, s.List(), before)
			}
			return
		}
		checkRoundTrip(t, u.Profile())
		if !roundTrippable(u.Profile()) {
			return
		}
		again := NewUsers()
		if err := again.Load("fuzz.acl", s.Save()); err != nil {
			t.Fatalf("Load(Save()) after %q: %v\nsaved: %q", in, err, s.Save())
		}
		if got, want := again.List(), s.List(); !slices.Equal(got, want) {
			t.Fatalf("Load(Save()) after %q:\n got  %q\n want %q", in, got, want)
		}
	})
}

// checkRoundTrip applies p's description to a new profile, as ACL LOAD
// reads an aclfile line, and checks that it gives p's permissions and
// description back (when p's patterns and first arguments survive the
// aclfile's format: see roundTrippable).
func checkRoundTrip(t *testing.T, p *Profile) {
	t.Helper()
	if !roundTrippable(p) {
		return
	}
	rules, open := mergeSelectors(strings.Split(p.Rules(), " "))
	if open >= 0 {
		t.Fatalf("description %q has an unmatched parenthesis", p.Rules())
	}
	q := newProfile(false)
	for _, r := range rules {
		if e := q.apply(trimSet(r, "\t\r\n"), false); e != errNone {
			t.Fatalf("description %q: rule %q: %s", p.Rules(), r, e.text())
		}
	}
	q.seal()
	if q.Rules() != p.Rules() {
		t.Fatalf("description %q applied describes itself as %q", p.Rules(), q.Rules())
	}
	if !samePermissions(p, q) {
		t.Fatalf("description %q applied gives other permissions", p.Rules())
	}
}

// samePermissions reports whether p and q allow the same: flags,
// passwords, and per selector the same commands (and first arguments of
// the commands not allowed), the same future commands, keys and channels.
func samePermissions(p, q *Profile) bool {
	if p.flags != q.flags || !slices.Equal(p.passwords, q.passwords) || len(p.selectors) != len(q.selectors) {
		return false
	}
	for i := range p.selectors {
		a, b := &p.selectors[i], &q.selectors[i]
		if a.future != b.future || a.allKeys != b.allKeys || a.allChannels != b.allChannels ||
			!slices.Equal(a.keys, b.keys) || !slices.Equal(a.channels, b.channels) {
			return false
		}
		for _, c := range table.cmds {
			if a.allowed.has(c.id) != b.allowed.has(c.id) {
				return false
			}
			if !a.allowed.has(c.id) && !slices.Equal(a.firstArgs[c.id], b.firstArgs[c.id]) {
				return false
			}
		}
	}
	return true
}

// roundTrippable reports whether p's description can be read back as
// Redis reads it: Redis does not refuse a first argument with white space,
// nor (inside a selector) a pattern or first argument with a quote or that
// ends with ')', nor a key pattern "*" for reads and writes given as
// "%RW~*" (described "~*", which reads back as allkeys, dropping the other
// patterns or refusing the ones after it), but its ACL LIST line then reads
// back differently (ACL LOAD splits on spaces; a selector's text is split
// with quotes). Such users do not round-trip in Redis either.
func roundTrippable(p *Profile) bool {
	for i := range p.selectors {
		s := &p.selectors[i]
		if slices.Contains(s.keys, keyPattern{pattern: "*", perm: permAll}) {
			return false
		}
		var words []string
		for _, args := range s.firstArgs {
			words = append(words, args...)
		}
		for _, w := range words {
			if strings.ContainsAny(w, " \t\r\n\v\f") {
				return false
			}
		}
		if i == 0 {
			continue
		}
		for _, k := range s.keys {
			words = append(words, k.pattern)
		}
		words = append(words, s.channels...)
		for _, w := range words {
			if strings.ContainsAny(w, "\"'") || strings.HasSuffix(w, ")") {
				return false
			}
		}
	}
	return true
}

// FuzzLoad loads any aclfile text: no panic; a refused file changes
// nothing; an accepted one saves into a text that loads into the same
// users.
func FuzzLoad(f *testing.F) {
	for _, text := range loadCorpus {
		f.Add([]byte(text))
	}
	f.Add([]byte("user a on (+get ~x) +set\nuser b off #" + hashOfX + "\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		s := NewUsers()
		mustSetUser(t, s, "keep", "on", "+get")
		before := s.List()
		if err := s.Load("fuzz.acl", text); err != nil {
			if !slices.Equal(s.List(), before) {
				t.Fatalf("refused file %q changed the users: %q", text, s.List())
			}
			if !strings.HasSuffix(err.Error(), "no change to the previously active ACL rules was performed") {
				t.Fatalf("error %q", err)
			}
			return
		}
		if s.Lookup("keep") != nil && !bytes.Contains(text, []byte("keep")) {
			t.Fatalf("user keep survived a load of %q", text)
		}
		for _, name := range s.Names() {
			if !roundTrippable(s.Lookup(name).Profile()) {
				return
			}
		}
		again := NewUsers()
		if err := again.Load("fuzz.acl", s.Save()); err != nil {
			t.Fatalf("Load(Save()) of %q: %v", text, err)
		}
		if got, want := again.List(), s.List(); !slices.Equal(got, want) {
			t.Fatalf("Load(Save()) of %q:\n got  %q\n want %q", text, got, want)
		}
	})
}

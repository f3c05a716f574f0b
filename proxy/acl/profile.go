package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/replproxy/replproxy/proxy/wire"
)

// userFlag is a user's flags (Redis's USER_FLAG_*).
type userFlag uint8

// The user flags, in the order ACL LIST and ACL GETUSER show them.
const (
	flagOn userFlag = 1 << iota
	flagOff
	flagNoPass
	flagSkipSanitize
	flagSanitize
)

var userFlagNames = [...]string{"on", "off", "nopass", "skip-sanitize-payload", "sanitize-payload"}

// Profile is one version of a user: its flags, its password hashes and its
// selectors. A Profile never changes once a [User] holds it: ACL SETUSER
// builds a new one and swaps it in, so a Profile read from a User can be
// used without a lock for as long as the reader likes.
type Profile struct {
	flags     userFlag
	passwords []string   // SHA-256 hashes, lowercase hex, in order of addition, no duplicates
	selectors []selector // selectors[0] is the root selector: the rules outside parentheses
	line      string     // the rules as ACL LIST shows them, computed when the Profile is built
}

// newProfile returns a new user's profile, as Redis creates a user: off, no
// password, no command, no key, and all channels or none as
// acl-pubsub-default says (resetchannels in Redis 7.0).
func newProfile(allChannels bool) *Profile {
	return &Profile{flags: flagOff, selectors: []selector{newSelector(allChannels)}}
}

// defaultProfile returns the default user's profile as Redis creates it:
// on nopass ~* &* +@all (and neither sanitize-payload flag).
func defaultProfile() *Profile {
	p := newProfile(false)
	for _, op := range []string{"+@all", "~*", "&*", "on", "nopass"} {
		p.apply(op, false)
	}
	p.seal()
	return p
}

// clone returns a deep copy of p to apply rules to.
func (p *Profile) clone() *Profile {
	c := &Profile{flags: p.flags, passwords: slices.Clone(p.passwords)}
	c.selectors = make([]selector, len(p.selectors))
	for i := range p.selectors {
		c.selectors[i] = p.selectors[i].clone()
	}
	return c
}

// seal computes what a published Profile keeps precomputed.
func (p *Profile) seal() { p.line = p.describe() }

// root returns the root selector.
func (p *Profile) root() *selector { return &p.selectors[0] }

// apply applies one rule of ACL SETUSER (Redis's ACLSetUser) and returns
// the error Redis would set, or errNone. allChannels is acl-pubsub-default
// (for reset and new selectors). p is left half-changed on error: callers
// apply rules to a clone.
func (p *Profile) apply(op string, allChannels bool) ruleErr {
	if op == "" {
		return errNone // Redis ignores an empty rule
	}
	word := wire.CString(op)
	switch {
	case wire.EqualFold(word, "on"):
		p.flags = p.flags&^flagOff | flagOn
	case wire.EqualFold(word, "off"):
		p.flags = p.flags&^flagOn | flagOff
	case wire.EqualFold(word, "skip-sanitize-payload"):
		p.flags = p.flags&^flagSanitize | flagSkipSanitize
	case wire.EqualFold(word, "sanitize-payload"):
		p.flags = p.flags&^flagSkipSanitize | flagSanitize
	case wire.EqualFold(word, "nopass"):
		p.flags |= flagNoPass
		p.passwords = nil
	case wire.EqualFold(word, "resetpass"):
		p.flags &^= flagNoPass
		p.passwords = nil
	case op[0] == '>' || op[0] == '#':
		hash, err := ruleHash(op)
		if err != errNone {
			return err
		}
		if !slices.Contains(p.passwords, hash) {
			p.passwords = append(p.passwords, hash)
		}
		p.flags &^= flagNoPass
	case op[0] == '<' || op[0] == '!':
		hash, err := ruleHash(op)
		if err != errNone {
			return err
		}
		i := slices.Index(p.passwords, hash)
		if i < 0 {
			return errNoPassword
		}
		p.passwords = slices.Delete(p.passwords, i, i+1)
	case op[0] == '(' && op[len(op)-1] == ')':
		s := newSelector(allChannels)
		// Redis splits the inside as a configuration line; unbalanced
		// quotes give no rule at all, hence an empty selector.
		rules, _ := splitArgs(op[1 : len(op)-1])
		for _, r := range rules {
			if err := s.apply(r); err != errNone {
				return err
			}
		}
		p.selectors = append(p.selectors, s)
	case wire.EqualFold(word, "clearselectors"):
		p.selectors = p.selectors[:1]
	case wire.EqualFold(word, "reset"):
		for _, r := range []string{"resetpass", "resetkeys", "resetchannels"} {
			p.apply(r, allChannels)
		}
		if allChannels {
			p.apply("allchannels", allChannels)
		}
		for _, r := range []string{"off", "sanitize-payload", "clearselectors", "-@all"} {
			p.apply(r, allChannels)
		}
	default:
		return p.root().apply(op)
	}
	return errNone
}

// ruleHash returns the password hash a password rule names: the SHA-256 of
// what follows > or <, or the hash after # or !, checked.
func ruleHash(op string) (string, ruleErr) {
	if op[0] == '>' || op[0] == '<' {
		return hashPassword([]byte(op[1:])), errNone
	}
	h := op[1:]
	if len(h) != sha256.Size*2 {
		return "", errBadHash
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", errBadHash
		}
	}
	return h, errNone
}

// hashPassword returns the SHA-256 of pass in lowercase hex, as Redis
// stores passwords.
func hashPassword(pass []byte) string {
	sum := sha256.Sum256(pass)
	return hex.EncodeToString(sum[:])
}

// mergeSelectors joins the rules of a selector given over several
// arguments ("(+get" "~key)") into one, as Redis does before applying
// them: an argument that starts with '(' and does not end with ')' opens a
// selector (a new one restarts it), the following ones are appended after
// a space (up to any NUL, as Redis appends a C string) until one ends with
// ')'. open is the index of the argument that opened a selector left
// unclosed, or -1; then merged holds the arguments merged before it.
func mergeSelectors(args []string) (merged []string, open int) {
	open = -1
	var cur []byte
	for j, op := range args {
		if len(op) > 0 && op[0] == '(' && op[len(op)-1] != ')' {
			cur = append(cur[:0], op...)
			open = j
			continue
		}
		if open >= 0 {
			cur = append(append(cur, ' '), wire.CString(op)...)
			if len(op) > 0 && op[len(op)-1] == ')' {
				open = -1
				merged = append(merged, string(cur))
			}
			continue
		}
		merged = append(merged, op)
	}
	return merged, open
}

// Enabled reports whether the user is on: whether it can authenticate.
func (p *Profile) Enabled() bool { return p.flags&flagOn != 0 }

// NoPass reports whether any password authenticates the user (nopass);
// for the default user, whether connections start authenticated.
func (p *Profile) NoPass() bool { return p.flags&flagNoPass != 0 }

// Rules returns the user's rules as ACL LIST shows them after "user
// <name> ": flags, password hashes, root selector, then each selector in
// parentheses. Applied to a new user they give it the same permissions,
// except where Redis writes a rule it cannot read back, and so does this
// package: a first argument with white space ("+select|a b"), a key
// pattern * given as %RW~* (written ~*, read as allkeys), a quote or a
// closing parenthesis in a selector's pattern.
func (p *Profile) Rules() string { return p.line }

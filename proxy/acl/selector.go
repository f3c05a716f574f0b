package acl

import (
	"maps"
	"slices"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Key pattern permissions: %R~, %W~, and ~ (both).
const (
	permRead  uint8 = 1 << 0
	permWrite uint8 = 1 << 1
	permAll         = permRead | permWrite
)

// keyPattern is one key pattern of a selector.
type keyPattern struct {
	pattern string
	perm    uint8 // permRead, permWrite or permAll
}

// selector is one set of permissions of a user: the root one (the rules
// outside parentheses) or one of the user's selectors "(...)". A command
// runs when one selector allows the command, its keys and its channels.
//
// A selector is part of a Profile, immutable once the Profile is
// published; rules are applied to a clone.
type selector struct {
	allowed cmdSet
	// future is Redis's reserved command bit: +@all (allcommands) sets it
	// and -@all (nocommands) clears it, and nothing else touches it. It is
	// what makes ACL LIST start a description with +@all rather than
	// -@all, since for Redis the two differ for commands modules add later.
	future bool
	// firstArgs holds, by command id, the first arguments "+cmd|arg"
	// allows while the command itself is not allowed (for commands with no
	// subcommands: "+select|0"). Order of addition, no duplicates (ASCII
	// case-insensitively).
	firstArgs   map[int][]string
	allKeys     bool
	keys        []keyPattern
	allChannels bool
	channels    []string
}

// newSelector returns a selector with no permissions but, as Redis's
// acl-pubsub-default says, all channels or none.
func newSelector(allChannels bool) selector {
	return selector{allChannels: allChannels}
}

// clone returns a deep copy of s, for rules to be applied to.
func (s *selector) clone() selector {
	c := *s
	c.keys = slices.Clone(s.keys)
	c.channels = slices.Clone(s.channels)
	if s.firstArgs != nil {
		c.firstArgs = maps.Clone(s.firstArgs)
		for id, args := range c.firstArgs {
			c.firstArgs[id] = slices.Clone(args)
		}
	}
	return c
}

// setCommand allows or forbids command id and, for a container, every one
// of its subcommands; it drops the command's first-argument rules either
// way (Redis's ACLChangeSelectorPerm).
func (s *selector) setCommand(id int, allow bool) {
	s.allowed.set(id, allow)
	delete(s.firstArgs, id)
	for _, sub := range table.cmds[id].subs {
		s.allowed.set(sub, allow)
	}
}

// setCategory applies +@cat or -@cat: setCommand for every command and
// subcommand in the category (a container in it takes all its subcommands
// along, whatever their own categories).
func (s *selector) setCategory(bit uint32, allow bool) {
	table.each(func(c *command) {
		if c.cats&bit != 0 {
			s.setCommand(c.id, allow)
		}
	})
}

// setAll applies +@all (allow) or -@all.
func (s *selector) setAll(allow bool) {
	if allow {
		for i := range s.allowed {
			s.allowed[i] = ^uint64(0)
		}
	} else {
		s.allowed = cmdSet{}
	}
	s.future = allow
	s.firstArgs = nil
}

// addFirstArg allows command id with first argument arg.
func (s *selector) addFirstArg(id int, arg string) {
	for _, a := range s.firstArgs[id] {
		if wire.EqualFold(a, arg) {
			return
		}
	}
	if s.firstArgs == nil {
		s.firstArgs = map[int][]string{}
	}
	s.firstArgs[id] = append(s.firstArgs[id], arg)
}

// apply applies one selector rule (Redis's ACLSetSelector) and returns the
// error Redis would set, or errNone. s is left half-changed on error: the
// caller applies rules to a copy and drops it.
func (s *selector) apply(op string) ruleErr {
	word := wire.CString(op)
	switch {
	case op == "":
		return errSyntax
	case wire.EqualFold(word, "allkeys"), wire.EqualFold(word, "~*"):
		s.allKeys, s.keys = true, nil
	case wire.EqualFold(word, "resetkeys"):
		s.allKeys, s.keys = false, nil
	case wire.EqualFold(word, "allchannels"), wire.EqualFold(word, "&*"):
		s.allChannels, s.channels = true, nil
	case wire.EqualFold(word, "resetchannels"):
		s.allChannels, s.channels = false, nil
	case wire.EqualFold(word, "allcommands"), wire.EqualFold(word, "+@all"):
		s.setAll(true)
	case wire.EqualFold(word, "nocommands"), wire.EqualFold(word, "-@all"):
		s.setAll(false)
	case op[0] == '~' || op[0] == '%':
		return s.addKeyPattern(op)
	case op[0] == '&':
		if s.allChannels {
			return errChannelsAfterAll
		}
		if hasSpaceOrNUL(op[1:]) {
			return errSyntax
		}
		if !slices.Contains(s.channels, op[1:]) {
			s.channels = append(s.channels, op[1:])
		}
	case op[0] == '+' && at(op, 1) != '@':
		return s.allowCommand(word[1:])
	case op[0] == '-' && at(op, 1) != '@':
		id, ok := table.lookupName(word[1:])
		if !ok {
			return errUnknown
		}
		s.setCommand(id, false)
	case op[0] == '+' || op[0] == '-':
		bit := table.category(word[2:])
		if bit == 0 {
			return errUnknown
		}
		s.setCategory(bit, op[0] == '+')
	default:
		return errSyntax
	}
	return errNone
}

// addKeyPattern applies ~pattern, %R~pattern, %W~pattern or %RW~pattern
// (R and W in any order and case, each at most once; '~' may be missing,
// and then the pattern is empty).
func (s *selector) addKeyPattern(op string) ruleErr {
	if s.allKeys {
		return errKeysAfterAll
	}
	perm, rest := permAll, op[1:]
	if op[0] == '%' {
		perm = 0
	scan:
		for len(rest) > 0 {
			c := rest[0]
			rest = rest[1:]
			switch {
			case (c == 'R' || c == 'r') && perm&permRead == 0:
				perm |= permRead
			case (c == 'W' || c == 'w') && perm&permWrite == 0:
				perm |= permWrite
			case c == '~':
				break scan
			default:
				return errSyntax
			}
		}
		// redis-server 7.0.15 as shipped (CVE-2024-31227, CVE-2024-51741)
		// wants at least one of R and W.
		if perm == 0 {
			return errSyntax
		}
	}
	if hasSpaceOrNUL(rest) {
		return errSyntax
	}
	for i := range s.keys {
		if s.keys[i].pattern == rest {
			s.keys[i].perm |= perm
			return errNone
		}
	}
	s.keys = append(s.keys, keyPattern{pattern: rest, perm: perm})
	return errNone
}

// allowCommand applies +cmd, +cmd|sub or +cmd|firstarg (name is the rule
// without its '+', up to any NUL). The part after the last '|' is a
// subcommand for a command that has subcommands, and a first argument for
// one that has none.
func (s *selector) allowCommand(name string) ruleErr {
	i := strings.LastIndexByte(name, '|')
	if i < 0 {
		id, ok := table.lookupName(name)
		if !ok {
			return errUnknown
		}
		s.setCommand(id, true)
		return errNone
	}
	id, ok := table.lookupName(name[:i])
	switch {
	case !ok:
		return errUnknown
	case table.cmds[id].parent >= 0:
		return errSubFirstArg
	case i == len(name)-1:
		return errSyntax
	case table.cmds[id].subs != nil:
		sub, ok := table.lookupName(name)
		if !ok {
			return errUnknown
		}
		s.setCommand(sub, true)
	default:
		s.addFirstArg(id, name[i+1:])
	}
	return errNone
}

// at returns s[i], or 0 past its end (the NUL a C string ends with).
func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

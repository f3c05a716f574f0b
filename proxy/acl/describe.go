package acl

import (
	"math"
	"strings"
)

// describe returns the profile's rules as ACL LIST shows them: the flags,
// "#<hash>" per password, the root selector, then " (<selector>)" per
// other selector.
func (p *Profile) describe() string {
	var b strings.Builder
	for i, name := range userFlagNames {
		if p.flags&(1<<i) != 0 {
			b.WriteString(name)
			b.WriteByte(' ')
		}
	}
	for _, h := range p.passwords {
		b.WriteByte('#')
		b.WriteString(h)
		b.WriteByte(' ')
	}
	for i := range p.selectors {
		if i == 0 {
			b.WriteString(p.selectors[i].describe())
		} else {
			b.WriteString(" (")
			b.WriteString(p.selectors[i].describe())
			b.WriteByte(')')
		}
	}
	return b.String()
}

// describe returns a selector's rules: key patterns ("~*" for all keys),
// channel patterns ("&*" for all, else "resetchannels" and each pattern),
// then the command rules.
func (s *selector) describe() string {
	var b strings.Builder
	if s.allKeys {
		b.WriteString("~* ")
	} else {
		for _, k := range s.keys {
			b.WriteString(k.String())
			b.WriteByte(' ')
		}
	}
	if s.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range s.channels {
			b.WriteByte('&')
			b.WriteString(c)
			b.WriteByte(' ')
		}
	}
	b.WriteString(s.describeCommands())
	return b.String()
}

// String returns the pattern as a rule: ~p, %R~p or %W~p.
func (k keyPattern) String() string {
	switch k.perm {
	case permRead:
		return "%R~" + k.pattern
	case permWrite:
		return "%W~" + k.pattern
	}
	return "~" + k.pattern
}

// describeCommands returns the command rules that rebuild the selector's
// commands from nothing, as Redis 7.0 writes them (ACLDescribeSelector-
// CommandRules): "+@all" or "-@all" first (+@all when the selector's last
// +@all/-@all was +@all), then categories chosen greedily, then single
// commands and first arguments for what the categories leave different.
//
// The categories are those Redis picks, in the order it picks them. The
// single-command rules come in the table's order (commands by name, each
// followed by its subcommands, then its first arguments); Redis writes them
// in the order of its command dictionary, which depends on a hash seed
// drawn at startup, so that two Redis processes (or one restarted) list
// them in different orders. The set of rules is the same.
func (s *selector) describeCommands() string {
	var b strings.Builder
	additive := !s.future
	// fake is what the rules written so far give; temp is what remains to
	// be matched by categories (each category applied is taken out).
	var fake selector
	if additive {
		b.WriteString("-@all")
		fake.setAll(false)
	} else {
		b.WriteString("+@all")
		fake.setAll(true)
	}
	temp := selector{allowed: s.allowed}
	applied := make([]bool, len(table.categories))
	for {
		best, minDiff, maxSame := -1, math.MaxInt32, 0
		for j := range table.categories {
			if applied[j] {
				continue
			}
			on, off := countCategory(&temp.allowed, 1<<j)
			diff, same := off, on
			if !additive {
				diff, same = on, off
			}
			// A category is worth writing when it has more commands in
			// common with the selector than different; the best is the one
			// with the fewest differences, then the most in common.
			if same > diff && (diff < minDiff || diff == minDiff && same > maxSame) {
				best, minDiff, maxSame = j, diff, same
			}
		}
		if best < 0 {
			break
		}
		sign := "+@"
		if !additive {
			sign = "-@"
		}
		b.WriteString(" " + sign + table.categories[best])
		fake.setCategory(1<<best, additive)
		temp.setCategory(1<<best, !additive)
		applied[best] = true
	}
	for _, id := range table.order {
		s.describeCommand(&b, &fake, id)
		for _, sub := range table.cmds[id].subs {
			s.describeCommand(&b, &fake, sub)
		}
		if !s.allowed.has(id) {
			for _, arg := range s.firstArgs[id] {
				b.WriteString(" +" + table.cmds[id].name + "|" + arg)
			}
		}
	}
	return b.String()
}

// describeCommand writes +cmd or -cmd when the selector and fake differ on
// command id, and makes fake follow (a container's rule takes its
// subcommands along, as it does when applied).
func (s *selector) describeCommand(b *strings.Builder, fake *selector, id int) {
	want := s.allowed.has(id)
	if want == fake.allowed.has(id) {
		return
	}
	if want {
		b.WriteString(" +")
	} else {
		b.WriteString(" -")
	}
	b.WriteString(table.cmds[id].name)
	fake.setCommand(id, want)
}

// countCategory counts the commands and subcommands of a category that set
// has (on) and has not (off).
func countCategory(set *cmdSet, bit uint32) (on, off int) {
	for _, id := range table.byCategory[bitIndex(bit)] {
		if set.has(id) {
			on++
		} else {
			off++
		}
	}
	return on, off
}

// bitIndex returns the index of a category's single bit.
func bitIndex(bit uint32) int {
	for i := 0; i < 32; i++ {
		if bit == 1<<i {
			return i
		}
	}
	return -1
}

// getUser returns the profile as ACL GETUSER replies: a map of flags (a
// set), passwords, the root selector's commands, keys and channels, and
// the other selectors, each a map of the same three.
func (p *Profile) getUser() Value {
	flags := Value{Kind: KindSet}
	for i, name := range userFlagNames {
		if p.flags&(1<<i) != 0 {
			flags.Elems = append(flags.Elems, bulk(name))
		}
	}
	sels := Value{Kind: KindArray, Elems: []Value{}}
	for i := 1; i < len(p.selectors); i++ {
		sels.Elems = append(sels.Elems, Value{Kind: KindMap, Elems: p.selectors[i].getUserFields()})
	}
	fields := []Value{bulk("flags"), flags, bulk("passwords"), bulks(p.passwords)}
	fields = append(fields, p.root().getUserFields()...)
	fields = append(fields, bulk("selectors"), sels)
	return Value{Kind: KindMap, Elems: fields}
}

// getUserFields returns a selector's commands, keys and channels as ACL
// GETUSER shows them: keys and channels joined by spaces ("~*" and "&*"
// for all, "" for none).
func (s *selector) getUserFields() []Value {
	var keys, channels []string
	if s.allKeys {
		keys = []string{"~*"}
	}
	for _, k := range s.keys {
		keys = append(keys, k.String())
	}
	if s.allChannels {
		channels = []string{"&*"}
	}
	for _, c := range s.channels {
		channels = append(channels, "&"+c)
	}
	return []Value{
		bulk("commands"), bulk(s.describeCommands()),
		bulk("keys"), bulk(strings.Join(keys, " ")),
		bulk("channels"), bulk(strings.Join(channels, " ")),
	}
}

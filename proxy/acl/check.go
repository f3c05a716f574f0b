package acl

import (
	"fmt"
	"slices"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Reason is why the ACL refused something, as ACL LOG names it. Its values
// order the refusals as Redis does when it picks which to report for a
// user with several selectors: a channel over a key over a command.
type Reason uint8

// The reasons of a refusal (Redis's ACL_DENIED_*).
const (
	ReasonCommand Reason = 1 // the command (or subcommand) is not allowed
	ReasonKey     Reason = 2 // a key the command names is not allowed
	ReasonAuth    Reason = 3 // AUTH or HELLO failed (ACL LOG only)
	ReasonChannel Reason = 4 // a channel the command names is not allowed
)

// String returns the reason as ACL LOG shows it.
func (r Reason) String() string {
	switch r {
	case ReasonCommand:
		return "command"
	case ReasonKey:
		return "key"
	case ReasonAuth:
		return "auth"
	case ReasonChannel:
		return "channel"
	}
	return "unknown"
}

// Denied is a command the ACL refuses, and why.
type Denied struct {
	Reason  Reason // ReasonCommand, ReasonKey or ReasonChannel
	Command string // the command's full name: "get", "config|get"
	Pos     int    // ReasonKey, ReasonChannel: the refused argument's index in args
	// Object is what ACL LOG records: Command for ReasonCommand, the
	// refused key or channel otherwise.
	Object string
}

// Error returns the error reply Redis sends for the refusal (code
// included): "NOPERM this user has no permissions to run the 'get' command".
func (d *Denied) Error() string {
	switch d.Reason {
	case ReasonKey:
		return "NOPERM this user has no permissions to access one of the keys used as arguments"
	case ReasonChannel:
		return "NOPERM this user has no permissions to access one of the channels used as arguments"
	}
	return fmt.Sprintf("NOPERM this user has no permissions to run the '%s' command", d.Command)
}

// CanRun reports whether the profile allows the command cmd, by its
// command rules only (keys and channels are [Profile.Check]'s). For a
// command with subcommands, sub is the subcommand (argument 1), and
// rules on the subcommand decide; an unknown subcommand is not allowed,
// and with sub "" the container itself is checked. For a command without
// subcommands, sub is its first argument ("" for none), which a
// "+select|0"-style rule may allow. Commands Redis runs before
// authentication (AUTH, HELLO, QUIT, RESET) are always allowed; names that
// are no Redis 7.0 command never are. Case does not matter.
func (p *Profile) CanRun(cmd, sub string) bool {
	id, ok := table.lookupTop(cmd)
	if !ok {
		return false
	}
	if table.cmds[id].subs != nil && sub != "" {
		if id, ok = table.lookupSub(id, sub); !ok {
			return false
		}
		sub = ""
	}
	c := &table.cmds[id]
	for i := range p.selectors {
		if p.selectors[i].allowsCommand(c, sub, sub != "") {
			return true
		}
	}
	return false
}

// allowsCommand is the command part of a selector's check: the command's
// bit, or a first-argument rule matching arg (hasArg: the command has an
// argument 1).
func (s *selector) allowsCommand(c *command, arg string, hasArg bool) bool {
	if c.noAuth || s.allowed.has(c.id) {
		return true
	}
	if !hasArg {
		return false
	}
	arg = wire.CString(arg)
	for _, a := range s.firstArgs[c.id] {
		if wire.EqualFold(a, arg) {
			return true
		}
	}
	return false
}

// Check is Redis's permission check of a command about to run (args[0]
// is its name): the command, its keys and its channels must all be allowed
// by one selector. It returns nil when they are, else the refusal Redis
// would report (for several selectors, the most relevant one). args must
// name a command of Redis 7.0's table (the server answers an unknown
// command before asking): a name the table lacks is refused as a command.
func (p *Profile) Check(args [][]byte) *Denied {
	id, ok := table.lookupArgs(args)
	if !ok {
		name := ""
		if len(args) > 0 {
			name = wire.Lower(string(args[0]))
		}
		return &Denied{Reason: ReasonCommand, Command: name, Object: name}
	}
	return p.check(&table.cmds[id], args)
}

func (p *Profile) check(c *command, args [][]byte) *Denied {
	worst, worstPos, pos := ReasonCommand, 0, 0
	var keys []keyRef
	keysDone := false
	for i := range p.selectors {
		r, at := p.selectors[i].check(c, args, &keys, &keysDone)
		if r == 0 {
			return nil
		}
		// NB: Redis keeps the last refused position across selectors and
		// compares it even for a command refusal (which sets none).
		if r != ReasonCommand {
			pos = at
		}
		if r > worst || (r == worst && pos > worstPos) {
			worst, worstPos = r, pos
		}
	}
	d := &Denied{Reason: worst, Command: c.name, Object: c.name}
	if worst != ReasonCommand {
		d.Pos = worstPos
		d.Object = string(args[worstPos])
	}
	return d
}

// check is one selector's verdict on command c run as args: 0 when
// allowed, else the reason and the refused argument. The command's keys
// are found once for all selectors, in *keys.
func (s *selector) check(c *command, args [][]byte, keys *[]keyRef, keysDone *bool) (Reason, int) {
	arg := ""
	if len(args) >= 2 {
		arg = string(args[1])
	}
	if !s.allowsCommand(c, arg, len(args) >= 2) {
		return ReasonCommand, 0
	}
	if !s.allKeys && c.hasKeys() {
		if !*keysDone {
			*keys, *keysDone = c.keys(args), true
		}
		for _, k := range *keys {
			if !s.allowsKey(string(args[k.pos]), k.flags) {
				return ReasonKey, k.pos
			}
		}
	}
	if ch, ok := channelArgs[c.name]; ok && !s.allChannels && ch.flags&(chanPublish|chanSubscribe) != 0 {
		end := len(args)
		if ch.count > 0 {
			end = min(end, 1+ch.count)
		}
		for i := 1; i < end; i++ {
			if !s.allowsChannel(string(args[i]), ch.flags&chanPattern != 0) {
				return ReasonChannel, i
			}
		}
	}
	return 0, 0
}

// allowsKey reports whether one of the selector's patterns that grants the
// access flags asks for (read for access, write for insert, delete and
// update; any pattern when they ask for neither) matches key.
func (s *selector) allowsKey(key string, flags keyFlag) bool {
	if s.allKeys {
		return true
	}
	var want uint8
	if flags&keyAccess != 0 {
		want |= permRead
	}
	if flags&(keyInsert|keyDelete|keyUpdate) != 0 {
		want |= permWrite
	}
	for _, k := range s.keys {
		if k.perm&want == want && globMatch(k.pattern, key) {
			return true
		}
	}
	return false
}

// allowsChannel reports whether the selector allows a channel (matched by
// its patterns as globs) or, when isPattern, a PSUBSCRIBE pattern (which
// must equal one of its patterns: Redis 7.0 compares them as strings).
func (s *selector) allowsChannel(channel string, isPattern bool) bool {
	if s.allChannels {
		return true
	}
	if isPattern {
		return slices.Contains(s.channels, wire.CString(channel))
	}
	for _, p := range s.channels {
		if globMatch(p, channel) {
			return true
		}
	}
	return false
}

// CanSubscribe reports whether the profile allows the channel (SUBSCRIBE,
// SSUBSCRIBE, PUBLISH, SPUBLISH), by its channel rules only: the check the
// server repeats for a subscriber whose user changed.
func (p *Profile) CanSubscribe(channel string) bool {
	for i := range p.selectors {
		if p.selectors[i].allowsChannel(channel, false) {
			return true
		}
	}
	return false
}

// CanPSubscribe reports whether the profile allows the PSUBSCRIBE pattern,
// by its channel rules only: all channels, or a channel rule equal to the
// pattern.
func (p *Profile) CanPSubscribe(pattern string) bool {
	for i := range p.selectors {
		if p.selectors[i].allowsChannel(pattern, true) {
			return true
		}
	}
	return false
}

// ChannelsRevoked reports whether changing a user from prev to next may
// have taken channels away from its subscribers, with Redis's shortcuts:
// not when a selector of next allows all channels, nor when every channel
// rule of prev is still one of next's (and prev did not allow all). When
// it returns true, Redis disconnects each of the user's subscribers that
// has a channel next refuses ([Profile.CanSubscribe]) or a pattern it
// refuses ([Profile.CanPSubscribe]).
func ChannelsRevoked(prev, next *Profile) bool {
	var upcoming []string
	for i := range next.selectors {
		if next.selectors[i].allChannels {
			return false
		}
		upcoming = append(upcoming, next.selectors[i].channels...)
	}
	for i := range prev.selectors {
		s := &prev.selectors[i]
		if s.allChannels {
			return true
		}
		for _, c := range s.channels {
			if !slices.Contains(upcoming, c) {
				return true
			}
		}
	}
	return false
}

// Channel arguments of the Pub/Sub commands (Redis's commands_with_channels).
const (
	chanPattern   = 1 << 0
	chanSubscribe = 1 << 1
	chanUnsub     = 1 << 2
	chanPublish   = 1 << 3
)

// channelArgs says which arguments of a command are channels: from 1, count
// of them (0: all the rest).
var channelArgs = map[string]struct{ flags, count int }{
	"subscribe":    {chanSubscribe, 0},
	"ssubscribe":   {chanSubscribe, 0},
	"unsubscribe":  {chanUnsub, 0},
	"sunsubscribe": {chanUnsub, 0},
	"psubscribe":   {chanPattern | chanSubscribe, 0},
	"punsubscribe": {chanPattern | chanUnsub, 0},
	"publish":      {chanPublish, 1},
	"spublish":     {chanPublish, 1},
}

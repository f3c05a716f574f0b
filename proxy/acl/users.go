package acl

import (
	"crypto/subtle"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/wire"
)

// User is one user of the ACL, by identity: a client holds the *User it
// authenticated as for as long as it is connected, and reads the user's
// current [Profile] on every command.
//
// ACL SETUSER on an existing user swaps in a new Profile: the user's
// clients see it on their next command, as Redis re-checks a changed user.
// ACL DELUSER and ACL LOAD retire Users ([User.Deleted]); Redis disconnects
// their clients, and the server must do the same.
type User struct {
	name string
	// profile is the current Profile, never nil; written under Users.mu,
	// read without a lock.
	profile atomic.Pointer[Profile]
	// deleted is set once, under Users.mu, when the user is removed.
	deleted atomic.Bool
}

func newUser(name string, p *Profile) *User {
	u := &User{name: name}
	u.profile.Store(p)
	return u
}

// Name returns the user's name.
func (u *User) Name() string { return u.name }

// Profile returns the user's current profile: immutable, safe to keep and
// to read from any goroutine. Its pointer changes whenever the user does,
// so comparing it with one kept earlier tells whether the user changed.
func (u *User) Profile() *Profile { return u.profile.Load() }

// Deleted reports whether the user was removed (ACL DELUSER, or ACL LOAD,
// which replaces every user but default). A removed user allows nothing;
// the server disconnects its clients.
func (u *User) Deleted() bool { return u.deleted.Load() }

// CanRun reports whether the user may run the command cmd (see
// [Profile.CanRun]); a deleted user may run nothing.
func (u *User) CanRun(cmd, sub string) bool {
	return !u.Deleted() && u.Profile().CanRun(cmd, sub)
}

// Users is the set of ACL users, with the default user always in it. It is
// safe for concurrent use.
//
// Why this shape: the read that happens on every command is a client's own
// user's permissions, which is one atomic load of [User.Profile] and no
// lock at all, however many goroutines run commands. The map of names is
// read only by AUTH, HELLO and the ACL subcommands, so an RWMutex is
// plenty there; every change (SETUSER, DELUSER, LOAD, requirepass) takes
// it exclusively, builds new Profiles aside, and publishes them at the end,
// so that a change is all or nothing for every reader.
type Users struct {
	mu          sync.RWMutex
	byName      map[string]*User // guarded by mu; holds def
	def         *User            // the default user; never replaced, only its profile
	allChannels bool             // acl-pubsub-default is allchannels; guarded by mu
}

// NewUsers returns a set holding only the default user, as Redis creates
// it: on nopass ~* &* +@all. Its acl-pubsub-default is resetchannels,
// Redis 7.0's default ([Users.SetPubSubDefault]).
func NewUsers() *Users {
	def := newUser("default", defaultProfile())
	return &Users{byName: map[string]*User{"default": def}, def: def}
}

// Default returns the default user: every connection's user until AUTH.
func (s *Users) Default() *User { return s.def }

// Lookup returns the user named name, or nil.
func (s *Users) Lookup(name string) *User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byName[name]
}

// Authenticate checks a user name and password as AUTH and HELLO do. It
// returns the user when the user exists, is on, and either is nopass or
// has a password whose SHA-256 matches pass (compared in constant time).
// An unknown user, a user that is off and a wrong password all give
// (nil, false), after the same work.
func (s *Users) Authenticate(name string, pass []byte) (*User, bool) {
	hash := []byte(hashPassword(pass))
	u := s.Lookup(name)
	if u == nil {
		// Spend the time a user with one password would.
		subtle.ConstantTimeCompare(hash, hash)
		return nil, false
	}
	p := u.Profile()
	match := 0
	for _, h := range p.passwords {
		match |= subtle.ConstantTimeCompare(hash, []byte(h))
	}
	if !p.Enabled() || (match == 0 && !p.NoPass()) {
		return nil, false
	}
	return u, true
}

// SetPubSubDefault sets acl-pubsub-default: whether new users and new
// selectors, and users after "reset", start with all channels (allchannels)
// or none (resetchannels, Redis 7.0's default). Existing users keep theirs.
func (s *Users) SetPubSubDefault(allChannels bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allChannels = allChannels
}

// SetDefaultPassword expresses requirepass on the default user, as Redis
// does: its passwords are reset, then pass is its only password, or, when
// pass is "", it becomes nopass. Its other rules stay.
func (s *Users) SetDefaultPassword(pass string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.def.Profile().clone()
	p.apply("resetpass", s.allChannels)
	if pass == "" {
		p.apply("nopass", s.allChannels)
	} else {
		p.apply(">"+pass, s.allChannels)
	}
	p.seal()
	s.def.profile.Store(p)
}

// SetUser is ACL SETUSER name rules...: it creates the user or changes it,
// applying the rules in order to a copy, and publishes the copy only if
// every rule is valid; otherwise nothing changes and the error is Redis's.
// prev is the user's profile before the change, nil for a new user: the
// server compares its channels with the new ones ([ChannelsRevoked]) to
// disconnect the user's subscribers that lost theirs, as Redis does.
func (s *Users) SetUser(name string, rules [][]byte) (u *User, prev *Profile, err error) {
	if hasSpaceOrNUL(name) {
		return nil, nil, newError("Usernames can't contain spaces or null characters")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	args := make([]string, len(rules))
	for i, r := range rules {
		args[i] = string(r)
	}
	merged, open := mergeSelectors(args)
	if open >= 0 {
		return nil, nil, newError(fmt.Sprintf("Unmatched parenthesis in acl selector starting at '%s'.", wire.CString(args[open])))
	}
	u = s.byName[name]
	base := newProfile(s.allChannels)
	if u != nil {
		base = u.Profile()
	}
	p := base.clone()
	for _, r := range merged {
		if e := p.apply(r, s.allChannels); e != errNone {
			return nil, nil, newError(fmt.Sprintf("Error in ACL SETUSER modifier '%s': %s", wire.CString(r), e.text()))
		}
	}
	p.seal()
	if u == nil {
		u = newUser(name, p)
		s.byName[name] = u
		return u, nil, nil
	}
	u.profile.Store(p)
	return u, base, nil
}

// DelUser is ACL DELUSER names...: it removes the users that exist and
// returns them (ACL DELUSER replies their count). Naming default refuses
// the whole command, as Redis does. The server disconnects the clients of
// the removed users.
func (s *Users) DelUser(names []string) ([]*User, error) {
	for _, name := range names {
		if wire.CString(name) == "default" {
			return nil, newError("The 'default' user cannot be removed")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var deleted []*User
	for _, name := range names {
		if u := s.byName[name]; u != nil {
			delete(s.byName, name)
			u.deleted.Store(true)
			deleted = append(deleted, u)
		}
	}
	return deleted, nil
}

// GetUser is ACL GETUSER name: the user described as a map (flags,
// passwords, commands, keys, channels, selectors), or null when there is
// no such user.
func (s *Users) GetUser(name string) Value {
	u := s.Lookup(name)
	if u == nil {
		return null
	}
	return u.Profile().getUser()
}

// List is ACL LIST: one line per user, sorted by name, "user <name>
// <rules>", the lines ACL SAVE writes.
func (s *Users) List() []string {
	users := s.sorted()
	lines := make([]string, len(users))
	for i, u := range users {
		lines[i] = "user " + u.name + " " + u.Profile().Rules()
	}
	return lines
}

// Names is ACL USERS: the users' names, sorted.
func (s *Users) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.byName))
}

// sorted returns the users sorted by name (byte order, as Redis's radix
// tree keeps them).
func (s *Users) sorted() []*User {
	s.mu.RLock()
	defer s.mu.RUnlock()
	users := slices.Collect(maps.Values(s.byName))
	slices.SortFunc(users, func(a, b *User) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return users
}

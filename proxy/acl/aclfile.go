package acl

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Load replaces every user with those of an aclfile's text, as ACL LOAD
// (and the start with an aclfile) does: all or nothing. filename is the
// aclfile directive, which Redis's error messages name.
//
// The format is Redis's: one "user <name> <rule> ..." per line, arguments
// separated by single spaces (no quoting), blank lines allowed, anything
// else an error (a comment too: ACL SAVE would lose it). Every line is
// checked and every error reported, in one message of Redis's texts with
// line numbers, ending "WARNING: ACL errors detected, no change to the
// previously active ACL rules was performed"; then nothing changes.
//
// On success every user but default is replaced by a new [User] (the old
// ones are [User.Deleted]: the server disconnects their clients, as Redis
// does, even for a user the file defines again); the default user keeps
// its identity and takes the file's rules for it, or Redis's defaults (on
// nopass ~* &* +@all) when the file has none.
func (s *Users) Load(filename string, text []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	profiles, order, errs := parseACLFile(filename, readLikeFgets(text), s.allChannels)
	if errs != "" {
		return newError(errs + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
	}
	def := profiles["default"]
	if def == nil {
		def = defaultProfile()
	}
	for name, u := range s.byName {
		if u != s.def {
			u.deleted.Store(true)
			delete(s.byName, name)
		}
	}
	s.def.profile.Store(def)
	for _, name := range order {
		if name != "default" {
			s.byName[name] = newUser(name, profiles[name])
		}
	}
	return nil
}

// parseACLFile parses an aclfile's text into profiles (sealed), in the
// order of their lines, and Redis's error text for every line in error
// ("" for none).
func parseACLFile(filename, text string, allChannels bool) (map[string]*Profile, []string, string) {
	profiles := map[string]*Profile{}
	var order []string
	var errs strings.Builder
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = trimSet(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Split(line, " ")
		switch {
		case argv[0] != "user" || len(argv) < 2:
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", filename, n)
			continue
		case hasSpaceOrNUL(argv[1]):
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", filename, n, argv[1])
			continue
		case profiles[argv[1]] != nil:
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", argv[1], n)
			continue
		}
		p := newProfile(allChannels)
		profiles[argv[1]], order = p, append(order, argv[1])
		rules, open := mergeSelectors(argv[2:])
		if open >= 0 {
			// NB: with rules before the unmatched parenthesis,
			// redis-server 7.0.15 crashes here (it reads the rules it
			// has just freed); the file is refused all the same.
			fmt.Fprintf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", filename, n)
			rules = nil
		}
		reported := false
		for _, r := range rules {
			r = trimSet(r, "\t\r\n")
			switch e := p.apply(r, allChannels); {
			case e == errUnknown:
				// Unknown commands are each named: they are no secret.
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", filename, n, r, e.text())
			case e != errNone && !reported:
				// Other errors could leak a password: only the first is
				// told, without the rule.
				fmt.Fprintf(&errs, "%s:%d: %s. ", filename, n, e.text())
				reported = true
			}
		}
		p.seal()
	}
	return profiles, order, errs.String()
}

// readLikeFgets returns what Redis keeps of an aclfile's bytes: it reads
// the file with fgets into 1024-byte buffers and appends each buffer as a
// C string, so a NUL byte drops the rest of its line, up to 1023 bytes.
func readLikeFgets(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		n := min(len(b), 1023)
		if i := bytes.IndexByte(b[:n], '\n'); i >= 0 {
			n = i + 1
		}
		chunk := b[:n]
		if i := bytes.IndexByte(chunk, 0); i >= 0 {
			chunk = chunk[:i]
		}
		out.Write(chunk)
		b = b[n:]
	}
	return out.String()
}

// Save returns the aclfile text ACL SAVE writes: the ACL LIST lines, each
// ended by a newline. [Users.Load] of it gives the same users.
func (s *Users) Save() []byte {
	var b bytes.Buffer
	for _, line := range s.List() {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ConfigUsers collects the "user" directives of the main configuration
// file, checked as Redis checks them while it reads the file, to be
// applied once the file is read ([Users.ApplyConfig]). The zero value is
// empty and ready.
type ConfigUsers struct {
	// AllChannels is acl-pubsub-default as the configuration read so far
	// sets it (true for allchannels). Redis checks each user line against
	// the value in force when it reads the line: under allchannels, a
	// user line with a channel rule and no resetchannels before it is an
	// error. The configuration loader keeps it up to date.
	AllChannels bool
	users       [][]string // each: name, then its rules with selectors merged
}

// Len returns how many users were added.
func (c *ConfigUsers) Len() int { return len(c.users) }

// Add checks one "user" directive, args as the configuration line splits
// (args[0] is "user", args[1] the name, then the rules), and keeps it. The
// error is Redis's "Error in user declaration '<arg>': <why>", for the
// configuration loader to report with the line, as Redis does; an unknown
// command or category is not reported here but by ApplyConfig, as Redis
// defers it.
//
// NB: Redis names the wrong argument in these errors (the argument at the
// rule's index counted from "user", not the rule), and after an unmatched
// parenthesis it reports whatever errno was left behind; this is kept, as
// redis-server 7.0.15 prints it.
func (c *ConfigUsers) Add(args []string) error {
	declErr := func(arg string, e ruleErr) error {
		return newError(fmt.Sprintf("Error in user declaration '%s': %s", wire.CString(arg), e.text()))
	}
	if len(args) < 2 || !wire.EqualFold(wire.CString(args[0]), "user") {
		return declErr(strings.Join(args[:min(len(args), 1)], ""), errNone)
	}
	for _, u := range c.users {
		if u[0] == args[1] {
			return declErr(args[1], errDuplicateUser)
		}
	}
	rules, open := mergeSelectors(args[2:])
	if open >= 0 {
		return declErr(args[open], errUnknown)
	}
	p := newProfile(c.AllChannels)
	for j, r := range rules {
		if e := p.apply(r, c.AllChannels); e != errNone && e != errUnknown {
			return declErr(args[j], e)
		}
	}
	c.users = append(c.users, append([]string{args[1]}, rules...))
	return nil
}

// ApplyConfig creates the users c collected, as Redis does once its
// configuration is read: a user defined for default resets it first. It
// is all or nothing here (Redis exits on the error). notices are Redis's
// log lines for users left off. Redis creates them under the final
// acl-pubsub-default: set it ([Users.SetPubSubDefault]) before.
func (s *Users) ApplyConfig(c *ConfigUsers) (notices []string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	built := make([]*Profile, len(c.users))
	for i, u := range c.users {
		name := u[0]
		if hasSpaceOrNUL(name) {
			return nil, newError("Spaces not allowed in ACL usernames")
		}
		p := newProfile(s.allChannels)
		if name == "default" {
			p = s.def.Profile().clone()
			p.apply("reset", s.allChannels)
		}
		for _, r := range u[1:] {
			if e := p.apply(r, s.allChannels); e != errNone {
				return nil, newError(fmt.Sprintf("Error loading ACL rule '%s' for the user named '%s': %s", wire.CString(r), wire.CString(name), e.text()))
			}
		}
		if !p.Enabled() {
			notices = append(notices, fmt.Sprintf("The user '%s' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.", wire.CString(name)))
		}
		p.seal()
		built[i] = p
	}
	for i, u := range c.users {
		if existing := s.byName[u[0]]; existing != nil {
			existing.profile.Store(built[i])
		} else {
			s.byName[u[0]] = newUser(u[0], built[i])
		}
	}
	return notices, nil
}

package proxy

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/acl"
	"github.com/replproxy/replproxy/proxy/clientlist"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The server's side of the ACL users (package acl holds their rules): who
// each client runs as, the check before every command, the ACL LOG, and
// the clients a change of users disconnects. Every client starts as the
// default user, authenticated when that user is on and needs no password
// (requirepass unset), as in Redis; AUTH and HELLO's AUTH make it another.

// newUsers builds the users the configuration declares: the default user's
// password (requirepass), then the user lines or the aclfile (never both:
// config.Validate refuses that). A rule Redis would refuse fails the start.
func newUsers(cfg *config.Config, log func(msg string)) (*acl.Users, error) {
	users := acl.NewUsers()
	users.SetDefaultPassword(cfg.RequirePass)
	switch {
	case len(cfg.Users) > 0:
		var cu acl.ConfigUsers
		for _, line := range cfg.Users {
			if err := cu.Add(append([]string{"user"}, line...)); err != nil {
				return nil, fmt.Errorf("user %q: %w", line[0], err)
			}
		}
		notices, err := users.ApplyConfig(&cu)
		for _, n := range notices {
			log(n)
		}
		if err != nil {
			return nil, fmt.Errorf("user lines: %w", err)
		}
	case cfg.ACLFile != "":
		data, err := os.ReadFile(cfg.ACLFile)
		if err != nil {
			return nil, fmt.Errorf("aclfile: %w", err)
		}
		if err := users.Load(cfg.ACLFile, data); err != nil {
			return nil, fmt.Errorf("aclfile: %w", err)
		}
	}
	return users, nil
}

// userOf is the user c runs as. Any goroutine.
func (c *client) userOf() *acl.User { return c.user.Load() }

// authRequired reports whether c must authenticate before a command that
// needs it: it has not, and the default user is off or has a password
// (Redis's authRequired). A client counts as authenticated when it
// connected (or RESET) while the default user was open, as in Redis.
func (s *Server) authRequired(c *client) bool {
	return !c.authed && !s.defaultOpen()
}

// permitted checks args, the command r, against c's user's rules; a
// refusal is answered with Redis's NOPERM reply, counted and put in the
// ACL LOG.
//
// Only a command of Redis 7.0's table is the ACL's to judge, as in Redis,
// where an unknown name never reaches the ACL (dispatch answers it before).
// A subcommand the proxy serves beyond Redis 7.0 (CLIENT SETINFO, as Redis
// 7.2 has it) is allowed to users that may run every subcommand of its
// container, and refused to any other; so is, should one ever get here, a
// name the ACL's table does not know: nothing unknown runs unchecked.
func (s *Server) permitted(c *client, args [][]byte, r resolved) bool {
	u := c.userOf()
	p := u.Profile()
	var d *acl.Denied
	switch {
	case !r.beyondRedis70:
		// Check refuses a name its table lacks.
		d = p.Check(args)
	case !p.ContainerAllowed(*r.cmd.name):
		d = &acl.Denied{Reason: acl.ReasonCommand, Command: *r.full, Object: *r.full}
	}
	if d == nil {
		return true
	}
	switch d.Reason {
	case acl.ReasonKey:
		s.stats.ACLDeniedKey.Add(1)
	case acl.ReasonChannel:
		s.stats.ACLDeniedChannel.Add(1)
	default:
		s.stats.ACLDeniedCmd.Add(1)
	}
	s.aclLog.Add(acl.Event{Reason: d.Reason, Context: acl.ContextToplevel, Object: d.Object,
		Username: u.Name(), ClientInfo: s.clientInfoLine(c)}, time.Now())
	c.out = wire.AppendError(c.out, d.Error())
	return false
}

// clientInfoLine is c's CLIENT LIST line without its newline, as ACL LOG's
// client-info shows it.
func (s *Server) clientInfoLine(c *client) string {
	var b strings.Builder
	clientlist.Append(&b, c.listed(time.Now()))
	return strings.TrimSuffix(b.String(), "\n")
}

// authenticate checks user and pass, for AUTH and HELLO's AUTH option (cmd
// is the command's name as the client sent it): on a match the client runs
// as that user from now on (and its reader leaves the pre-AUTH limits
// before the next command); otherwise the failure is counted, logged and
// put in the ACL LOG under the command's name as sent, as Redis names it,
// and the WRONGPASS reply appended. An unknown user, an off one and a
// wrong password fail alike, as in Redis.
func (s *Server) authenticate(c *client, cmd []byte, user string, pass []byte) bool {
	u, ok := s.users.Authenticate(user, pass)
	if !ok {
		s.authFailed(c)
		s.aclLog.Add(acl.Event{Reason: acl.ReasonAuth, Context: acl.ContextToplevel, Object: string(cmd),
			Username: user, ClientInfo: s.clientInfoLine(c)}, time.Now())
		c.out = wire.AppendError(c.out, "WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	c.user.Store(u)
	c.authed = true
	return true
}

// disconnectUsers closes the clients running as a user that no longer
// exists (ACL DELUSER, ACL LOAD), as Redis frees them, replicas included:
// the connection that asked is closed after its reply (quit).
func (s *Server) disconnectUsers(self *client) (quit bool) {
	for _, o := range s.clients.clients() {
		if !o.userOf().Deleted() {
			continue
		}
		quit = quit || s.closeClient(self, o, downstream.CloseKilled)
	}
	return quit
}

// disconnectRevokedSubscribers closes u's subscribers subscribed to a
// channel u's new rules refuse (ACL SETUSER), as Redis does.
func (s *Server) disconnectRevokedSubscribers(self *client, u *acl.User) (quit bool) {
	p := u.Profile()
	for _, o := range s.pubsub.Refused(func(o *client) bool { return o.userOf() == u }, p.CanSubscribe) {
		quit = quit || s.closeClient(self, o, downstream.CloseKilled)
	}
	return quit
}

// closeClient closes o for reason, or, when o is self, reports that it
// closes once its reply is written.
func (s *Server) closeClient(self, o *client, reason downstream.CloseReason) (quit bool) {
	switch r := o.asReplica.Load(); {
	case o == self:
		downstream.FirstReason(&self.reason, reason)
		return true
	case r != nil:
		r.Close(reason, nil)
	default:
		o.closeFor(reason)
	}
	return false
}

// errNoACLFile refuses ACL LOAD and SAVE without an aclfile.
var errNoACLFile = errors.New(acl.ErrNoACLFile)

// defaultOpen reports whether the default user is on and needs no
// password: clients need not authenticate, and protected mode applies.
func (s *Server) defaultOpen() bool {
	d := s.users.Default().Profile()
	return d.Enabled() && d.NoPass()
}

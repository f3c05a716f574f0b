package proxy

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/replproxy/replproxy/proxy/acl"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/report"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The server's side of the ACL users (package acl holds their rules): who
// each client runs as, the check before every command, the ACL LOG, and
// the clients a change of users disconnects. Every client starts as the
// default user, authenticated when that user is on and needs no password
// (requirepass unset), as in Redis; AUTH and HELLO's AUTH make it another.

// access is the server's side of the ACL users: the users and the ACL LOG
// (both safe for concurrent use), the rate-limited log of failed AUTHs,
// and the acl_access_denied_ counters it adds to. Made by New; any
// client's goroutine calls it.
type access struct {
	users   *acl.Users
	aclLog  *acl.Log
	authLog logLimiter // failed AUTH
	stats   *report.Stats
}

// newAccess builds the users the configuration declares (newUsers) and
// the ACL LOG; warn is told of each user left off.
func newAccess(cfg *config.Config, stats *report.Stats, warn func(msg string)) (*access, error) {
	users, err := newUsers(cfg, warn)
	if err != nil {
		return nil, err
	}
	return &access{users: users, aclLog: acl.NewLog(int(min(cfg.ACLLogMaxLen, 1<<31-1))), stats: stats}, nil
}

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

// authRequired reports whether c must authenticate before a command that
// needs it: it has not, and the default user is off or has a password
// (Redis's authRequired). A client counts as authenticated when it
// connected (or RESET) while the default user was open, as in Redis.
func (a *access) authRequired(c *client) bool {
	return !c.authed && !a.defaultOpen()
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
func (a *access) permitted(c *client, args [][]byte, r resolved) bool {
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
		a.stats.ACLDeniedKey.Add(1)
	case acl.ReasonChannel:
		a.stats.ACLDeniedChannel.Add(1)
	default:
		a.stats.ACLDeniedCmd.Add(1)
	}
	a.aclLog.Add(acl.Event{Reason: d.Reason, Context: acl.ContextToplevel, Object: d.Object,
		Username: u.Name(), ClientInfo: c.infoLine()}, time.Now())
	c.out = wire.AppendError(c.out, d.Error())
	return false
}

// authenticate checks user and pass, for AUTH and HELLO's AUTH option (cmd
// is the command's name as the client sent it): on a match the client runs
// as that user from now on (and its reader leaves the pre-AUTH limits
// before the next command); otherwise the failure is counted, logged and
// put in the ACL LOG under the command's name as sent, as Redis names it,
// and the WRONGPASS reply appended. An unknown user, an off one and a
// wrong password fail alike, as in Redis.
func (a *access) authenticate(c *client, cmd []byte, user string, pass []byte) bool {
	u, ok := a.users.Authenticate(user, pass)
	if !ok {
		a.authFailed(c)
		a.aclLog.Add(acl.Event{Reason: acl.ReasonAuth, Context: acl.ContextToplevel, Object: string(cmd),
			Username: user, ClientInfo: c.infoLine()}, time.Now())
		c.out = wire.AppendError(c.out, "WRONGPASS invalid username-password pair or user is disabled.")
		return false
	}
	c.user.Store(u)
	c.authed = true
	return true
}

// errNoACLFile refuses ACL LOAD and SAVE without an aclfile.
var errNoACLFile = errors.New(acl.ErrNoACLFile)

// defaultOpen reports whether the default user is on and needs no
// password: clients need not authenticate, and protected mode applies.
func (a *access) defaultOpen() bool {
	d := a.users.Default().Profile()
	return d.Enabled() && d.NoPass()
}

// authFailed counts a refused AUTH (acl_access_denied_auth, as Redis 7 does)
// and logs it at most once per logEvery: a stranger may send thousands of
// them in one pipeline.
func (a *access) authFailed(c *client) {
	a.stats.ACLDeniedAuth.Add(1)
	if ok, n := a.authLog.allow(time.Now(), logEvery); ok {
		c.log.Warn("authentication failed", "suppressed", n)
	}
}

package proxy

import (
	"fmt"

	"github.com/replproxy/replproxy/proxy/wire"
)

// dispatch runs one command and appends its reply to c.out. Its checks run
// in redis-server 7.0's order (processCommand): the command's existence
// (an unknown subcommand is answered here, before authentication and the
// ACL, as in Redis, and never reaches a handler), its arity, then
// authentication, then the ACL.
func (s *Server) dispatch(c *client, args [][]byte) (quit bool) {
	r, ok := s.commands.resolve(args)
	// CLIENT LIST shows cmd=NULL after an unknown command, as Redis does:
	// only names from the tables, never bytes a client chose, reach its
	// lines.
	c.lastCmd.Store(r.full)
	switch {
	case !ok && r.cmd.run != nil:
		unknownSub(c, args)
		return false
	case !ok:
		c.out = wire.AppendError(c.out, fmt.Sprintf(
			"ERR replproxy relays replication only; '%s' is not served here (send it to the primary)", clip(wire.Lower(string(args[0])), 128)))
		return false
	}
	if (r.arity > 0 && len(args) != r.arity) || (r.arity < 0 && len(args) < -r.arity) {
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR wrong number of arguments for '%s' command", *r.full))
		return false
	}
	if !r.cmd.noAuth && s.access.authRequired(c) {
		c.out = wire.AppendError(c.out, "NOAUTH Authentication required.")
		return false
	}
	if !s.access.permitted(c, args, r) {
		return false
	}
	name := *r.cmd.name
	if len(c.subs) > 0 && c.proto() == wire.RESP2 {
		// A subscribed RESP2 client (commands_sentinel.go); in RESP3 a
		// subscriber runs any command, and PING answers +PONG, as in Redis.
		switch {
		case !subscribedOnly[name]:
			c.out = wire.AppendError(c.out, subscribedRefusal(*r.full))
			return false
		case name == "ping":
			cmdPingSubscribed(c, args)
			return false
		}
	}
	if r.unserved {
		unknownSub(c, args)
		return false
	}
	if c.box != nil && (name == "psync" || name == "sync") {
		// Its replies go through the outbox; a replica's through its writer.
		c.out = wire.AppendError(c.out, "ERR replproxy serves no replica on a connection that subscribed to a channel")
		return false
	}
	return r.cmd.run(c, args)
}

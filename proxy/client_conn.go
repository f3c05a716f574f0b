package proxy

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/clientlist"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// flushThreshold is how much reply a pipelined batch may gather before it is
// written even though more commands are buffered.
const flushThreshold = 64 << 10

// serveClient reads and runs commands until the client leaves, breaks the
// protocol, or the server stops; a client that becomes a replica is then
// served as one. An admin client's close is counted and logged here, once.
func (s *Server) serveClient(ctx context.Context, c *client) {
	reason, err := s.runClient(ctx, c)
	s.stopOutbox(c)
	c.conn.Close()
	c.hs.EndCompression(&s.linkSlots) // its replica, if any, has ended
	s.clients.remove(c)
	if c.replicaSet() {
		return // runReplica counted and logged its close
	}
	downstream.FirstReason(&c.reason, reason)
	reason = downstream.CloseReason(c.reason.Load())
	s.stats.ClientCloses.Add(reason)
	switch reason {
	case downstream.CloseQueryBufferLimit, downstream.CloseOutputHardLimit, downstream.CloseOutputSoftLimit:
		// Logged where they were found, with their figures and a rate limit.
	default:
		// Verbose, not a warning: any stranger can cause any of these. No
		// "error" key without one: it is always a string in the logs.
		if err != nil {
			c.log.Debug("client closed", "reason", reason.String(), "error", err)
		} else {
			c.log.Debug("client closed", "reason", reason.String())
		}
	}
}

// runClient is serveClient's loop. It returns why it ended, and the error
// that ended it, if any.
func (s *Server) runClient(ctx context.Context, c *client) (downstream.CloseReason, error) {
	for ctx.Err() == nil {
		cc := s.clientConf()
		c.syncLimits(cc, s.access.authRequired(c))
		cmd, err := c.rd.ReadCommand()
		if err != nil {
			var pe *wire.ProtocolError
			switch {
			case errors.As(err, &pe):
				c.out = wire.AppendError(c.out, "ERR "+pe.Msg)
				c.flush()
			case errors.Is(err, wire.ErrQueryLimit):
				s.stats.QueryLimitDisconnects.Add(1)
				if ok, n := s.protect.limitLog.allow(time.Now(), logEvery); ok {
					c.log.Warn("client closed: its command reached client-query-buffer-limit",
						"limit-bytes", cc.limits.MaxQuery, "suppressed", n)
				}
			}
			return downstream.ReadCloseReason(err), err
		}
		if len(cmd.Args) == 0 {
			continue
		}
		s.stats.CommandsProcessed.Add(1)
		c.lastUse.Store(time.Now().UnixNano())
		quit := s.dispatch(c, cmd.Args)
		if !c.replicaSet() && c.box == nil && c.overHardLimit(cc.output) {
			c.closedByOutputLimit(downstream.CloseOutputHardLimit)
			return downstream.CloseOutputHardLimit, nil
		}
		if quit || c.replicaSet() || c.rd.Buffered() == 0 || len(c.out) >= flushThreshold {
			if err := c.flush(); err != nil {
				return downstream.CloseWriteError, err
			}
		}
		if quit {
			return downstream.CloseQuit, nil
		}
		if c.replicaSet() {
			s.runReplica(ctx, c)
			return downstream.CloseNone, nil
		}
	}
	return downstream.CloseServerShutdown, nil
}

// cmdClient is CLIENT ID, GETNAME, SETNAME, LIST, INFO, SETINFO, KILL and
// HELP; dispatch has checked the subcommand and its arity.
func (s *Server) cmdClient(c *client, args [][]byte) bool {
	switch wire.Lower(string(args[1])) {
	case "id":
		c.out = wire.AppendInt(c.out, c.id)
	case "getname":
		if n := c.name.Load(); n != nil && *n != "" {
			c.out = wire.AppendBulkString(c.out, *n)
		} else {
			c.out = c.proto().AppendNull(c.out)
		}
	case "setname":
		name := string(args[2])
		if !validName(name) {
			c.out = wire.AppendError(c.out, "ERR Client names cannot contain spaces, newlines or special characters.")
			break
		}
		c.name.Store(&name)
		c.out = wire.AppendSimple(c.out, "OK")
	case "list":
		s.clientList(c, args[2:])
	case "info":
		s.clientInfo(c)
	case "setinfo":
		s.clientSetInfo(c, string(args[2]), string(args[3]))
	case "kill":
		return s.clientKill(c, args[2:])
	case "help":
		c.out = appendHelp(c.out, "client")
	default:
		unknownSub(c, args)
	}
	return false
}

// clientList is CLIENT LIST [TYPE type | ID id ...], as Redis 7.0 reads its
// options: the clients of a type, or those of the ids given, in their
// order, with Redis's field names.
func (s *Server) clientList(c *client, opts [][]byte) {
	now := time.Now()
	var b strings.Builder
	switch {
	case len(opts) == 0:
		for _, o := range s.clients.clients() {
			clientlist.Append(&b, o.listed(now))
		}
	case len(opts) == 2 && wire.EqualFold(opts[0], "type"):
		f := clientlist.KillFilter{}
		if reply := f.Parse(opts); reply != "" {
			c.out = wire.AppendError(c.out, reply)
			return
		}
		for _, o := range s.clients.clients() {
			if l := o.listed(now); f.Matches(l, false) {
				clientlist.Append(&b, l)
			}
		}
	case len(opts) >= 2 && wire.EqualFold(opts[0], "id"):
		byID := map[int64]*client{}
		for _, o := range s.clients.clients() {
			byID[o.id] = o
		}
		for _, a := range opts[1:] {
			id, ok := wire.ParseInt(a)
			if !ok {
				c.out = wire.AppendError(c.out, "ERR Invalid client ID")
				return
			}
			if o := byID[id]; o != nil {
				clientlist.Append(&b, o.listed(now))
			}
		}
	default:
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return
	}
	c.out = c.proto().AppendVerbatim(c.out, "txt", b.String())
}

// clientKill is CLIENT KILL <addr> (old form) or CLIENT KILL with ID, ADDR,
// LADDR, TYPE (normal|replica|slave|master|pubsub), USER and SKIPME
// filters, parsed in order as Redis 7.0 parses them: the first bad option
// is the reply; USER names an ACL user, and matches the clients running as
// it (the default user's until they authenticate). A client that kills itself (SKIPME no, or the old form naming its
// own address) gets its reply, and its connection is closed after it.
func (s *Server) clientKill(c *client, args [][]byte) (quit bool) {
	oldForm := len(args) == 1
	f := clientlist.KillFilter{SkipMe: true, Known: func(u string) bool { return s.access.users.Lookup(u) != nil }}
	if oldForm {
		f.Addr, f.ByAddr, f.SkipMe = string(args[0]), true, false
	} else if reply := f.Parse(args); reply != "" {
		c.out = wire.AppendError(c.out, reply)
		return false
	}
	var victims []*client
	now := time.Now()
	for _, o := range s.clients.clients() {
		if f.Matches(o.listed(now), o == c) {
			victims = append(victims, o)
		}
	}
	for _, o := range victims {
		switch r := o.asReplica.Load(); {
		case o == c:
			// Closed once its reply is written: runClient ends on quit.
			downstream.FirstReason(&c.reason, downstream.CloseKilled)
			quit = true
		case r != nil:
			r.Close(downstream.CloseKilled, nil)
		default:
			o.closeFor(downstream.CloseKilled)
		}
	}
	if oldForm {
		if len(victims) == 0 {
			c.out = wire.AppendError(c.out, "ERR No such client")
		} else {
			c.out = wire.AppendSimple(c.out, "OK")
		}
		return quit
	}
	c.out = wire.AppendInt(c.out, int64(len(victims)))
	return quit
}

package proxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/replproxy/replproxy/proxy/clientlist"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// flushThreshold is how much reply a pipelined batch may gather before it is
// written even though more commands are buffered.
const flushThreshold = 64 << 10

// acceptLoop accepts connections until the listener is closed. Each client's
// goroutine joins wg; on a TLS listener (isTLS) it runs the handshake first,
// so that a slow one holds up no other client, and the connection counts
// against maxclients from accept on. Any other accept error (EMFILE when the process is out
// of descriptors, ENOBUFS, ...) is logged, at most once per logEvery, and
// retried after a back-off: a proxy that stops accepting would leave every
// replica without a way back.
func (s *Server) acceptLoop(ctx context.Context, ln net.Listener, wg *sync.WaitGroup, isTLS bool) error {
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			delay = nextAcceptDelay(delay)
			if ok, n := s.protect.acceptLog.allow(time.Now(), logEvery); ok {
				s.log.Warn("accept failed; retrying", "error", err, "retry-in-ms", delay.Milliseconds(), "suppressed", n)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		delay = 0
		s.stats.ConnectionsReceived.Add(1) // at accept, before any TLS handshake, as Redis counts
		if isTLS {
			s.stats.TLSConnectionsReceived.Add(1)
			// The handshake holds a descriptor and a goroutine for up to its
			// timeout, so it takes a client's slot from accept on, as Redis
			// creates the client before the handshake; past maxclients the
			// connection is closed at once. Redis's error cannot go out
			// before the handshake (Redis writes nothing either): it drops.
			if !s.clients.reserve(s.config().MaxClients) {
				s.stats.RejectedConnections.Add(1)
				conn.Close()
				continue
			}
			wg.Go(func() {
				if tc, ok := s.handshakeTLS(ctx, conn); ok {
					s.admit(ctx, tc, wg, true)
				}
			})
			continue
		}
		s.admit(ctx, conn, wg, false)
	}
}

// admit serves a new connection (after its TLS handshake, on tls-port):
// protected mode and maxclients, then a goroutine that joins wg. reserved
// says the connection holds a slot of the registry already (a TLS one,
// reserved at accept): it becomes the client's, or is given back.
func (s *Server) admit(ctx context.Context, conn net.Conn, wg *sync.WaitGroup, reserved bool) {
	if deniedByProtectedMode(s.clientConf(), s.access.defaultOpen(), conn.RemoteAddr()) {
		if reserved {
			s.clients.unreserve()
		}
		s.stats.RejectedConnections.Add(1) // as Redis counts it
		wg.Go(func() { deny(conn) })
		return
	}
	c, ok := (*client)(nil), true
	if reserved {
		c = s.clients.addReserved(func(id int64) *client { return s.clientOf(id, conn) })
	} else {
		c, ok = s.register(conn)
	}
	if !ok {
		s.stats.RejectedConnections.Add(1)
		conn.Write([]byte("-ERR max number of clients reached\r\n"))
		conn.Close()
		return
	}
	if ctx.Err() != nil {
		// Run cancels ctx before closeClients lists the clients: a client
		// registered after that list (a TLS handshake that ended just then)
		// sees the cancel here and is closed, so none is left open.
		c.closeFor(downstream.CloseServerShutdown)
	}
	wg.Go(func() { s.serveClient(ctx, c) })
}

// register adds a connection to the client registry, unless maxclients is reached.
func (s *Server) register(conn net.Conn) (*client, bool) {
	return s.clients.add(s.config().MaxClients, func(id int64) *client { return s.clientOf(id, conn) })
}

// clientOf makes the client of conn, with id (newClient): handed what every
// client shares, as the default user.
func (s *Server) clientOf(id int64, conn net.Conn) *client {
	shared := clientShared{conf: &s.conf, stats: &s.stats, limitLog: &s.protect.limitLog}
	return newClient(id, conn, shared, s.log, s.access.users.Default(), s.access.defaultOpen())
}

// closeClients closes every client connection, which ends their goroutines.
func (s *Server) closeClients() {
	for _, c := range s.clients.clients() {
		c.closeFor(downstream.CloseServerShutdown)
	}
}

// serveClient reads and runs commands until the client leaves, breaks the
// protocol, or the server stops; a client that becomes a replica is then
// served as one. An admin client's close is counted and logged here, once.
func (s *Server) serveClient(ctx context.Context, c *client) {
	reason, err := s.runClient(ctx, c)
	s.stopOutbox(c)
	c.conn.Close()
	c.hs.EndCompression(&s.replicas.linkSlots) // its replica, if any, has ended
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

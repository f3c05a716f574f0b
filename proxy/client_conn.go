package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/acl"
	"github.com/replproxy/replproxy/proxy/clientlist"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/pubsub"
	"github.com/replproxy/replproxy/proxy/wire"
)

// clientWriteTimeout bounds one write of replies to an admin client.
const clientWriteTimeout = 10 * time.Second

// flushChunk is the most one write of replies sends, so that the soft output
// limit sees progress between writes.
const flushChunk = 256 << 10

// errOutputLimit ends a flush to a client closed for its output buffer.
var errOutputLimit = errors.New("output buffer over client-output-buffer-limit normal")

// minSoftWait is the shortest write a client over the soft output limit is
// given (the monitor's period).
const minSoftWait = monitorInterval

// flushThreshold is how much reply a pipelined batch may gather before it is
// written even though more commands are buffered.
const flushThreshold = 64 << 10

// A client is one connection to the proxy: an admin client or (later in its
// life) a replica. Its goroutine, serveClient, owns every field not marked
// otherwise.
type client struct {
	srv     *Server
	id      int64
	conn    net.Conn
	addr    string // remote address
	laddr   string // local address
	fd      int    // the socket's descriptor, for CLIENT LIST; -1 when it has none
	created time.Time
	log     hclog.Logger

	rd  *wire.CommandReader
	out []byte
	// authed: the client authenticated (AUTH, HELLO's AUTH) as user, which
	// it runs as from then on; until then it is the default user's, and
	// needs to authenticate only when that user is off or has a password
	// (access.authRequired). user is read by CLIENT LIST from any goroutine.
	authed bool
	user   atomic.Pointer[acl.User]
	// subs are the channels the client is subscribed to
	// (commands_sentinel.go).
	subs map[string]struct{}
	// box, once the client first subscribed, takes every reply to it, and
	// publishers' messages, for its WriteLoop. Set by the client's
	// goroutine before the client is first added to the channels;
	// publishers read it under the channels' lock (package pubsub).
	box *pubsub.Outbox

	hs downstream.Handshake // what REPLCONF said

	asReplica atomic.Pointer[downstream.Replica] // set by PSYNC/SYNC: the client is a replica from then on; any goroutine may read it
	outCap    atomic.Int64                       // cap of out after the last flush, for memory accounting
	name      atomic.Pointer[string]             // CLIENT SETNAME; read by CLIENT LIST
	lastCmd   atomic.Pointer[string]             // for CLIENT LIST
	lastUse   atomic.Int64                       // unix nanos of the last command, or of the last write to a subscriber (its box's WriteLoop)
	subCount  atomic.Int32                       // len(subs), for CLIENT LIST
	boxBytes  atomic.Int64                       // what box holds (written by it), for CLIENT LIST and memory
	reason    atomic.Int32                       // a downstream.CloseReason, recorded by whoever closes the connection first
	// resp is the client's wire.Proto: RESP2 from accept on, changed by
	// HELLO on its own goroutine; atomic because CLIENT LIST (any client's
	// goroutine) shows it.
	resp atomic.Uint32
}

func newClient(s *Server, id int64, conn net.Conn) *client {
	c := &client{
		srv:     s,
		id:      id,
		conn:    conn,
		addr:    conn.RemoteAddr().String(),
		laddr:   conn.LocalAddr().String(),
		fd:      listen.FD(conn),
		created: time.Now(),
	}
	c.log = s.log.Named("downstream").With("client-id", id, "address", c.addr)
	cc := s.clientConf()
	c.user.Store(s.access.users.Default())
	c.authed = s.access.defaultOpen() // as Redis's clientSetDefaultAuth: kept when a password is set later
	lim := cc.limits
	lim.Unauthenticated = s.access.authRequired(c)
	c.rd = wire.NewCommandReader(countingReader{wire.ConnReader(conn), &s.stats.NetInputBytes}, lim)
	c.lastUse.Store(c.created.UnixNano())
	c.resp.Store(uint32(wire.RESP2))
	return c
}

// proto returns the RESP version the client's replies are written in: every
// reply goes through it where RESP3 differs from RESP2 (a map, a null, a
// verbatim string, a push), so that a command gets both by writing one.
// Any goroutine.
func (c *client) proto() wire.Proto { return wire.Proto(c.resp.Load()) }

// replicaSet reports whether the client became a replica. Any goroutine.
func (c *client) replicaSet() bool { return c.asReplica.Load() != nil }

// clientName is its CLIENT SETNAME name, "" for none: logs name the client
// that asked for a change by id, address and name.
func (c *client) clientName() string {
	if n := c.name.Load(); n != nil {
		return *n
	}
	return ""
}

// closeFor closes the connection for reason, unless another was recorded
// first; the client's goroutine then ends on the closed connection. Any
// goroutine.
func (c *client) closeFor(reason downstream.CloseReason) {
	downstream.FirstReason(&c.reason, reason)
	c.conn.Close()
}

// syncLimits gives the client's reader the limits in force before each
// command: Redis's pre-AUTH limits while the client must authenticate, and
// the latest proto-max-bulk-len and client-query-buffer-limit. A client that
// connected while the default user had a password needs no AUTH once it
// has none, as in Redis (authRequired is checked per command).
func (c *client) syncLimits(cc *clientConf) {
	lim := cc.limits
	lim.Unauthenticated = c.srv.access.authRequired(c)
	if lim != c.rd.Limits() {
		c.rd.SetLimits(lim)
	}
}

// bufferBytes is what the client's buffers hold: the reader's fixed buffer,
// the command being read, the reply buffer and a subscriber's outbox. Any
// goroutine.
func (c *client) bufferBytes() int64 {
	return clientBufferBytes + c.rd.QueryBytes() + c.outCap.Load() + c.boxBytes.Load()
}

// countingReader adds every byte read to a counter.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

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
		c.syncLimits(cc)
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
			s.closedByOutputLimit(c, downstream.CloseOutputHardLimit)
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

// flush writes the gathered replies. While what is left to write is at or
// over the soft limit of client-output-buffer-limit normal, the write may
// take only the soft period; a client that reads slower than that is closed
// for its output buffer, as Redis closes it.
func (c *client) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	if c.box != nil {
		c.queueOut() // the outbox's WriteLoop writes, in order with messages
		return nil
	}
	lim := c.srv.clientConf().output
	if c.replicaSet() {
		lim = config.OutputBufferLimit{} // the replica class is the monitor's
	}
	var err error
	pending := c.out
	var overSince time.Time
	for len(pending) > 0 && err == nil {
		now := time.Now()
		deadline := now.Add(clientWriteTimeout)
		over := lim.Soft > 0 && int64(len(pending)) >= lim.Soft
		switch {
		case !over:
			overSince = time.Time{}
		case overSince.IsZero():
			overSince = now
			// At least minSoftWait: the kernel needs a moment to take bytes
			// even from a client that reads at once.
			deadline = minTime(deadline, maxTime(now.Add(lim.SoftPeriod), now.Add(minSoftWait)))
		case now.Sub(overSince) > lim.SoftPeriod:
			c.srv.closedByOutputLimit(c, downstream.CloseOutputSoftLimit)
			err = errOutputLimit
			continue
		default:
			deadline = minTime(deadline, maxTime(overSince.Add(lim.SoftPeriod), now.Add(minSoftWait)))
		}
		c.conn.SetWriteDeadline(deadline)
		var n int
		n, err = c.conn.Write(pending[:min(len(pending), flushChunk)])
		c.srv.stats.NetOutputBytes.Add(int64(n))
		pending = pending[n:]
		var ne net.Error
		if over && errors.As(err, &ne) && ne.Timeout() && int64(len(pending)) >= lim.Soft {
			c.srv.closedByOutputLimit(c, downstream.CloseOutputSoftLimit)
		}
	}
	if cap(c.out) > 1<<20 {
		c.out = nil // don't keep a huge reply buffer around
	} else {
		c.out = c.out[:0]
	}
	c.outCap.Store(int64(cap(c.out)))
	return err
}

// overHardLimit reports whether the replies gathered reach the hard limit of
// client-output-buffer-limit normal.
func (c *client) overHardLimit(lim config.OutputBufferLimit) bool {
	return lim.Hard > 0 && int64(len(c.out)) >= lim.Hard
}

// closedByOutputLimit counts and logs an admin client closed for its output
// buffer (client_output_buffer_limit_disconnections) and closes it; its
// goroutine then ends on the closed connection.
func (s *Server) closedByOutputLimit(c *client, reason downstream.CloseReason) {
	which := "hard"
	if reason == downstream.CloseOutputSoftLimit {
		which = "soft"
	}
	s.stats.OutputLimitDisconnects.Add(1)
	if ok, n := s.protect.limitLog.allow(time.Now(), logEvery); ok {
		c.log.Warn("client closed: output buffer over client-output-buffer-limit normal",
			"limit-class", which, "pending-bytes", len(c.out), "suppressed", n)
	}
	c.closeFor(reason)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
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

// listed is c as CLIENT LIST shows it and CLIENT KILL filters it. Any
// goroutine: it reads only c's atomics and immutable fields.
func (c *client) listed(now time.Time) clientlist.Client {
	f := clientlist.Client{ID: c.id, Addr: c.addr, LAddr: c.laddr, FD: c.fd, Subs: c.subCount.Load(),
		Age: int64(now.Sub(c.created) / time.Second), Proto: int(c.proto()),
		Closing: downstream.CloseReason(c.reason.Load()) != downstream.CloseNone}
	if n := c.name.Load(); n != nil {
		f.Name = *n
	}
	if u := c.userOf(); u != nil {
		f.User = u.Name()
	}
	if l := c.lastCmd.Load(); l != nil {
		f.Cmd = *l
	}
	// idle is since the client's last command (or message written to a
	// subscriber), as Redis's lastinteraction; a replica sends no commands
	// once streaming, but Redis counts each read from it, its ACKs every
	// second, as an interaction too.
	last := c.lastUse.Load()
	if r := c.asReplica.Load(); r != nil {
		last, f.Replica = max(last, r.AckTime()), true
		f.Closing = f.Closing || r.Closed()
		if cur := r.Cursor(); cur != nil {
			f.OMem = cur.OutputBufferSize()
		}
	} else {
		f.OMem = c.boxBytes.Load() // a subscriber's outbox
	}
	f.Idle = max(0, int64(now.Sub(time.Unix(0, last))/time.Second))
	return f
}

// infoLine is c's CLIENT LIST line without its newline, as CLIENT INFO
// and ACL LOG's client-info show it. Any goroutine.
func (c *client) infoLine() string {
	var b strings.Builder
	clientlist.Append(&b, c.listed(time.Now()))
	return strings.TrimSuffix(b.String(), "\n")
}

// userOf is the user c runs as. Any goroutine.
func (c *client) userOf() *acl.User { return c.user.Load() }

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

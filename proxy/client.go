package proxy

import (
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
	"github.com/replproxy/replproxy/proxy/report"
	"github.com/replproxy/replproxy/proxy/wire"
)

// A client's own state and what it does on its own: its reader's limits,
// writing its replies (flush) under client-output-buffer-limit normal, a
// subscriber's outbox under client-output-buffer-limit pubsub, and how
// CLIENT LIST shows it. It is handed what it shares with every client
// (clientShared) and reaches nothing else of the server; the server's side
// of a client, serving its commands, is client_conn.go's.

// clientBufferBytes is what each connection's reader holds at least: its
// bufio buffer (Redis's PROTO_IOBUF_LEN). The command being read comes on
// top (client.bufferBytes).
const clientBufferBytes = wire.ReadBufferSize

// clientWriteTimeout bounds one write of replies to an admin client.
const clientWriteTimeout = 10 * time.Second

// flushChunk is the most one write of replies sends, so that the soft output
// limit sees progress between writes.
const flushChunk = 256 << 10

// errOutputLimit ends a flush to a client closed for its output buffer.
var errOutputLimit = errors.New("output buffer over client-output-buffer-limit normal")

// minSoftWait is the shortest write a client over the soft output limit is
// given: a round of the monitor (monitorInterval), which checks the
// replicas' soft limits.
const minSoftWait = 100 * time.Millisecond

// A client is one connection to the proxy: an admin client or (later in its
// life) a replica. Its goroutine, serveClient (client_conn.go), owns every
// field not marked otherwise.
type client struct {
	shared  clientShared
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

// clientShared is what every client is handed at accept: the
// configuration in force (its limits), the counters it adds to, and the
// rate-limited log of clients closed for a buffer limit.
type clientShared struct {
	conf     *liveConfig
	stats    *report.Stats
	limitLog *logLimiter
}

// newClient makes the client of conn, with id, running as the default user
// (user), authenticated when that user needs no password (open). log is
// the server's logger.
func newClient(id int64, conn net.Conn, shared clientShared, log hclog.Logger, user *acl.User, open bool) *client {
	c := &client{
		shared:  shared,
		id:      id,
		conn:    conn,
		addr:    conn.RemoteAddr().String(),
		laddr:   conn.LocalAddr().String(),
		fd:      listen.FD(conn),
		created: time.Now(),
	}
	c.log = log.Named("downstream").With("client-id", id, "address", c.addr)
	cc := shared.conf.clientConf()
	c.user.Store(user)
	c.authed = open // as Redis's clientSetDefaultAuth: kept when a password is set later
	lim := cc.limits
	lim.Unauthenticated = !open
	c.rd = wire.NewCommandReader(countingReader{wire.ConnReader(conn), &shared.stats.NetInputBytes}, lim)
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
// command: Redis's pre-AUTH limits while the client must authenticate
// (unauthenticated: access.authRequired, checked per command), and the
// latest proto-max-bulk-len and client-query-buffer-limit. A client that
// connected while the default user had a password needs no AUTH once it
// has none, as in Redis.
func (c *client) syncLimits(cc *clientConf, unauthenticated bool) {
	lim := cc.limits
	lim.Unauthenticated = unauthenticated
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
	lim := c.shared.conf.clientConf().output
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
			c.closedByOutputLimit(downstream.CloseOutputSoftLimit)
			err = errOutputLimit
			continue
		default:
			deadline = minTime(deadline, maxTime(overSince.Add(lim.SoftPeriod), now.Add(minSoftWait)))
		}
		c.conn.SetWriteDeadline(deadline)
		var n int
		n, err = c.conn.Write(pending[:min(len(pending), flushChunk)])
		c.shared.stats.NetOutputBytes.Add(int64(n))
		pending = pending[n:]
		var ne net.Error
		if over && errors.As(err, &ne) && ne.Timeout() && int64(len(pending)) >= lim.Soft {
			c.closedByOutputLimit(downstream.CloseOutputSoftLimit)
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
func (c *client) closedByOutputLimit(reason downstream.CloseReason) {
	which := "hard"
	if reason == downstream.CloseOutputSoftLimit {
		which = "soft"
	}
	c.shared.stats.OutputLimitDisconnects.Add(1)
	if ok, n := c.shared.limitLog.allow(time.Now(), logEvery); ok {
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

// Proto is c's protocol, for a publish (pubsub.Subscriber). Any goroutine.
func (c *client) Proto() wire.Proto { return c.proto() }

// Outbox is c's outbox, for a publish (pubsub.Subscriber): set before c
// first subscribes, read under the channels' lock.
func (c *client) Outbox() *pubsub.Outbox { return c.box }

// startOutbox gives c an outbox, and a goroutine writing it to the
// connection, on its first SUBSCRIBE: from then on every reply to c goes
// through it (flush), so that replies and messages reach it in order. A
// failed write closes the connection, so that the client's goroutine ends
// too. The client's goroutine only.
func (c *client) startOutbox() {
	if c.box != nil {
		return
	}
	box := pubsub.NewOutbox(&c.boxBytes)
	c.box = box
	go func() {
		err := box.WriteLoop(c.conn, clientWriteTimeout, func(n int, err error) {
			c.shared.stats.NetOutputBytes.Add(int64(n))
			switch {
			case err == nil:
				// Redis counts a write to a client as an interaction too:
				// a subscriber that receives messages is not idle in
				// CLIENT LIST.
				c.lastUse.Store(time.Now().UnixNano())
			case !errors.Is(err, net.ErrClosed):
				c.closeFor(downstream.CloseWriteError)
			}
		})
		if err != nil {
			c.log.Debug("subscriber write failed", "error", err)
		}
	}()
}

// queueOut moves the replies gathered in c.out into c's outbox, closing c
// if that takes it over client-output-buffer-limit pubsub. The client's
// goroutine only.
func (c *client) queueOut() {
	if len(c.out) == 0 {
		return
	}
	lim := c.shared.conf.config().ClientOutputBufferLimit.PubSub
	c.queuedOut(c.box.Put(c.out, lim, time.Now()))
}

// queuedOut closes c if putting c.out into its outbox took it over
// client-output-buffer-limit pubsub, and empties c.out. The client's
// goroutine only, with no lock held.
func (c *client) queuedOut(over pubsub.Over, pending int64) {
	if over != pubsub.Within {
		c.closedByPubSubLimit(over, pending)
	}
	if cap(c.out) > 1<<20 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
	c.outCap.Store(int64(cap(c.out)))
}

// closedByPubSubLimit counts and logs a subscribed client closed for its
// output buffer, and closes it. Any goroutine.
func (c *client) closedByPubSubLimit(over pubsub.Over, pending int64) {
	reason := downstream.CloseOutputHardLimit
	if over == pubsub.OverSoft {
		reason = downstream.CloseOutputSoftLimit
	}
	c.shared.stats.OutputLimitDisconnects.Add(1)
	if ok, n := c.shared.limitLog.allow(time.Now(), logEvery); ok {
		c.log.Warn("client closed: output buffer over client-output-buffer-limit pubsub",
			"limit-class", over.String(), "pending-bytes", pending, "suppressed", n)
	}
	c.closeFor(reason)
}

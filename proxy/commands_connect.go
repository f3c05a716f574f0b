package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/replproxy/replproxy/proxy/clientlist"
	"github.com/replproxy/replproxy/proxy/commanddocs"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The commands client libraries and monitoring tools send on connect, or
// poll, answered as Redis 7.0 answers them in RESP2 and RESP3, so that they
// connect without errors: HELLO, RESET, CLIENT INFO and SETINFO, TIME,
// SLOWLOG and LATENCY (the proxy runs no commands worth timing: both are
// always empty), and SHUTDOWN.

// noAuthHello is Redis 7.0's reply to HELLO without AUTH from a client that
// has not authenticated.
const noAuthHello = "NOAUTH HELLO must be called with the client already authenticated, " +
	"otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client " +
	"and select the RESP protocol version at the same time"

// cmdHello is HELLO [protover [AUTH user pass] [SETNAME name]], as Redis 7.0
// answers it: protover 2 or 3 sets the protocol of every later reply of this
// client (and of HELLO's own), none keeps it; the reply is a map in RESP3 and
// the same pairs as a flat array in RESP2. As in Redis's helloCommand, the
// protover is checked first, then each option in turn takes effect where it
// stands (AUTH authenticates, SETNAME names) until one fails, whose error is
// the reply: HELLO 3 AUTH u p SETNAME "a b" leaves the client authenticated
// as u, unnamed and in its old protocol. The protocol changes last, only
// when the client is authenticated. A replica that said HELLO still
// receives its PSYNC reply and the stream as any other: they are raw bytes,
// not replies (package downstream).
func (s *Server) cmdHello(c *client, args [][]byte) bool {
	var ver int64
	if len(args) >= 2 {
		// As string2ll: no sign '+', no leading zero, no blank.
		v, err := strconv.ParseInt(string(args[1]), 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != string(args[1]) {
			c.out = wire.AppendError(c.out, "ERR Protocol version is not an integer or out of range")
			return false
		}
		if v != int64(wire.RESP2) && v != int64(wire.RESP3) {
			c.out = wire.AppendError(c.out, "NOPROTO unsupported protocol version")
			return false
		}
		ver = v
	}
	for i := 2; i < len(args); i++ {
		more := len(args) - i - 1
		switch opt := args[i]; {
		case wire.EqualFold(opt, "auth") && more >= 2:
			if !s.access.authenticate(c, args[0], string(args[i+1]), args[i+2]) {
				return false
			}
			i += 2
		case wire.EqualFold(opt, "setname") && more >= 1:
			n := string(args[i+1])
			if !validName(n) {
				c.out = wire.AppendError(c.out, "ERR Client names cannot contain spaces, newlines or special characters.")
				return false
			}
			c.name.Store(&n)
			i++
		default:
			c.out = wire.AppendError(c.out, fmt.Sprintf("ERR Syntax error in HELLO option '%s'", wire.CString(string(opt))))
			return false
		}
	}
	if s.access.authRequired(c) {
		c.out = wire.AppendError(c.out, noAuthHello)
		return false
	}
	if ver != 0 {
		c.resp.Store(uint32(ver))
	}
	role := "master"
	if s.config().MasterHost != "" {
		role = "replica"
	}
	p := c.proto()
	c.out = p.AppendMapHeader(c.out, 7)
	c.out = wire.AppendBulkString(c.out, "server")
	c.out = wire.AppendBulkString(c.out, "redis")
	c.out = wire.AppendBulkString(c.out, "version")
	c.out = wire.AppendBulkString(c.out, redisCompatVersion)
	c.out = wire.AppendBulkString(c.out, "proto")
	c.out = wire.AppendInt(c.out, int64(p))
	c.out = wire.AppendBulkString(c.out, "id")
	c.out = wire.AppendInt(c.out, c.id)
	c.out = wire.AppendBulkString(c.out, "mode")
	c.out = wire.AppendBulkString(c.out, "standalone")
	c.out = wire.AppendBulkString(c.out, "role")
	c.out = wire.AppendBulkString(c.out, role)
	c.out = wire.AppendBulkString(c.out, "modules")
	c.out = wire.AppendArrayHeader(c.out, 0)
	return false
}

// cmdReset is RESET, as Redis 7.0's resetCommand serves it: the connection
// returns to a new one's state and +RESET is the reply. Of what Redis
// resets, the proxy keeps: the subscriptions (left without an unsubscribe
// message; the outbox is written out and dropped, so that the connection may
// even become a replica), the protocol (RESP2), the name, and the
// authentication (back to the default user, authenticated only when it
// needs no password: with requirepass the client must AUTH again, and its
// reader is under the pre-AUTH limits again). MULTI, WATCH, MONITOR,
// tracking, SELECT's database, CLIENT REPLY and NO-EVICT are not served, so
// there is nothing of them to reset. A replica never gets here: its
// connection carries no commands once it is one (Redis refuses RESET from
// one).
func (s *Server) cmdReset(c *client, _ [][]byte) bool {
	if c.box != nil {
		c.queueOut() // replies before RESET's are written first
		s.stopOutbox(c)
		c.box = nil
		c.subs = nil
		c.subCount.Store(0)
	}
	c.resp.Store(uint32(wire.RESP2))
	c.name.Store(nil)
	c.user.Store(s.access.users.Default())
	c.authed = s.access.defaultOpen()
	c.out = wire.AppendSimple(c.out, "RESET")
	return false
}

// clientInfo is CLIENT INFO: the client's own CLIENT LIST line, a verbatim
// string in RESP3 as in Redis.
func (s *Server) clientInfo(c *client) {
	var b strings.Builder
	clientlist.Append(&b, c.listed(time.Now()))
	c.out = c.proto().AppendVerbatim(c.out, "txt", b.String())
}

// clientSetInfo is Redis 7.2's CLIENT SETINFO LIB-NAME|LIB-VER <value>, which
// client libraries send on connect: accepted and checked as 7.2 checks it,
// but not kept, since the proxy's CLIENT LIST has Redis 7.0's fields.
func (s *Server) clientSetInfo(c *client, attr, val string) {
	attr = wire.Word(attr)
	if attr != "lib-name" && attr != "lib-ver" {
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR Unrecognized option '%s'", clip(attr, 64)))
		return
	}
	if !validName(val) {
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR %s cannot contain spaces, newlines or special characters.", attr))
		return
	}
	c.out = wire.AppendSimple(c.out, "OK")
}

// cmdTime is TIME: seconds and microseconds, as two bulk strings.
func (s *Server) cmdTime(c *client, _ [][]byte) bool {
	now := time.Now()
	c.out = wire.AppendArrayHeader(c.out, 2)
	c.out = wire.AppendBulkString(c.out, strconv.FormatInt(now.Unix(), 10))
	c.out = wire.AppendBulkString(c.out, strconv.Itoa(now.Nanosecond()/1000))
	return false
}

// cmdSlowlog is SLOWLOG GET [count], LEN, RESET and HELP, always empty;
// dispatch has checked the subcommand and its arity.
func (s *Server) cmdSlowlog(c *client, args [][]byte) bool {
	switch wire.Lower(string(args[1])) {
	case "get":
		if len(args) > 3 {
			subSyntaxError(c, args)
			break
		}
		if len(args) == 3 {
			if n, ok := wire.ParseInt(args[2]); !ok || n < -1 {
				c.out = wire.AppendError(c.out, "ERR count should be greater than or equal to -1")
				break
			}
		}
		c.out = wire.AppendArrayHeader(c.out, 0)
	case "len":
		c.out = wire.AppendInt(c.out, 0)
	case "reset":
		c.out = wire.AppendSimple(c.out, "OK")
	case "help":
		c.out = appendHelp(c.out, "slowlog")
	default:
		unknownSub(c, args)
	}
	return false
}

// latencyDoctor is LATENCY DOCTOR's report: there is nothing to monitor.
const latencyDoctor = "Latency monitoring is not available in replproxy: it runs no " +
	"commands or events whose latency Redis would sample. Measure replication lag " +
	"with INFO replication instead.\n"

// cmdLatency is LATENCY LATEST, HISTORY, RESET, DOCTOR, GRAPH, HISTOGRAM
// and HELP, with no samples; dispatch has checked the subcommand and its
// arity.
func (s *Server) cmdLatency(c *client, args [][]byte) bool {
	switch wire.Lower(string(args[1])) {
	case "latest", "history":
		c.out = wire.AppendArrayHeader(c.out, 0)
	case "histogram":
		// Redis's map of command to histogram, with no command in it.
		c.out = c.proto().AppendMapHeader(c.out, 0)
	case "reset":
		c.out = wire.AppendInt(c.out, 0)
	case "doctor":
		c.out = c.proto().AppendVerbatim(c.out, "txt", latencyDoctor)
	case "graph":
		c.out = wire.AppendError(c.out, fmt.Sprintf("ERR No samples available for event '%s'", wire.CString(string(args[2]))))
	case "help":
		c.out = appendHelp(c.out, "latency")
	default:
		unknownSub(c, args)
	}
	return false
}

// cmdShutdown is SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. The proxy
// saves nothing, so the flags change nothing but their syntax is Redis's; the
// server then stops gracefully, as on SIGTERM (Shutdown). As in Redis, a successful SHUTDOWN has no
// reply: the connection closes.
func (s *Server) cmdShutdown(c *client, args [][]byte) bool {
	var save, noSave, abort bool
	for _, a := range args[1:] {
		switch wire.Word(string(a)) {
		case "save":
			save = true
		case "nosave":
			noSave = true
		case "now", "force":
		case "abort":
			abort = true
		default:
			c.out = wire.AppendError(c.out, "ERR syntax error")
			return false
		}
	}
	if (save && noSave) || (abort && len(args) > 2) {
		c.out = wire.AppendError(c.out, "ERR syntax error")
		return false
	}
	if abort {
		c.out = wire.AppendError(c.out, "ERR No shutdown in progress.")
		return false
	}
	s.log.Warn("shutdown requested by a client", "client-id", c.id, "address", c.addr, "client-name", c.clientName())
	s.Shutdown()
	return true
}

// cmdCommand is COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST
// [FILTERBY MODULE m | ACLCAT c | PATTERN p]], with Redis 7.0's replies,
// over the commands the proxy serves (package commanddocs); a misuse is
// answered as every command's is.
func (s *Server) cmdCommand(c *client, args [][]byte) bool {
	if len(args) == 2 && wire.EqualFold(args[1], "help") {
		c.out = appendHelp(c.out, "command")
		return false
	}
	var misuse commanddocs.Misuse
	c.out, misuse = s.commands.docs.Reply(c.out, c.proto(), args, len(s.commands.byName))
	switch misuse {
	case commanddocs.WrongArity:
		// Not reached: dispatch checks the subcommand's arity first.
		subSyntaxError(c, args)
	case commanddocs.UnknownSubcommand:
		unknownSub(c, args)
	}
	return false
}

package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/replproxy/replproxy/proxy/acl"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// cmdACL is the ACL command, as Redis 7.0 serves it: package acl judges the
// arguments and makes the replies; the server keeps what needs a
// connection or a file (WHOAMI, LOAD, SAVE, the clients a change
// disconnects).
func (s *Server) cmdACL(c *client, args [][]byte) (quit bool) {
	sub, aerr := acl.Subcommand(args, s.config().ACLFile != "")
	if aerr != nil {
		c.out = wire.AppendError(c.out, aerr.Reply())
		return false
	}
	rest := args[2:]
	switch sub {
	case "setuser":
		u, prev, err := s.access.users.SetUser(string(rest[0]), rest[1:])
		if err != nil {
			c.out = wire.AppendError(c.out, errorReply(err))
			return false
		}
		c.out = wire.AppendSimple(c.out, "OK")
		if prev != nil && acl.ChannelsRevoked(prev, u.Profile()) {
			return s.disconnectRevokedSubscribers(c, u)
		}
	case "deluser":
		names := make([]string, len(rest))
		for i, n := range rest {
			names[i] = string(n)
		}
		gone, err := s.access.users.DelUser(names)
		if err != nil {
			c.out = wire.AppendError(c.out, errorReply(err))
			return false
		}
		c.out = wire.AppendInt(c.out, int64(len(gone)))
		return s.disconnectUsers(c)
	case "getuser":
		c.out = appendACLValue(c.out, c.proto(), s.access.users.GetUser(string(rest[0])))
	case "users":
		c.out = appendBulkStrings(c.out, s.access.users.Names())
	case "list":
		c.out = appendBulkStrings(c.out, s.access.users.List())
	case "whoami":
		c.out = wire.AppendBulkString(c.out, c.userOf().Name())
	case "cat":
		c.out = appendACLValue(c.out, c.proto(), acl.Cat(rest))
	case "log":
		c.out = appendACLValue(c.out, c.proto(), s.access.aclLog.Command(rest, time.Now()))
	case "dryrun":
		c.out = appendACLValue(c.out, c.proto(), s.access.users.DryRun(rest))
	case "genpass":
		c.out = appendACLValue(c.out, c.proto(), acl.GenPass(rest))
	case "help":
		c.out = appendACLValue(c.out, c.proto(), acl.Help())
	case "load":
		return s.aclLoad(c)
	case "save":
		s.aclSave(c)
	}
	return false
}

// aclLoad is ACL LOAD: the aclfile read again, all or nothing; the clients
// of every user it replaced are disconnected, as Redis frees them. A file
// that cannot be read is Redis's error, naming the aclfile directive and
// the cause in strerror's words.
func (s *Server) aclLoad(c *client) (quit bool) {
	file := s.config().ACLFile
	data, err := os.ReadFile(file)
	if err != nil {
		c.out = wire.AppendError(c.out, "ERR Error loading ACLs, opening file '"+file+"': "+strerror(err))
		return false
	}
	if err := s.access.users.Load(file, data); err != nil {
		c.out = wire.AppendError(c.out, errorReply(err))
		return false
	}
	c.out = wire.AppendSimple(c.out, "OK")
	return s.disconnectUsers(c)
}

// aclSave is ACL SAVE: the users in force written to the aclfile through a
// temporary file renamed over it, as Redis writes it.
func (s *Server) aclSave(c *client) {
	file := s.config().ACLFile
	if err := writeReplacing(file, s.access.users.Save()); err != nil {
		c.log.Warn("cannot save the ACL users", "path", filepath.Clean(file), "error", err)
		c.out = wire.AppendError(c.out, "ERR "+acl.ErrSaveFailed)
		return
	}
	c.out = wire.AppendSimple(c.out, "OK")
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

// writeReplacing writes data to a temporary file beside path, syncs it and
// renames it over path, so that a crash leaves the old file or the new one,
// never a part of either.
func writeReplacing(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".acl-save-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	return err
}

// errorReply is the error reply for err: package acl's own carry Redis's
// text, anything else (a file that cannot be read) is an ERR.
func errorReply(err error) string {
	var ae *acl.Error
	if errors.As(err, &ae) {
		return ae.Reply()
	}
	return "ERR " + err.Error()
}

// appendBulkStrings appends an array of bulk strings.
func appendBulkStrings(b []byte, ss []string) []byte {
	b = wire.AppendArrayHeader(b, len(ss))
	for _, s := range ss {
		b = wire.AppendBulkString(b, s)
	}
	return b
}

// appendACLValue writes v in protocol p: RESP3's maps, sets and doubles as
// they are, flattened (arrays, bulk strings) for RESP2, as Redis writes them.
func appendACLValue(b []byte, p wire.Proto, v acl.Value) []byte {
	switch v.Kind {
	case acl.KindNull:
		return p.AppendNull(b)
	case acl.KindSimple:
		return wire.AppendSimple(b, v.Str)
	case acl.KindError:
		return wire.AppendError(b, v.Str)
	case acl.KindBulk:
		return wire.AppendBulkString(b, v.Str)
	case acl.KindInt:
		return wire.AppendInt(b, v.Int)
	case acl.KindDouble:
		if p == wire.RESP3 {
			return append(append(append(b, ','), acl.FormatDouble(v.Double)...), '\r', '\n')
		}
		return wire.AppendBulkString(b, acl.FormatDouble(v.Double))
	case acl.KindMap:
		b = p.AppendMapHeader(b, len(v.Elems)/2)
	case acl.KindSet:
		b = p.AppendSetHeader(b, len(v.Elems))
	default: // acl.KindArray
		b = wire.AppendArrayHeader(b, len(v.Elems))
	}
	for _, e := range v.Elems {
		b = appendACLValue(b, p, e)
	}
	return b
}

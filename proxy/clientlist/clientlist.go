// Package clientlist is CLIENT LIST's and CLIENT INFO's lines and CLIENT
// KILL's filters as Redis 7.0 has them, over a client's figures read at one
// moment (a Client): it knows no connection, and the server reads the
// figures and acts on what a filter matches.
package clientlist

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// A Client is one client as CLIENT LIST shows it and CLIENT KILL filters
// it, read at one moment.
type Client struct {
	ID          int64
	Addr, LAddr string // the peer's address and ours
	FD          int
	Name        string
	Age, Idle   int64  // seconds since it connected, since its last command
	Replica     bool   // a replica (flags=S)
	Subs        int32  // channels subscribed to (flags=P while any)
	OMem        int64  // its output buffer: a replica's pending stream, a subscriber's outbox
	Cmd         string // its last command, "" for none
	User        string // the ACL user it runs as ("default" until it authenticates as another)
	Proto       int    // 2 or 3
	// Closing: it was closed for a reason already and is on its way out of
	// the list; Redis frees a killed client at once, so it is neither
	// counted nor killed again.
	Closing bool
}

// Append appends c's CLIENT LIST line (CLIENT INFO's whole reply).
func Append(b *strings.Builder, c Client) {
	flags := "N"
	switch {
	case c.Replica:
		flags = "S"
	case c.Subs > 0:
		flags = "P" // Redis's P while subscribed to a channel
	}
	cmd := c.Cmd
	if cmd == "" {
		cmd = "NULL"
	}
	user := c.User
	if user == "" {
		user = "default"
	}
	fmt.Fprintf(b, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=16384 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=%d tot-mem=%d events=r cmd=%s user=%s redir=-1 resp=%d\n",
		c.ID, c.Addr, c.LAddr, c.FD, c.Name, c.Age, c.Idle, flags, c.Subs, c.OMem, c.OMem, cmd, user, c.Proto)
}

// A KillFilter is CLIENT KILL's filters; zero values match every client.
// An address filter is set by ByAddr or ByLAddr, so that an empty address
// (CLIENT KILL "") matches no client, as in Redis, rather than all. Redis's
// old form (CLIENT KILL <addr>) is Addr alone with SkipMe false.
type KillFilter struct {
	ID              int64
	Addr, LAddr     string
	ByAddr, ByLAddr bool   // whether Addr, LAddr filter
	Type            string // normal, replica, master or pubsub
	User            string // the USER filter: a user name
	SkipMe          bool
	// Known, when set before Parse, says whether a user exists: a USER
	// filter naming none is refused where it stands, as Redis refuses it.
	Known func(user string) bool
}

// Parse reads the filter pairs of args in order and returns the reply to
// the first bad one ("" when all are good).
func (f *KillFilter) Parse(args [][]byte) (reply string) {
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			return "ERR syntax error"
		}
		val := string(args[i+1])
		switch wire.Word(string(args[i])) {
		case "id":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n <= 0 {
				return "ERR client-id should be greater than 0"
			}
			f.ID = n
		case "addr":
			f.Addr, f.ByAddr = val, true
		case "laddr":
			f.LAddr, f.ByLAddr = val, true
		case "type":
			f.Type = wire.Word(val)
			if f.Type == "slave" {
				f.Type = "replica"
			}
			if f.Type != "normal" && f.Type != "replica" && f.Type != "master" && f.Type != "pubsub" {
				return "ERR Unknown client type '" + wire.CString(val) + "'"
			}
		case "user":
			if f.Known != nil && !f.Known(val) {
				return "ERR No such user '" + wire.CString(val) + "'"
			}
			f.User = val
		case "skipme":
			switch {
			case wire.EqualFold(val, "yes"):
				f.SkipMe = true
			case wire.EqualFold(val, "no"):
				f.SkipMe = false
			default:
				return "ERR syntax error"
			}
		default:
			return "ERR syntax error"
		}
	}
	return ""
}

// Matches reports whether f kills o; self says o sent the CLIENT KILL.
func (f *KillFilter) Matches(o Client, self bool) bool {
	switch {
	case o.Closing,
		f.ID != 0 && o.ID != f.ID,
		f.ByAddr && o.Addr != f.Addr,
		f.ByLAddr && o.LAddr != f.LAddr,
		f.Type == "replica" && !o.Replica,
		f.Type == "normal" && (o.Replica || o.Subs > 0),
		f.Type == "pubsub" && (o.Replica || o.Subs == 0),
		f.Type == "master",
		f.User != "" && o.User != f.User && !(o.User == "" && f.User == "default"),
		f.SkipMe && self:
		return false
	}
	return true
}

package proxy

import (
	"github.com/replproxy/replproxy/proxy/acl"
	"github.com/replproxy/replproxy/proxy/clustertopo"
	"github.com/replproxy/replproxy/proxy/commanddocs"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The command table: the commands the proxy answers, their arity, whether
// they run before AUTH, the subcommands it serves of each container, and
// how a command's arguments resolve to one of them, as Redis's
// lookupCommand does. Its handlers are the server's (commands*.go), bound
// by New; dispatch.go runs them.

// commandTable is the command table and COMMAND's entries. Made by New,
// read-only.
type commandTable struct {
	byName map[string]command // by lower-case name
	docs   *commanddocs.Docs
	// clusterMap is Options.ClusterMap, what CLUSTER SHARDS and SLOTS
	// answer under cluster-shard all (commands_cluster.go); nil otherwise.
	clusterMap func() []ClusterShard
}

// ClusterShard is one shard as CLUSTER SHARDS and CLUSTER SLOTS show it on
// a proxy that follows a cluster: its slots, and the proxy's node that
// serves it (commands_cluster.go).
type ClusterShard struct {
	// Slots are the shard's slot ranges, in order.
	Slots []clustertopo.SlotRange
	// NodeID is the ID the serving proxy is shown with: its run ID.
	NodeID string
	// Port and TLSPort are where the proxy serves the shard (0: none).
	Port, TLSPort int
	// Offset is the serving proxy's replication offset.
	Offset int64
}

// A command is one entry of the command table.
type command struct {
	// arity follows Redis: n > 0 means exactly n arguments (the name
	// included), n < 0 means at least -n.
	arity int
	// noAuth marks commands allowed before AUTH.
	noAuth bool
	// run runs the command for c: a method of the server, bound to it by
	// commandEntries.
	run func(c *client, args [][]byte) (quit bool)

	// name is the table's key, set by newCommandTable, for CLIENT LIST.
	name *string
	// subs are, for a command with subcommands (a container), the ones the
	// proxy serves, by lower-case name; nil for any other command.
	subs map[string]subcommand
}

// A subcommand is one the proxy serves of a container.
type subcommand struct {
	name  *string // its full name, as Redis 7 shows it: "client|kill"
	arity int     // Redis's, the container's name included
	// beyondRedis70: Redis 7.0 has no such subcommand (the proxy answers
	// it as a later Redis does), so the ACL's table does not know it
	// either: it is allowed to users that may run the whole container.
	beyondRedis70 bool
}

// servedSubcommands are the subcommands the proxy serves, for each of its
// containers: every one Redis 7.0 has there, but COMMAND GETKEYS and
// GETKEYSANDFLAGS (the proxy holds no keys) and the CLIENT subcommands for
// what it does not do (CACHING, GETREDIR, TRACKING and TRACKINGINFO,
// NO-EVICT, PAUSE and UNPAUSE, REPLY, UNBLOCK), which are checked as Redis
// checks them and then answered as unknown. Of CLUSTER, only SHARDS,
// SLOTS and HELP: the proxy is no cluster node (commands_cluster.go).
var servedSubcommands = map[string][]string{
	"acl":     {"cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log", "save", "setuser", "users", "whoami"},
	"client":  {"getname", "help", "id", "info", "kill", "list", "setname"},
	"cluster": {"help", "shards", "slots"},
	"command": {"count", "docs", "help", "info", "list"},
	"config":  {"get", "help", "resetstat", "rewrite", "set"},
	"latency": {"doctor", "graph", "help", "histogram", "history", "latest", "reset"},
	"slowlog": {"get", "help", "len", "reset"},
}

// clientSetInfoArity is Redis 7.2's arity of CLIENT SETINFO, the one
// subcommand served that Redis 7.0 lacks.
const clientSetInfoArity = 4

// A resolved command is what dispatch found args to name, in Redis's order.
type resolved struct {
	cmd command
	// full is the name Redis 7 shows the command by ("client|kill"), from
	// the table, never a client's bytes: nil when args name nothing.
	full  *string
	arity int
	// unserved: a subcommand of Redis 7.0 the proxy does not serve. It is
	// checked as Redis checks it (arity, authentication, the ACL) and then
	// answered as unknown: it never runs.
	unserved bool
	// beyondRedis70: a subcommand served that Redis 7.0 lacks
	// (subcommand.beyondRedis70).
	beyondRedis70 bool
}

// resolve finds the command args name, as Redis's lookupCommand does: the
// command, and for a container with more than one argument the subcommand
// args[1] names, among those the proxy serves, then among Redis 7.0's. ok
// is false for a name neither has: dispatch answers it, and nothing of it
// runs.
func (t *commandTable) resolve(args [][]byte) (r resolved, ok bool) {
	cmd, ok := t.byName[wire.Lower(string(args[0]))]
	if !ok {
		return r, false
	}
	r = resolved{cmd: cmd, full: cmd.name, arity: cmd.arity}
	if cmd.subs == nil || len(args) < 2 {
		return r, true
	}
	if sub, ok := cmd.subs[wire.Lower(string(args[1]))]; ok {
		r.full, r.arity, r.beyondRedis70 = sub.name, sub.arity, sub.beyondRedis70
		return r, true
	}
	full, arity, known := acl.Lookup(args[:2])
	if !known {
		return resolved{cmd: cmd}, false
	}
	r.full, r.arity, r.unserved = &full, arity, true
	return r, true
}

// newCommandTable completes entries (commandEntries) into the table: each
// command's name, and a container's subcommands the proxy serves
// (servedSubcommands, CLIENT SETINFO), each with the arity of Redis 7.0's
// table (package acl), so that the two cannot differ. docs are COMMAND's
// entries.
func newCommandTable(entries map[string]command, docs *commanddocs.Docs) *commandTable {
	t := entries
	for name, cmd := range t {
		cmd.name = &name
		for _, sub := range servedSubcommands[name] {
			full, arity, ok := acl.Lookup([][]byte{[]byte(name), []byte(sub)})
			if !ok {
				panic("proxy: Redis 7.0 has no subcommand " + name + "|" + sub) // the list above is wrong
			}
			if cmd.subs == nil {
				cmd.subs = map[string]subcommand{}
			}
			cmd.subs[sub] = subcommand{name: &full, arity: arity}
		}
		t[name] = cmd
	}
	setInfo := "client|setinfo"
	t["client"].subs["setinfo"] = subcommand{name: &setInfo, arity: clientSetInfoArity, beyondRedis70: true}
	return &commandTable{byName: t, docs: docs}
}

package proxy

import "github.com/replproxy/replproxy/proxy/wire"

// The HELP subcommands of the containers the proxy serves, as Redis 7.0's
// addReplyHelp writes them: a header naming the command, the lines, then
// HELP's own two. CONFIG, SLOWLOG and LATENCY serve every subcommand Redis
// 7.0 has, and their help is Redis's, word for word; CLIENT's and
// COMMAND's and CLUSTER's list only what the proxy serves (ACL HELP is package acl's).

// helpLines are each container's help, by its lower-case name.
var helpLines = map[string][]string{
	"client": {
		"GETNAME",
		"    Return the name of the current connection.",
		"ID",
		"    Return the ID of the current connection.",
		"INFO",
		"    Return information about the current client connection.",
		"KILL <ip:port>",
		"    Kill connection made from <ip:port>.",
		"KILL <option> <value> [<option> <value> [...]]",
		"    Kill connections. Options are:",
		"    * ADDR (<ip:port>|<unixsocket>:0)",
		"      Kill connections made from the specified address",
		"    * LADDR (<ip:port>|<unixsocket>:0)",
		"      Kill connections made to specified local address",
		"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
		"      Kill connections by type.",
		"    * USER <username>",
		"      Kill connections authenticated by <username>.",
		"    * SKIPME (YES|NO)",
		"      Skip killing current connection (default: yes).",
		"LIST [options ...]",
		"    Return information about client connections. Options:",
		"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
		"      Return clients of specified type.",
		"SETNAME <name>",
		"    Assign the name <name> to the current connection.",
		"SETINFO <LIB-NAME|LIB-VER> <value>",
		"    Accept the client library's name or version (checked, not kept).",
	},
	"cluster": {
		"SHARDS",
		"    Return information about slot range mappings and the nodes associated with them.",
		"SLOTS",
		"    Return information about slots range mappings. Each range is made of:",
		"    start, end, master and replicas IP addresses, ports and ids",
	},
	"command": {
		"(no subcommand)",
		"    Return details about all Redis commands.",
		"COUNT",
		"    Return the total number of commands in this Redis server.",
		"LIST",
		"    Return a list of all commands in this Redis server.",
		"INFO [<command-name> ...]",
		"    Return details about multiple Redis commands.",
		"    If no command names are given, documentation details for all",
		"    commands are returned.",
		"DOCS [<command-name> ...]",
		"    Return documentation details about multiple Redis commands.",
		"    If no command names are given, documentation details for all",
		"    commands are returned.",
	},
	"config": {
		"GET <pattern>",
		"    Return parameters matching the glob-like <pattern> and their values.",
		"SET <directive> <value>",
		"    Set the configuration <directive> to <value>.",
		"RESETSTAT",
		"    Reset statistics reported by the INFO command.",
		"REWRITE",
		"    Rewrite the configuration file.",
	},
	"slowlog": {
		"GET [<count>]",
		"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
		"    Entries are made of:",
		"    id, timestamp, time in microseconds, arguments array, client IP and port,",
		"    client name",
		"LEN",
		"    Return the length of the slowlog.",
		"RESET",
		"    Reset the slowlog.",
	},
	"latency": {
		"DOCTOR",
		"    Return a human readable latency analysis report.",
		"GRAPH <event>",
		"    Return an ASCII latency graph for the <event> class.",
		"HISTORY <event>",
		"    Return time-latency samples for the <event> class.",
		"LATEST",
		"    Return the latest latency samples for all events.",
		"RESET [<event> ...]",
		"    Reset latency data of one or more <event> classes.",
		"    (default: reset all data for all event classes)",
		"HISTOGRAM [COMMAND ...]",
		"    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
		"    If no commands are specified then all histograms are replied.",
	},
}

// appendHelp appends the help of the container named (lower case), whose
// name the header shows in upper case, as Redis shows it.
func appendHelp(b []byte, name string) []byte {
	lines := helpLines[name]
	b = wire.AppendArrayHeader(b, len(lines)+3)
	b = wire.AppendSimple(b, wire.Upper(name)+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, l := range lines {
		b = wire.AppendSimple(b, l)
	}
	b = wire.AppendSimple(b, "HELP")
	return wire.AppendSimple(b, "    Prints this help.")
}

package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// This file checks RESP3 on the admin path: HELLO in every detail, every
// reply in both protocols, the replies beside a real redis-server 7.0's, and
// the replication side, which never changes protocol. The client libraries'
// view (go-redis, redis-cli -3, node-redis) is in resp3_clients_integration_test.go.

// dialAddr opens a raw admin connection to addr (the proxy or a
// redis-server), closed when the test ends.
func dialAddr(t testing.TB, addr string) *adminConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &adminConn{t: t, conn: conn, rd: bufio.NewReader(conn)}
}

// helloReply is HELLO's whole reply from the proxy without a primary.
func helloReply(proto int, id string) string {
	head := "*14\r\n"
	if proto == 3 {
		head = "%7\r\n"
	}
	return head + "$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n" + redisCompatVersion + "\r\n" +
		"$5\r\nproto\r\n:" + strconv.Itoa(proto) + "\r\n$2\r\nid\r\n" + id + "$4\r\nmode\r\n$10\r\nstandalone\r\n" +
		"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
}

// TestHello checks HELLO against redis-server 7.0's answers, byte for byte:
// the protocol changes with protover 2 or 3 and only on success, stays
// without one, shows in CLIENT INFO's resp=, and every refusal is worded and
// ordered as Redis words and orders it.
func TestHello(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	id := a.do("CLIENT", "ID")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"HELLO"}, helloReply(2, id)},
		{[]string{"HELLO", "3"}, helloReply(3, id)},
		{[]string{"HELLO"}, helloReply(3, id)}, // no protover: the protocol stays
		{[]string{"CLIENT", "GETNAME"}, "_\r\n"},
		// Refusals change nothing: the next HELLO still answers in RESP3.
		{[]string{"HELLO", "2", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'\r\n"},
		{[]string{"HELLO", "2", "SETNAME"}, "-ERR Syntax error in HELLO option 'SETNAME'\r\n"},
		{[]string{"HELLO", "2", "AUTH", "default"}, "-ERR Syntax error in HELLO option 'AUTH'\r\n"},
		// The name is checked where it is met, before a later bad option.
		{[]string{"HELLO", "2", "SETNAME", "a b", "FOO"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{[]string{"HELLO", "2", "AUTH", "bob", "x"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"HELLO", "1"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "0"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "-3"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "4", "FOO"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "+3"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"HELLO", "03"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"HELLO", " 3"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"HELLO", "abc"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"HELLO", "99999999999999999999"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"HELLO"}, helloReply(3, id)},
		// Without requirepass the default user takes any password, as
		// Redis's nopass user does.
		{[]string{"HELLO", "2", "AUTH", "default", "anything", "SETNAME", "x", "SETNAME", "lib"}, helloReply(2, id)},
		{[]string{"CLIENT", "GETNAME"}, "$3\r\nlib\r\n"},
		{[]string{"HELLO", "3", "SETNAME", "lib3", "AUTH", "default", "x"}, helloReply(3, id)},
		{[]string{"CLIENT", "GETNAME"}, "$4\r\nlib3\r\n"},
	} {
		if got := a.do(tc.args...); got != tc.want {
			t.Errorf("%q answered %q, want %q", tc.args, got, tc.want)
		}
	}
	if info := a.do("CLIENT", "INFO"); !strings.HasPrefix(info, "=") || !strings.HasSuffix(info, " resp=3\n\r\n") {
		t.Errorf("CLIENT INFO after HELLO 3: %q, want a verbatim string ending in resp=3", info)
	}
	// Another client's view: CLIENT LIST shows each client's own protocol.
	b := adminDial(t, p)
	list := b.do("CLIENT", "LIST")
	if !strings.HasPrefix(list, "$") || !strings.Contains(list, "id="+strings.Trim(id, ":\r\n")+" ") {
		t.Fatalf("CLIENT LIST in RESP2: %q", list)
	}
	for _, line := range strings.Split(strings.TrimSpace(list[strings.Index(list, "\r\n")+2:]), "\n") {
		want := " resp=2"
		if strings.HasPrefix(line, "id="+strings.Trim(id, ":\r\n")+" ") {
			want = " resp=3"
		}
		if !strings.HasSuffix(line, want) {
			t.Errorf("CLIENT LIST line %q, want it to end in %q", line, want)
		}
	}

	// With requirepass: HELLO 3 without AUTH is refused and changes nothing;
	// with AUTH it authenticates, names and switches at once.
	q := startProxy(t, "--requirepass", "secret")
	c := adminDial(t, q)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"HELLO", "3"}, "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
		{[]string{"HELLO", "3", "AUTH", "default", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"HELLO", "3", "SETNAME", "a b", "AUTH", "default", "secret"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"HELLO", "3", "AUTH", "default", "secret", "SETNAME", "mon"}, "%7\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "$3\r\nmon\r\n"},
		{[]string{"CONFIG", "GET", "repl-timeout"}, "%1\r\n$12\r\nrepl-timeout\r\n$2\r\n60\r\n"},
	} {
		if got := c.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("requirepass: %q answered %q, want %q...", tc.args, got, tc.want)
		}
	}
}

// replyCase is one command's reply in RESP2 and in RESP3 (resp3 "" means
// the same as RESP2); a want ending in "…" is a prefix. A case without args
// reads the next reply of a command that answers more than one.
type replyCase struct {
	args         []string
	resp2, resp3 string
}

// replyCases are the proxy's replies to every command of its table, as
// redis-server 7.0 writes them in each protocol (redis-server's own bytes
// where its content is the proxy's too: TestDifferential compares).
func replyCases() []replyCase {
	// COMMAND's, COMMAND DOCS's and COMMAND LIST's counts of entries: the
	// commands served, each once (docs: a name and its docs each in RESP2).
	ncmd := strconv.Itoa(len(servedCommands()))
	ncmd2 := strconv.Itoa(2 * len(servedCommands()))
	return []replyCase{
		{[]string{"PING"}, "+PONG\r\n", ""},
		{[]string{"PING", "x"}, "$1\r\nx\r\n", ""},
		{[]string{"ECHO", "hi"}, "$2\r\nhi\r\n", ""},
		{[]string{"SELECT", "0"}, "+OK\r\n", ""},
		{[]string{"AUTH", "x"}, "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n", ""},
		{[]string{"AUTH", "default", "x"}, "+OK\r\n", ""},
		{[]string{"INFO", "server"}, "$…", "=…"},
		{[]string{"INFO", "nosuchsection"}, "$0\r\n\r\n", "=4\r\ntxt:\r\n"},
		{[]string{"ROLE"}, "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n", ""},
		{[]string{"CONFIG", "GET", "repl-timeout"}, "*2\r\n$12\r\nrepl-timeout\r\n$2\r\n60\r\n", "%1\r\n$12\r\nrepl-timeout\r\n$2\r\n60\r\n"},
		{[]string{"CONFIG", "GET", "repl-timeout", "maxmemory"}, "*4\r\n$12\r\nrepl-timeout\r\n$2\r\n60\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n",
			"%2\r\n$12\r\nrepl-timeout\r\n$2\r\n60\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"},
		{[]string{"CONFIG", "GET", "nosuchdirective"}, "*0\r\n", "%0\r\n"},
		{[]string{"CONFIG", "SET", "repl-timeout", "60"}, "+OK\r\n", ""},
		{[]string{"CONFIG", "RESETSTAT"}, "+OK\r\n", ""},
		{[]string{"CONFIG", "REWRITE"}, "-ERR The server is running without a config file\r\n", ""},
		{[]string{"CONFIG", "FOO"}, "-ERR unknown subcommand 'FOO'. Try CONFIG HELP.\r\n", ""},
		// Without replicaof-cluster, as a redis-server without cluster
		// support (TestClusterCommand has the replies of a following proxy,
		// in RESP3 too).
		{[]string{"CLUSTER", "SHARDS"}, "-ERR This instance has cluster support disabled\r\n", ""},
		{[]string{"ACL", "WHOAMI"}, "$7\r\ndefault\r\n", ""},
		{[]string{"ACL", "USERS"}, "*1\r\n$7\r\ndefault\r\n", ""},
		{[]string{"ACL", "LIST"}, "*1\r\n$34\r\nuser default on nopass ~* &* +@all\r\n", ""},
		{[]string{"ACL", "GETUSER", "default"}, "*12\r\n$5\r\nflags\r\n…", "%6\r\n$5\r\nflags\r\n…"},
		{[]string{"ACL", "GETUSER", "nosuchuser"}, "$-1\r\n", "_\r\n"},
		{[]string{"ACL", "CAT"}, "*21\r\n…", ""},
		{[]string{"ACL", "DRYRUN", "default", "ping"}, "+OK\r\n", ""},
		{[]string{"ACL", "LOG"}, "*0\r\n", ""},
		{[]string{"ACL", "FOO"}, "-ERR unknown subcommand 'FOO'. Try ACL HELP.\r\n", ""},
		{[]string{"CLIENT", "ID"}, ":…", ""},
		{[]string{"CLIENT", "GETNAME"}, "$-1\r\n", "_\r\n"},
		{[]string{"CLIENT", "SETNAME", "n"}, "+OK\r\n", ""},
		{[]string{"CLIENT", "GETNAME"}, "$1\r\nn\r\n", ""},
		{[]string{"CLIENT", "SETNAME", ""}, "+OK\r\n", ""},
		{[]string{"CLIENT", "GETNAME"}, "$-1\r\n", "_\r\n"},
		{[]string{"CLIENT", "LIST"}, "$…", "=…"},
		{[]string{"CLIENT", "INFO"}, "$…", "=…"},
		{[]string{"CLIENT", "SETINFO", "lib-name", "x"}, "+OK\r\n", ""},
		{[]string{"CLIENT", "KILL", "ID", "999999"}, ":0\r\n", ""},
		{[]string{"CLIENT", "KILL", "127.0.0.1:1"}, "-ERR No such client\r\n", ""},
		{[]string{"COMMAND", "COUNT"}, ":…", ""},
		// The COMMAND family: Redis's entries, sets (flags, categories, tips)
		// and maps (docs) in RESP3, arrays in RESP2 (TestCommandDocsMatchRedis
		// compares all of them with redis-server's).
		{[]string{"COMMAND", "DOCS"}, "*" + ncmd2 + "\r\n$3\r\nacl\r\n*10\r\n…", "%" + ncmd + "\r\n$3\r\nacl\r\n%5\r\n…"},
		{[]string{"COMMAND", "DOCS", "echo"},
			"*2\r\n$4\r\necho\r\n*10\r\n$7\r\nsummary\r\n$21\r\nEcho the given string\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$9\r\narguments\r\n*1\r\n*4\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n$6\r\nstring\r\n",
			"%1\r\n$4\r\necho\r\n%5\r\n$7\r\nsummary\r\n$21\r\nEcho the given string\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n$9\r\narguments\r\n*1\r\n%2\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n$6\r\nstring\r\n"},
		{[]string{"COMMAND", "DOCS", "nosuch"}, "*0\r\n", "%0\r\n"},
		{[]string{"COMMAND"}, "*" + ncmd + "\r\n*10\r\n$3\r\nacl\r\n:-2\r\n*0\r\n…", "*" + ncmd + "\r\n*10\r\n$3\r\nacl\r\n:-2\r\n~0\r\n…"},
		{[]string{"COMMAND", "INFO", "ping"},
			"*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n*1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@connection\r\n*2\r\n$25\r\nrequest_policy:all_shards\r\n$29\r\nresponse_policy:all_succeeded\r\n*0\r\n*0\r\n",
			"*1\r\n*10\r\n$4\r\nping\r\n:-1\r\n~1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n~2\r\n+@fast\r\n+@connection\r\n~2\r\n$25\r\nrequest_policy:all_shards\r\n$29\r\nresponse_policy:all_succeeded\r\n~0\r\n~0\r\n"},
		{[]string{"COMMAND", "INFO", "nosuch"}, "*1\r\n$-1\r\n", "*1\r\n_\r\n"},
		{[]string{"COMMAND", "LIST", "FILTERBY", "PATTERN", "pin*"}, "*1\r\n$4\r\nping\r\n", ""},
		{[]string{"COMMAND", "LIST"}, "*" + ncmd + "\r\n$3\r\nacl\r\n…", ""},
		{[]string{"REPLICAOF", "NO", "ONE"}, "+OK\r\n", ""},
		{[]string{"SLAVEOF", "NO", "ONE"}, "+OK\r\n", ""},
		{[]string{"REPLCONF", "listening-port", "6380"}, "+OK\r\n", ""},
		{[]string{"REPLCONF", "bogus", "1"}, "-ERR Unrecognized REPLCONF option: bogus\r\n", ""},
		{[]string{"PSYNC", "?", "-1"}, "-NOMASTERLINK Can't SYNC while not connected with my master\r\n", ""},
		{[]string{"SYNC"}, "-NOMASTERLINK Can't SYNC while not connected with my master\r\n", ""},
		{[]string{"HELLO"}, "*14\r\n…", "%7\r\n…"},
		{[]string{"TIME"}, "*2\r\n$…", ""},
		{[]string{"SLOWLOG", "GET"}, "*0\r\n", ""},
		{[]string{"SLOWLOG", "LEN"}, ":0\r\n", ""},
		{[]string{"SLOWLOG", "RESET"}, "+OK\r\n", ""},
		{[]string{"LATENCY", "LATEST"}, "*0\r\n", ""},
		{[]string{"LATENCY", "HISTORY", "command"}, "*0\r\n", ""},
		{[]string{"LATENCY", "HISTOGRAM"}, "*0\r\n", "%0\r\n"},
		{[]string{"LATENCY", "RESET"}, ":0\r\n", ""},
		{[]string{"LATENCY", "DOCTOR"}, "$" + strconv.Itoa(len(latencyDoctor)) + "\r\n" + latencyDoctor + "\r\n",
			"=" + strconv.Itoa(len(latencyDoctor)+4) + "\r\ntxt:" + latencyDoctor + "\r\n"},
		{[]string{"LATENCY", "GRAPH", "command"}, "-ERR No samples available for event 'command'\r\n", ""},
		{[]string{"SUBSCRIBE", sentinelHello}, "*3\r\n$9\r\nsubscribe\r\n$18\r\n__sentinel__:hello\r\n:1\r\n", ">3\r\n$9\r\nsubscribe\r\n$18\r\n__sentinel__:hello\r\n:1\r\n"},
		// Subscribed: RESP2 allows only (UN)SUBSCRIBE, PING, QUIT and RESET,
		// and PING answers ["pong", ""]; RESP3 runs every command.
		{[]string{"PING"}, "*2\r\n$4\r\npong\r\n$0\r\n\r\n", "+PONG\r\n"},
		{[]string{"ECHO", "hi"}, "-ERR Can't execute 'echo': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n", "$2\r\nhi\r\n"},
		{[]string{"PUBLISH", "nobody", "x"}, "-ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n", ":0\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "-ERR Can't execute 'client|getname': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n", "_\r\n"},
		{[]string{"SUBSCRIBE", "news", sentinelHello}, "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:2\r\n", ">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:2\r\n"},
		{nil, "*3\r\n$9\r\nsubscribe\r\n$18\r\n__sentinel__:hello\r\n:2\r\n", ">3\r\n$9\r\nsubscribe\r\n$18\r\n__sentinel__:hello\r\n:2\r\n"},
		{[]string{"UNSUBSCRIBE", "news"}, "*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n", ">3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n"},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$18\r\n__sentinel__:hello\r\n:0\r\n", ">3\r\n$11\r\nunsubscribe\r\n$18\r\n__sentinel__:hello\r\n:0\r\n"},
		{[]string{"UNSUBSCRIBE"}, "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n", ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"},
		{[]string{"PUBLISH", sentinelHello, "x"}, ":0\r\n", ""},
		{[]string{"SHUTDOWN", "ABORT"}, "-ERR No shutdown in progress.\r\n", ""},
		// RESET returns to RESP2: what follows answers alike in both runs.
		{[]string{"RESET"}, "+RESET\r\n", ""},
		{[]string{"GET", "k"}, "-ERR replproxy relays replication only; 'get' is not served here (send it to the primary)\r\n", ""},
		{[]string{"QUIT"}, "+OK\r\n", ""}, // last: the connection closes
	}
}

// matchReply reports whether got is want, or starts with it when want ends
// in "…".
func matchReply(got, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "…"); ok {
		return strings.HasPrefix(got, prefix)
	}
	return got == want
}

// TestRepliesBothProtocols runs every command of the proxy's table in RESP2
// and, on another connection, after HELLO 3, and checks each reply as Redis
// writes it in that protocol: maps, nulls, verbatim strings and pushes where
// Redis uses them, everything else alike.
func TestRepliesBothProtocols(t *testing.T) {
	cases := replyCases()
	// Every command the proxy answers is in the table, so that a new one is
	// checked in both protocols too.
	named := map[string]bool{}
	for _, tc := range cases {
		if tc.args != nil {
			named[strings.ToLower(tc.args[0])] = true
		}
	}
	for name := range servedCommands() {
		if !named[name] {
			t.Errorf("command %q has no case in replyCases: add its replies in RESP2 and RESP3", name)
		}
	}
	p := startProxy(t)
	for _, proto := range []int{2, 3} {
		a := adminDial(t, p)
		if proto == 3 {
			a.do("HELLO", "3")
		}
		for _, tc := range cases {
			want := tc.resp2
			if proto == 3 && tc.resp3 != "" {
				want = tc.resp3
			}
			var got string
			if tc.args == nil {
				got = a.reply() // the next reply of the command before
			} else {
				got = a.do(tc.args...)
			}
			if !matchReply(got, want) {
				t.Errorf("RESP%d: %q answered %q, want %q", proto, tc.args, got, want)
			}
		}
	}
	// The verbatim strings hold what the bulk strings hold.
	a2, a3 := adminDial(t, p), adminDial(t, p)
	a3.do("HELLO", "3")
	for _, args := range [][]string{{"INFO", "replication"}, {"CLIENT", "INFO"}} {
		b2, b3 := bulkText(t, a2.do(args...)), bulkText(t, a3.do(args...))
		if args[0] == "CLIENT" {
			// The lines differ in the client's id, address, fd= and resp= only.
			b2, b3 = b2[strings.Index(b2, " name="):strings.LastIndex(b2, " resp=")], b3[strings.Index(b3, " name="):strings.LastIndex(b3, " resp=")]
			b2, b3 = b2[:strings.Index(b2, " age=")], b3[:strings.Index(b3, " age=")]
		}
		if b2 != b3 {
			t.Errorf("%q: RESP2 holds %q, RESP3 %q", args, b2, b3)
		}
	}
}

// bulkText returns the text of a bulk or verbatim reply.
func bulkText(t testing.TB, reply string) string {
	t.Helper()
	head, body, ok := strings.Cut(reply, "\r\n")
	if !ok || len(head) < 2 || (head[0] != '$' && head[0] != '=') {
		t.Fatalf("not a bulk or verbatim string: %q", reply)
	}
	n := atoiT(t, head[1:])
	if len(body) != n+2 {
		t.Fatalf("reply %q: %d bytes, header says %d", reply, len(body), n)
	}
	body = body[:n]
	if head[0] == '=' {
		format, text, ok := strings.Cut(body, ":")
		if !ok || format != "txt" {
			t.Fatalf("verbatim string of format %q: %q", format, reply)
		}
		body = text
	}
	return body
}

// respShape returns the types of a raw RESP2/RESP3 reply: each element's
// type byte, aggregates with their length and elements, scalars without
// their value ("%1[$ $]" for a map of one pair of bulk strings).
func respShape(t testing.TB, reply string) string {
	t.Helper()
	var b strings.Builder
	rest := respShapeOf(t, reply, &b)
	if rest != "" {
		t.Fatalf("reply %q: %q left over", reply, rest)
	}
	return b.String()
}

func respShapeOf(t testing.TB, s string, b *strings.Builder) string {
	t.Helper()
	head, rest, ok := strings.Cut(s, "\r\n")
	if !ok || head == "" {
		t.Fatalf("bad reply %q", s)
	}
	typ := head[0]
	switch typ {
	case '$', '=', '!':
		n := atoiT(t, head[1:])
		b.WriteByte(typ)
		if n < 0 {
			b.WriteString("-1")
			return rest
		}
		return rest[n+2:]
	case '*', '%', '~', '>':
		n := atoiT(t, head[1:])
		fmt.Fprintf(b, "%c%d[", typ, n)
		if typ == '%' {
			n *= 2
		}
		for i := range max(n, 0) {
			if i > 0 {
				b.WriteByte(' ')
			}
			rest = respShapeOf(t, rest, b)
		}
		b.WriteByte(']')
		return rest
	}
	b.WriteByte(typ)
	return rest
}

// TestHelloThenPSync checks that a replica that said HELLO 3 before its
// handshake receives what one that did not receives, byte for byte: the
// REPLCONF replies, +FULLRESYNC, the RDB and the stream after it. Redis's
// replicas speak RESP2, and the replication side is raw bytes, never replies.
func TestHelloThenPSync(t *testing.T) {
	primary, pc := startPrimary(t)
	p, _ := startProxyOf(t, primary)
	pc.MustDo(t, "SET", "before", "1")
	waitOffsetsEqual(t, pc, redistest.Dial(t, p.AddrString()))

	type received struct {
		handshake []string // every line up to +FULLRESYNC's replid and offset
		rdb       []byte
	}
	syncOne := func(hello bool) (*rawReplica, received) {
		r := newRawReplica(t, p)
		var got received
		if hello {
			if err := r.send("HELLO", "3"); err != nil {
				t.Fatal(err)
			}
			// HELLO's own reply is RESP3: a map, read whole and not compared.
			a := &adminConn{t: t, conn: r.conn, rd: r.br}
			if reply := a.reply(); !strings.HasPrefix(reply, "%7\r\n") {
				t.Fatalf("HELLO 3: %q", reply)
			}
		}
		for _, cmd := range [][]string{{"REPLCONF", "listening-port", "6380"}, {"REPLCONF", "capa", "psync2"}, {"PING"}} {
			if err := r.send(cmd...); err != nil {
				t.Fatal(err)
			}
			line, err := r.readLine()
			if err != nil {
				t.Fatal(err)
			}
			got.handshake = append(got.handshake, line)
		}
		line, err := r.psync("?", "-1")
		if err != nil {
			t.Fatal(err)
		}
		got.handshake = append(got.handshake, line)
		if got.rdb, err = r.payload(); err != nil {
			t.Fatal(err)
		}
		return r, got
	}
	plain, want := syncOne(false)
	resp3, got := syncOne(true)
	if strings.Join(got.handshake, "|") != strings.Join(want.handshake, "|") || !bytes.Equal(got.rdb, want.rdb) {
		t.Fatalf("after HELLO 3 the replica received %q and an RDB of %d bytes; without HELLO %q and %d bytes",
			got.handshake, len(got.rdb), want.handshake, len(want.rdb))
	}
	// The stream after the RDB: the same bytes on both, from the same offset.
	pc.MustDo(t, "SET", "after", strings.Repeat("v", 100))
	pc.MustDo(t, "INCR", "n")
	writes := string(wire.AppendCommand(wire.AppendCommand(nil, "SET", "after", strings.Repeat("v", 100)), "INCR", "n"))
	var streams []string
	for _, r := range []*rawReplica{plain, resp3} {
		var buf []byte
		chunk := make([]byte, 4096)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(string(buf), writes) {
			r.conn.SetReadDeadline(deadline)
			n, err := r.br.Read(chunk)
			buf = append(buf, chunk[:n]...)
			if err != nil {
				t.Fatalf("reading the stream: %v after %q", err, buf)
			}
		}
		streams = append(streams, string(buf[:strings.Index(string(buf), writes)+len(writes)]))
	}
	if streams[0] != streams[1] {
		t.Errorf("the stream after HELLO 3 is %q; without HELLO %q", streams[1], streams[0])
	}
}

package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/commanddocs"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The differential harness: the command sequences of diffTable (in
// differential_table_integration_test.go) run on the proxy and on a real
// redis-server 7.0 set up alike (the same users, the same primary that is
// down, the same password or aclfile), each step on a connection of its
// own to each, and every reply compared byte for byte, reply by reply.
// Only what differs by nature is normalised first (byNature, one place);
// every other difference fails the test unless the command is one of the
// intended differences (intendedDiffs), which docs/clients.md lists with
// its reason and TestIntendedDifferencesDocumented holds to this list.
// FuzzDifferential (fuzz_differential_test.go) mutates the sequences.

// The two sides of a comparison.
const (
	sideProxy = 0
	sideRedis = 1
)

var sideNames = [2]string{"proxy", "redis-server"}

// diffPassword is the default user's password in the locked setup; the
// other users' passwords are their names followed by "-secret".
const diffPassword = "default-secret"

// diffUsers are the ACL users both sides have, as ACL SETUSER rules: the
// four of the documentation, and two that need a part of a container or a
// few channels.
var diffUsers = [][]string{
	{"replica", "on", ">replica-secret", "+psync", "+replconf", "+ping"},
	{"sentinel", "on", ">sentinel-secret", "allchannels", "+multi", "+slaveof", "+ping", "+exec", "+subscribe",
		"+config|rewrite", "+role", "+publish", "+info", "+client|setname", "+client|kill", "+script|kill"},
	{"monitor", "on", ">monitor-secret", "+info", "+ping"},
	{"admin", "on", ">admin-secret", "~*", "&*", "+@all"},
	{"setname", "on", ">setname-secret", "+client|setname", "+client|getname"},
	{"subs", "on", ">subs-secret", "resetchannels", "&news*", "+subscribe", "+unsubscribe", "+publish", "+ping"},
}

// A diffSetup is one way both sides are configured: "open" (the default
// user needs no password; the users come from an aclfile, so ACL LOAD and
// SAVE work) or "locked" (requirepass, users from the configuration). In
// both the primary is at a port where nothing listens, so that both are
// replicas whose link is down.
type diffSetup struct {
	name     string
	locked   bool
	addr     [2]string
	aclfile  [2]string // "" in the locked setup
	proxy    *testProxy
	controls [2]*diffConn // control's
	// redisDirectives are the names redis-server's CONFIG GET * answers.
	redisDirectives map[string]bool
	primaryPort     string // where the primary of both would be
}

// diffEnv is the two setups, started once per test or fuzz process.
type diffEnv struct {
	setups map[string]*diffSetup
}

// startDiffEnv starts a proxy and a redis-server for each setup.
func startDiffEnv(t testing.TB) *diffEnv {
	t.Helper()
	redistest.Require(t)
	dead := strconv.Itoa(redistest.FreePort(t)) // nothing listens there: a primary that is down
	env := &diffEnv{setups: map[string]*diffSetup{}}
	t.Cleanup(func() {
		for _, su := range env.setups {
			for _, c := range su.controls {
				if c != nil {
					c.close()
				}
			}
		}
	})
	for _, locked := range []bool{false, true} {
		su := &diffSetup{name: "open", locked: locked, primaryPort: dead}
		if locked {
			su.name = "locked"
		}
		proxyArgs := []string{"--replicaof", "127.0.0.1", dead, "--loglevel", "notice", "--repl-log-size", "0"}
		redisArgs := []string{"--replicaof", "127.0.0.1", dead}
		if locked {
			for _, u := range diffUsers {
				proxyArgs = append(proxyArgs, append([]string{"--user"}, u...)...)
			}
			proxyArgs = append(proxyArgs, "--requirepass", diffPassword)
			redisArgs = append(redisArgs, "--requirepass", diffPassword)
		} else {
			for side := range su.aclfile {
				su.aclfile[side] = filepath.Join(t.TempDir(), "users.acl")
				writeDiffACLFile(t, su.aclfile[side])
			}
			proxyArgs = append(proxyArgs, "--aclfile", su.aclfile[sideProxy])
			redisArgs = append(redisArgs, "--aclfile", su.aclfile[sideRedis])
		}
		su.proxy = newTestProxy(t, proxySetup{args: proxyArgs, level: hclog.Error, quiet: true})
		su.addr[sideProxy] = su.proxy.AddrString()
		su.addr[sideRedis] = redistest.StartServer(t, redisArgs...).Addr()
		c := su.control(t, sideRedis)
		if locked {
			for _, u := range diffUsers {
				c.mustDo(t, "+OK\r\n", append([]string{"ACL", "SETUSER"}, u...)...)
			}
		}
		pairs, err := commandList(c, "CONFIG", "GET", "*")
		if err != nil {
			t.Fatal(err)
		}
		su.redisDirectives = map[string]bool{}
		for i := 0; i < len(pairs); i += 2 {
			su.redisDirectives[pairs[i]] = true
		}
		su.control(t, sideProxy)
		env.setups[su.name] = su
	}
	return env
}

// writeDiffACLFile writes the open setup's aclfile: the users, and the
// default user open.
func writeDiffACLFile(t testing.TB, path string) {
	t.Helper()
	text := "user default on nopass ~* &* +@all\n"
	for _, u := range diffUsers {
		text += "user " + strings.Join(u, " ") + "\n"
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// diffConn is one raw connection of the harness to one side.
type diffConn struct {
	conn   net.Conn
	rd     *bufio.Reader
	closed bool
}

func dialDiff(t testing.TB, addr string) *diffConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &diffConn{conn: conn, rd: bufio.NewReader(conn)}
}

func (d *diffConn) close() { d.conn.Close() }

// diffIOTimeout bounds each read and write of the harness: a side that
// does not answer fails the step.
const diffIOTimeout = 10 * time.Second

// readReply reads one whole RESP2 or RESP3 reply, as raw text.
func (d *diffConn) readReply() (string, error) {
	d.conn.SetReadDeadline(time.Now().Add(diffIOTimeout))
	line, err := d.rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("bad reply line %q", line)
	}
	switch line[0] {
	case '$', '=', '!':
		n, err := strconv.Atoi(line[1 : len(line)-2])
		if err != nil {
			return "", fmt.Errorf("bad length in %q", line)
		}
		if n < 0 {
			return line, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(d.rd, buf); err != nil {
			return "", err
		}
		return line + string(buf), nil
	case '*', '%', '~', '>', '|':
		n, err := strconv.Atoi(line[1 : len(line)-2])
		if err != nil {
			return "", fmt.Errorf("bad length in %q", line)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		out := line
		for range max(n, 0) {
			e, err := d.readReply()
			if err != nil {
				return "", err
			}
			out += e
		}
		return out, nil
	}
	return line, nil
}

// mustDo sends args and fails the test unless the reply is want.
func (d *diffConn) mustDo(t testing.TB, want string, args ...string) {
	t.Helper()
	d.conn.SetWriteDeadline(time.Now().Add(diffIOTimeout))
	if _, err := d.conn.Write(wire.AppendCommand(nil, args...)); err != nil {
		t.Fatal(err)
	}
	got, err := d.readReply()
	if err != nil || got != want {
		t.Fatalf("%q: %q %v, want %q", args, got, err, want)
	}
}

// control returns the control connection to one side of su, authenticated
// as the default user: what sets the side up and resets it between
// sequences. It stays open from one sequence to the next, so that every
// sequence meets it in CLIENT LIST on both sides; one a sequence closed
// (CLIENT KILL) is opened again. It is closed with the environment
// (startDiffEnv), never with the test that opened it: a fuzz seed's end
// would close it while the next seed runs, and a side that had not yet
// seen the close would count it in that seed's CLIENT KILL.
func (su *diffSetup) control(t testing.TB, side int) *diffConn {
	t.Helper()
	if c := su.controls[side]; c != nil {
		if r, err := commandRaw(c, "PING"); err == nil && r == "+PONG\r\n" {
			return c
		}
		c.close()
	}
	c := dialDiff(t, su.addr[side])
	if su.locked {
		c.mustDo(t, "+OK\r\n", "AUTH", diffPassword)
	}
	su.controls[side] = c
	return c
}

// barrier follows every step but HELLO: HELLO 0 has exactly one reply
// whatever the client's state (HELLO runs before AUTH and past any ACL;
// NOPROTO for version 0, or the subscribed context's refusal), which no
// other command answers, so the step's replies are those read before it,
// zero (REPLCONF ACK) or several (SUBSCRIBE a b) alike.
var barrier = []string{"HELLO", "0"}

// barrierReplies are the barrier's possible replies.
var barrierReplies = []string{
	"-NOPROTO unsupported protocol version\r\n",
	"-ERR Can't execute 'hello': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
}

// closedReply stands for a connection the server closed.
const closedReply = "<closed>"

// exchange sends one step and returns its replies, closedReply last when
// the server closed the connection.
func (d *diffConn) exchange(args []string) ([]string, error) {
	if d.closed {
		return []string{closedReply}, nil
	}
	withBarrier := !wire.EqualFold(args[0], "hello")
	b := wire.AppendCommand(nil, args...)
	if withBarrier {
		b = wire.AppendCommand(b, barrier...)
	}
	d.conn.SetWriteDeadline(time.Now().Add(diffIOTimeout))
	if _, err := d.conn.Write(b); err != nil && !isClosed(err) {
		return nil, err
	}
	var replies []string
	for {
		r, err := d.readReply()
		switch {
		case isClosed(err):
			d.closed = true
			return append(replies, closedReply), nil
		case err != nil:
			return replies, err
		case withBarrier && slices.Contains(barrierReplies, r):
			return replies, nil
		}
		replies = append(replies, r)
		if !withBarrier {
			return replies, nil
		}
	}
}

// isClosed reports whether err means the server closed the connection.
func isClosed(err error) bool {
	var op *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.As(err, &op) && !op.Timeout()
}

// A diffSeq is one sequence of the table: steps run in order in one setup,
// each on connection 1 unless its first word is "@2" (a second
// connection). A step's words may name the connection's client id ($ID,
// $ID2 for the second's, once it asked CLIENT ID), the address the server
// sees for a connection ($ADDR, $ADDR2), the port of the primary that is
// down ($PRIMARYPORT), or be an action of the harness: "!rm-aclfile"
// removes both sides' aclfiles (the reset writes them again),
// "!reconnect2" closes the second connection (the next step on it opens a
// new one).
type diffSeq struct {
	name  string
	setup string // "open" or "locked"
	steps [][]string
}

// A diffResult is what one step got from both sides, as compared.
type diffResult struct {
	args     []string
	replies  [2][]string // raw
	intended string      // the intended difference that allowed a difference, if any
	err      string      // why the step failed, "" when it passed
}

// run runs seq on both sides of env's setup and compares every step; the
// setup is reset after it. With stopOnDivergence it ends after a step
// whose difference may leave the two servers in different states
// (diverges).
func (env *diffEnv) run(t testing.TB, seq diffSeq, stopOnDivergence bool) []diffResult {
	t.Helper()
	su := env.setups[seq.setup]
	if su == nil {
		t.Fatalf("sequence %s: no setup %q", seq.name, seq.setup)
	}
	defer su.reset(t)
	var conns [2][2]*diffConn // [connection][side]
	ids := [2][2]string{}     // the client id of each, per side
	addrs := [2][2]string{}   // the address each side sees for each
	open := func(n int) {
		if conns[n][0] != nil {
			return
		}
		for side := range 2 {
			c := dialDiff(t, su.addr[side])
			conns[n][side] = c
			ids[n][side] = "0"
			addrs[n][side] = c.conn.LocalAddr().String()
		}
	}
	defer func() {
		for _, pair := range conns {
			for _, c := range pair {
				if c != nil {
					c.close()
				}
			}
		}
	}()
	var results []diffResult
	for _, step := range seq.steps {
		if len(step) == 0 {
			continue
		}
		switch step[0] {
		case "!rm-aclfile":
			for _, f := range su.aclfile {
				os.Remove(f)
			}
			continue
		case "!reconnect2":
			for side, c := range conns[1] {
				if c != nil {
					c.close()
					conns[1][side] = nil
				}
			}
			continue
		}
		n := 0
		if step[0] == "@2" {
			n, step = 1, step[1:]
			if len(step) == 0 {
				continue
			}
		}
		open(n)
		res := diffResult{args: step}
		for side := range 2 {
			args := make([]string, len(step))
			for i, a := range step {
				a = strings.ReplaceAll(a, "$ID2", ids[1][side])
				a = strings.ReplaceAll(a, "$ID", ids[0][side])
				a = strings.ReplaceAll(a, "$ADDR2", addrs[1][side])
				a = strings.ReplaceAll(a, "$ADDR", addrs[0][side])
				a = strings.ReplaceAll(a, "$PRIMARYPORT", su.primaryPort)
				args[i] = a
			}
			replies, err := conns[n][side].exchange(args)
			if err != nil {
				res.err = fmt.Sprintf("%s: %v", sideNames[side], err)
			}
			// The placeholders' values differ by nature: a reply that
			// quotes one (an error naming an address or an id) names the
			// placeholder instead.
			for i, r := range replies {
				if r != "" && (r[0] == '-' || r[0] == '+') {
					for c, name := range []string{"", "2"} {
						if addrs[c][side] != "" {
							r = strings.ReplaceAll(r, addrs[c][side], "$ADDR"+name)
						}
						if ids[c][side] != "" && ids[c][side] != "0" {
							r = strings.ReplaceAll(r, "'"+ids[c][side]+"'", "'$ID"+name+"'")
						}
					}
					replies[i] = r
				}
			}
			res.replies[side] = replies
		}
		var d *intendedDiff
		if res.err == "" {
			d, res.err = compareStep(step, res.replies, su)
		}
		if d != nil {
			res.intended = d.id
		}
		results = append(results, res)
		if d != nil && d.flags&diverges != 0 && stopOnDivergence {
			break
		}
		// Learn the client ids once a connection may ask (after AUTH).
		for side := range 2 {
			if ids[n][side] == "0" && wire.EqualFold(step[0], "client") && len(step) == 2 && wire.EqualFold(step[1], "id") &&
				len(res.replies[side]) == 1 && strings.HasPrefix(res.replies[side][0], ":") {
				ids[n][side] = strings.TrimSpace(res.replies[side][0][1:])
			}
		}
	}
	return results
}

// reset brings both sides of su back to how they started, for the next
// sequence: the sequence's connections gone, the users as diffUsers says
// (others deleted), the ACL LOG empty, the aclfile written again, the
// directives a sequence may change at their values.
func (su *diffSetup) reset(t testing.TB) {
	t.Helper()
	for side := range 2 {
		if su.aclfile[side] != "" {
			writeDiffACLFile(t, su.aclfile[side])
		}
		c := su.control(t, side)
		def := []string{"ACL", "SETUSER", "default", "reset", "on", "nopass", "~*", "&*", "+@all"}
		if su.locked {
			def[5] = ">" + diffPassword
		}
		c.mustDo(t, "+OK\r\n", def...)
		users, err := commandList(c, "ACL", "USERS")
		if err != nil {
			t.Fatal(err)
		}
		base := map[string]bool{"default": true}
		for _, u := range diffUsers {
			base[u[0]] = true
			c.mustDo(t, "+OK\r\n", append([]string{"ACL", "SETUSER", u[0], "reset"}, u[1:]...)...)
		}
		for _, u := range users {
			if !base[u] {
				c.mustDo(t, ":1\r\n", "ACL", "DELUSER", u)
			}
		}
		c.mustDo(t, "+OK\r\n", "ACL", "LOG", "RESET")
		c.mustDo(t, "+OK\r\n", "SLOWLOG", "RESET")
		for _, kv := range diffDirectives {
			c.mustDo(t, "+OK\r\n", "CONFIG", "SET", kv[0], kv[1])
		}
		// Wait until the sequence's connections are gone: the next one's
		// CLIENT LIST must show the same clients on both sides (this one
		// alone, whose last command is the same INFO on both).
		redistest.WaitFor(t, 10*time.Second, sideNames[side]+"'s clients of the last sequence gone", func() bool {
			text, err := commandText(c, "INFO", "clients")
			return err == nil && strings.Contains(text, "connected_clients:1\r\n")
		})
	}
}

// diffDirectives are the directives the table's sequences may change, with
// the values both sides start with.
var diffDirectives = [][2]string{
	{"repl-timeout", "60"},
	{"repl-backlog-size", "1mb"},
	{"maxmemory", "0"},
}

// commandList sends args and returns the array of bulk strings it answers.
func commandList(c *diffConn, args ...string) ([]string, error) {
	text, err := commandRaw(c, args...)
	if err != nil {
		return nil, err
	}
	v, _, err := commanddocs.Parse([]byte(text))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range v.Elems {
		out = append(out, e.Str)
	}
	return out, nil
}

// commandText sends args and returns the text of its bulk reply.
func commandText(c *diffConn, args ...string) (string, error) {
	text, err := commandRaw(c, args...)
	if err != nil {
		return "", err
	}
	v, _, err := commanddocs.Parse([]byte(text))
	return v.Str, err
}

func commandRaw(c *diffConn, args ...string) (string, error) {
	c.conn.SetWriteDeadline(time.Now().Add(diffIOTimeout))
	if _, err := c.conn.Write(wire.AppendCommand(nil, args...)); err != nil {
		return "", err
	}
	return c.readReply()
}

// compareStep compares one step's replies: equal once normalised by
// byNature, or allowed by an intended difference whose check passes. It
// returns the intended difference that allowed a difference (nil for
// none) and why the step fails ("" when it passes).
func compareStep(args []string, replies [2][]string, su *diffSetup) (intended *intendedDiff, failure string) {
	var norm, messages [2]string
	for side := range 2 {
		var b strings.Builder
		rs := replies[side]
		// Messages published to the connection before the step's replies
		// are compared as they are, the replies as the step's.
		for len(rs) > 0 && isMessage(rs[0]) {
			messages[side] += rs[0]
			rs = rs[1:]
		}
		for _, r := range rs {
			b.WriteString(byNature(args, r, su, side))
		}
		norm[side] = b.String()
	}
	if messages[sideProxy] != messages[sideRedis] {
		return nil, "the messages published before the replies differ (" + firstDifference(messages[sideProxy], messages[sideRedis]) + ")"
	}
	if wire.EqualFold(args[0], "info") && len(replies[sideProxy]) == 1 && len(replies[sideRedis]) == 1 {
		norm[sideProxy], norm[sideRedis] = infoCommon(norm[sideProxy], norm[sideRedis])
	}
	if norm[sideProxy] == norm[sideRedis] {
		return nil, ""
	}
	where := firstDifference(norm[sideProxy], norm[sideRedis])
	for i := range intendedDiffs {
		d := &intendedDiffs[i]
		if !d.matches(args) {
			continue
		}
		if d.agree(norm[sideProxy], norm[sideRedis], su) {
			return d, ""
		}
		return nil, fmt.Sprintf("intended difference %s does not allow it (%s)", d.id, where)
	}
	return nil, "the replies differ (" + where + ")"
}

// isMessage reports whether a reply is a message published to a channel
// the connection subscribed to, in RESP2 or RESP3.
func isMessage(r string) bool {
	return strings.HasPrefix(r[min(1, len(r)):], "3\r\n$7\r\nmessage\r\n") && (r[0] == '*' || r[0] == '>')
}

// firstDifference describes where two normalised replies part: the first
// line that differs in each.
func firstDifference(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: proxy %.200q, redis-server %.200q", i+1, x, y)
		}
	}
	return "same lines"
}

// byNature normalises what differs between two servers by nature, and only
// that; docs/clients.md lists the same:
//
//   - client ids: CLIENT ID's answer, HELLO's id, id= in CLIENT LIST and
//     INFO lines;
//   - in CLIENT LIST and CLIENT INFO lines, the fields of the connection
//     and of the server's own buffers and memory (addr, laddr, fd, age,
//     idle, qbuf, qbuf-free, argv-mem, multi-mem, rbs, rbp, obl, oll,
//     omem, tot-mem, events); name, flags, db, sub, psub, ssub, multi,
//     cmd, user, redir and resp are compared;
//   - ACL LOG's age-seconds and client-info;
//   - TIME's clock, ACL GENPASS's random digits;
//   - each side's own paths and ports: its aclfile, its dir, its port;
//   - INFO: values are compared by their form only (an integer, a decimal,
//     a size such as 1.50M, a 40-digit hex id, or text), sections and
//     fields only where both have them (infoShape).
func byNature(args []string, reply string, su *diffSetup, side int) string {
	name := wire.Lower(args[0])
	sub := ""
	if len(args) > 1 {
		sub = wire.Lower(args[1])
	}
	if su.aclfile[side] != "" && (reply[0] == '-' || reply[0] == '+') {
		reply = strings.ReplaceAll(reply, su.aclfile[side], "<aclfile>")
	}
	switch {
	case name == "client" && sub == "id" && strings.HasPrefix(reply, ":"):
		return ":<id>\r\n"
	case name == "hello":
		return helloID.ReplaceAllString(reply, "${1}:<id>\r\n")
	case name == "client" && (sub == "list" || sub == "info") && (reply[0] == '$' || reply[0] == '='):
		return mapBulk(reply, maskClientLines)
	case name == "acl" && sub == "log":
		return maskVolatile(reply)
	case name == "time" && reply[0] == '*':
		return "<time>"
	case name == "acl" && sub == "genpass" && reply[0] == '$':
		return hexDigits.ReplaceAllString(reply, "${1}<hex>")
	case name == "config" && sub == "get":
		return configValues.ReplaceAllString(reply, "${1}$$7\r\n<value>\r\n")
	}
	return reply
}

var (
	helloID   = regexp.MustCompile(`(\$2\r\nid\r\n):\d+\r\n`)
	hexDigits = regexp.MustCompile(`(\$\d+\r\n)[0-9a-f]+`)
	// configValues are the values of the directives that name a side's
	// own port or paths.
	configValues = regexp.MustCompile(`(\$\d+\r\n(?:port|dir|aclfile|logfile|pidfile|bind)\r\n)\$\d+\r\n[^\r]*\r\n`)
)

// mapBulk applies f to the text of a bulk or verbatim string reply and
// writes it back as the same kind of reply.
func mapBulk(reply string, f func(string) string) string {
	head, body, ok := strings.Cut(reply, "\r\n")
	if !ok || len(body) < 2 {
		return reply
	}
	text := body[:len(body)-2]
	if head[0] == '=' {
		format, rest, _ := strings.Cut(text, ":")
		text = rest
		return string(wire.RESP3.AppendVerbatim(nil, format, f(text)))
	}
	return string(wire.AppendBulkString(nil, f(text)))
}

// clientLineMasked are the CLIENT LIST fields that differ by nature.
var clientLineMasked = []string{"id", "addr", "laddr", "fd", "age", "idle", "qbuf", "qbuf-free", "argv-mem",
	"multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem", "events"}

// maskClientLines masks clientLineMasked in every CLIENT LIST line.
func maskClientLines(text string) string {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		fields := strings.Split(line, " ")
		for j, f := range fields {
			if k, _, ok := strings.Cut(f, "="); ok && slices.Contains(clientLineMasked, k) {
				fields[j] = k + "=*"
			}
		}
		lines[i] = strings.Join(fields, " ")
	}
	return strings.Join(lines, "\n")
}

// infoForms classify an INFO value by its form.
var infoForms = []struct {
	form string
	re   *regexp.Regexp
}{
	{"int", regexp.MustCompile(`^-?\d+$`)},
	{"decimal", regexp.MustCompile(`^-?\d+\.\d+$`)},
	{"size", regexp.MustCompile(`^\d+(\.\d+)?[BKMGTP]$`)},
	{"replid", regexp.MustCompile(`^[0-9a-f]{40}$`)},
}

// infoCommon is two INFO replies as the harness compares them: the
// sections both have, in each one's order, and in each the fields both
// have, each with the form of its value (an integer, a decimal, a size
// such as 1.50M, a 40-digit hex id, or text). A section or field only one
// side has is not compared: Redis's are what the proxy does not share, the
// proxy's its own (docs/metrics.md).
func infoCommon(proxy, redis string) (string, string) {
	type field struct{ section, key, value string }
	parse := func(reply string) (fields []field, ok bool) {
		head, body, ok := strings.Cut(reply, "\r\n")
		if !ok || head == "" || head[0] != '$' && head[0] != '=' || !strings.HasSuffix(body, "\r\n") {
			return nil, false
		}
		text := strings.TrimSuffix(body, "\r\n")
		if head[0] == '=' {
			_, text, _ = strings.Cut(text, ":")
		}
		section := ""
		for _, line := range strings.Split(text, "\r\n") {
			if name, ok := strings.CutPrefix(line, "# "); ok {
				section = name
				fields = append(fields, field{section: section})
			} else if k, v, ok := strings.Cut(line, ":"); ok {
				fields = append(fields, field{section, k, v})
			}
		}
		return fields, true
	}
	pf, pok := parse(proxy)
	rf, rok := parse(redis)
	if !pok || !rok {
		return proxy, redis
	}
	has := func(fields []field, f field) bool {
		return slices.ContainsFunc(fields, func(g field) bool { return g.section == f.section && g.key == f.key })
	}
	sections := func(fields []field) []string {
		var out []string
		for _, f := range fields {
			if f.key == "" {
				out = append(out, f.section)
			}
		}
		return out
	}
	rsections := sections(rf)
	shape := func(mine, theirs []field, proxy bool) string {
		var b strings.Builder
		for _, f := range mine {
			if !has(theirs, f) {
				// The proxy's own fields, in a section Redis printed too,
				// and its own sections, are its own by name.
				if proxy && (f.key == "" && !slices.Contains(infoOwnSections, f.section) ||
					f.key != "" && slices.Contains(rsections, f.section) && !slices.Contains(infoOwnFields[f.section], f.key) && !infoSlaveLine.MatchString(f.key)) {
					b.WriteString("not redis-server's, nor the proxy's own: " + f.section + " " + f.key + "\n")
				}
				continue
			}
			if f.key == "" {
				b.WriteString("# " + f.section + "\n")
				continue
			}
			form := "text"
			for _, x := range infoForms {
				if x.re.MatchString(f.value) {
					form = x.form
					break
				}
			}
			b.WriteString(f.key + ":<" + form + ">\n")
		}
		return b.String()
	}
	return shape(pf, rf, true), shape(rf, pf, false)
}

// infoOwnSections are the proxy's own sections of INFO (docs/metrics.md).
var infoOwnSections = []string{"Proxy", "Links"}

// infoOwnFields are the proxy's own fields in Redis's sections of INFO
// (docs/metrics.md): any other field the proxy has there must be Redis's,
// by its name.
var infoOwnFields = map[string][]string{
	"Server": {"replproxy_version", "go_version"},
	"Memory": {"mem_counted_for_evict", "mem_over_maxmemory", "mem_snapshots", "mem_snapshots_on_disk", "mem_free_blocks",
		"mem_free_blocks_count", "mem_runtime", "mem_repl_log_index", "mem_link_compression", "go_heap_alloc", "go_heap_sys",
		"go_gc_cycles", "go_memory_limit"},
	"Persistence": {"repl_log_enabled", "repl_snapshot_on_disk", "repl_snapshot_stream_since"},
	// acl_access_denied_* and client_*_limit_disconnections are Redis
	// 7.2's; evicted_* count the snapshots evicted.
	"Stats": {"evicted_snapshots", "evicted_bytes", "client_query_buffer_limit_disconnections", "client_output_buffer_limit_disconnections",
		"acl_access_denied_auth", "acl_access_denied_cmd", "acl_access_denied_key", "acl_access_denied_channel"},
}

// infoSlaveLine is a replica's line in INFO replication, Redis's own.
var infoSlaveLine = regexp.MustCompile(`^slave\d+$`)

// An intendedDiff is a difference from redis-server 7.0 the proxy makes on
// purpose: for the commands pattern matches, a difference passes when
// agree says so. docs/clients.md lists every one, with the same id and
// pattern, and its reason (TestIntendedDifferencesDocumented).
type intendedDiff struct {
	id      string
	pattern string // the command's words; see matchWords
	agree   func(proxy, redis string, su *diffSetup) bool
	flags   diffFlags
}

// diffFlags say more of an intended difference.
type diffFlags uint8

const (
	// byChance: whether the two differ depends on a hash seed, so a run
	// may meet none (TestDifferential does not ask for one).
	byChance diffFlags = 1 << iota
	// diverges: Redis may run what the proxy refuses (a command or
	// subcommand the proxy does not serve), so that the two servers'
	// states may differ after it: the table's sequences are written so
	// that it does not matter, but a mutated one stops there
	// (FuzzDifferential).
	diverges
)

// matches reports whether args are a command of d's pattern.
func (d intendedDiff) matches(args []string) bool {
	return matchWords(strings.Fields(d.pattern), args, "")
}

// matchWords matches args against a pattern's words: a word matches
// itself in any case (ASCII letters), "*" any one argument, "…" any
// number of them; "<unserved>" is a command the proxy does not serve,
// "<unserved-sub>" a Redis 7.0 subcommand it does not serve of the
// command before it (prev), "<container>" a command with subcommands, and
// "<nul>" an argument with a NUL byte.
func matchWords(pattern, args []string, prev string) bool {
	if len(pattern) == 0 {
		return len(args) == 0
	}
	if pattern[0] == "…" {
		for i := 0; i <= len(args); i++ {
			if matchWords(pattern[1:], args[i:], "") {
				return true
			}
		}
		return false
	}
	if len(args) == 0 {
		return false
	}
	ok := false
	switch p := pattern[0]; p {
	case "*":
		ok = true
	case "<unserved>":
		_, served := servedCommands()[wire.Lower(args[0])]
		ok = !served
	case "<unserved-sub>":
		ok = slices.ContainsFunc(unservedSubcommands[wire.Lower(prev)], func(s string) bool { return wire.EqualFold(args[0], s) })
	case "<nul>":
		ok = strings.IndexByte(args[0], 0) >= 0
	case "<container>":
		ok = servedCommands()[wire.Lower(args[0])].subs != nil
	default:
		ok = wire.EqualFold(args[0], p)
	}
	return ok && matchWords(pattern[1:], args[1:], args[0])
}

// unservedSubcommands are Redis 7.0's subcommands the proxy does not serve
// (commands.go's servedSubcommands says why).
var unservedSubcommands = map[string][]string{
	"client":  {"caching", "getredir", "no-evict", "pause", "reply", "tracking", "trackinginfo", "unblock", "unpause"},
	"command": {"getkeys", "getkeysandflags"},
}

// Checks an intended difference may make of the proxy's reply.
func proxyStarts(prefix string) func(proxy, redis string, su *diffSetup) bool {
	return func(proxy, _ string, _ *diffSetup) bool { return strings.HasPrefix(proxy, prefix) }
}

func anyReply(string, string, *diffSetup) bool { return true }

func sameReplyKind(proxy, redis string, _ *diffSetup) bool {
	return proxy != "" && redis != "" && proxy[0] == redis[0]
}

// intendedDiffs are the differences from redis-server 7.0 the proxy makes
// on purpose, first match first.
var intendedDiffs = []intendedDiff{
	{"unserved-command", "<unserved> …", proxyStarts("-ERR replproxy relays replication only; '"), diverges},
	{"unserved-subcommand", "CLIENT <unserved-sub> …", proxyStarts("-ERR unknown subcommand '"), diverges},
	{"unserved-subcommand", "COMMAND <unserved-sub> …", proxyStarts("-ERR unknown subcommand '"), diverges},
	{"nul-in-subcommand", "<container> <nul> …", proxyStarts("-ERR unknown subcommand '"), byChance | diverges},
	{"client-setinfo", "CLIENT SETINFO …", anyReply, 0},
	{"help-served-only", "CLIENT HELP", proxyStarts("*"), 0},
	{"help-served-only", "COMMAND HELP", proxyStarts("*"), 0},
	{"command-served-only", "COMMAND …", commandServedOnly, 0},
	{"role-replicas", "ROLE", roleWithReplicas, 0},
	{"config-get-directives", "CONFIG GET …", configGetAgree, 0},
	{"config-set-replicaof", "CONFIG SET … REPLICAOF * …", anyReply, 0},
	{"config-set-replicaof", "CONFIG SET … SLAVEOF * …", anyReply, 0},
	{"config-set-directives", "CONFIG SET …", proxyStarts("-ERR Unknown option or number of arguments for CONFIG SET - '"), 0},
	{"acl-rules-order", "ACL LIST", rulesAsSets, byChance},
	{"acl-rules-order", "ACL GETUSER …", rulesAsSets, byChance},
	{"acl-cat-order", "ACL CAT *", sameElements, byChance},
	{"latency-doctor", "LATENCY DOCTOR", sameReplyKind, 0},
	{"slowlog-empty", "SLOWLOG GET …", func(proxy, _ string, _ *diffSetup) bool { return proxy == "*0\r\n" }, byChance},
	{"slowlog-empty", "SLOWLOG LEN", func(proxy, _ string, _ *diffSetup) bool { return proxy == ":0\r\n" }, byChance},
	{"latency-histogram", "LATENCY HISTOGRAM …", func(proxy, _ string, _ *diffSetup) bool { return proxy == "*0\r\n" || proxy == "%0\r\n" }, 0},
	{"unsubscribe-order", "UNSUBSCRIBE", sameConfirmations, byChance},
	{"pubsub-bounds", "SUBSCRIBE …", proxyStarts("-ERR replproxy serves "), diverges},
	{"replconf-own-options", "REPLCONF … LINK-COMPRESSION * …", anyReply, 0},
	{"replconf-own-options", "REPLCONF … VERSION * …", anyReply, 0},
	{"replconf-ip-address", "REPLCONF … IP-ADDRESS * …", proxyStarts("-ERR REPLCONF ip-address cannot contain spaces, newlines, ',', '=' or special characters"), 0},
	{"replconf-listening-port", "REPLCONF … LISTENING-PORT * …", proxyStarts("-ERR value is not an integer or out of range"), 0},
}

// commandServedOnly: COMMAND's lists hold the commands the proxy serves,
// and their subcommands those it serves: the proxy's entries are Redis's
// for them (TestCommandDocsMatchRedis compares them), so a whole list is
// compared by its kind, and COMMAND INFO and DOCS of named commands with
// Redis's cut to what the proxy serves.
func commandServedOnly(proxy, redis string, _ *diffSetup) bool {
	pv, _, perr := commanddocs.Parse([]byte(proxy))
	rv, _, rerr := commanddocs.Parse([]byte(redis))
	if perr != nil || rerr != nil || pv.Kind != rv.Kind {
		return false
	}
	if pv.Kind != '*' && pv.Kind != '%' {
		return pv.Kind == ':' // COMMAND COUNT
	}
	if len(pv.Elems) != len(rv.Elems) {
		return pv.Kind == rv.Kind // a whole list
	}
	for i := range rv.Elems {
		switch e := rv.Elems[i]; {
		case e.Kind == '*' && len(e.Elems) == 10 && pv.Elems[i].Kind != '*':
			// A COMMAND INFO entry of a command the proxy does not serve,
			// which it answers as unknown.
			if _, served := servedCommands()[e.Elems[0].Str]; !served {
				rv.Elems[i] = pv.Elems[i]
			}
		case e.Kind == '*' && len(e.Elems) == 10: // a COMMAND INFO entry
			rv.Elems[i] = keepServed(e)
		case e.Kind == '%' || e.Kind == '*' && i%2 == 1: // a COMMAND DOCS entry
			rv.Elems[i] = keepServedDocs(e)
		}
	}
	return string(commanddocs.AppendRESP3(nil, pv)) == string(commanddocs.AppendRESP3(nil, rv))
}

// roleWithReplicas: the proxy's ROLE as a replica is Redis's five elements,
// then its own replicas as a primary lists them.
func roleWithReplicas(proxy, redis string, _ *diffSetup) bool {
	pv, _, perr := commanddocs.Parse([]byte(proxy))
	rv, _, rerr := commanddocs.Parse([]byte(redis))
	if perr != nil || rerr != nil || len(pv.Elems) != len(rv.Elems)+1 || pv.Elems[len(pv.Elems)-1].Kind != '*' {
		return false
	}
	pv.Elems = pv.Elems[:len(rv.Elems)]
	return string(commanddocs.AppendRESP3(nil, pv)) == string(commanddocs.AppendRESP3(nil, rv))
}

// configGetAgree: CONFIG GET answers the proxy's directives (never
// masterauth and requirepass, which it keeps secret), in the order of its
// table, where Redis answers its own in its dictionary's order: the pairs
// of the directives both have are compared, sorted by name.
func configGetAgree(proxy, redis string, su *diffSetup) bool {
	pv, _, perr := commanddocs.Parse([]byte(proxy))
	rv, _, rerr := commanddocs.Parse([]byte(redis))
	if perr != nil || rerr != nil || pv.Kind != rv.Kind || pv.Kind != '*' && pv.Kind != '%' {
		return false
	}
	pairs := func(v commanddocs.Value, keep func(string) bool) []string {
		var out []string
		for i := 0; i+1 < len(v.Elems); i += 2 {
			if keep(v.Elems[i].Str) {
				out = append(out, v.Elems[i].Str+"="+v.Elems[i+1].Str)
			}
		}
		slices.Sort(out)
		return out
	}
	proxyHas := func(name string) bool { return slices.Contains(config.Names(), name) && !hiddenFromConfigGet(name) }
	return slices.Equal(pairs(pv, func(n string) bool { return su.redisDirectives[n] }), pairs(rv, proxyHas))
}

// rulesAsSets: a description of command rules (ACL LIST, ACL GETUSER's
// commands) has its +@all/-@all and categories in Redis's order, then the
// single-command rules in the order of Redis's command dictionary, which
// its hash seed draws at start: those are compared as a set.
func rulesAsSets(proxy, redis string, _ *diffSetup) bool {
	return normaliseRules(proxy) == normaliseRules(redis)
}

// sameElements: an array in the order of Redis's command dictionary (ACL
// CAT <category>) compared as a set.
func sameElements(proxy, redis string, _ *diffSetup) bool {
	pv, _, perr := commanddocs.Parse([]byte(proxy))
	rv, _, rerr := commanddocs.Parse([]byte(redis))
	if perr != nil || rerr != nil || pv.Kind != rv.Kind {
		return false
	}
	names := func(v commanddocs.Value) []string {
		var out []string
		for _, e := range v.Elems {
			out = append(out, e.Str)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(names(pv), names(rv))
}

// TestDifferential runs every sequence of diffTable on the proxy and on
// redis-server 7.0 and compares every reply; every intended difference
// must be one a sequence meets, so that the list holds no dead entry.
func TestDifferential(t *testing.T) {
	env := startDiffEnv(t)
	steps, met := 0, map[string]bool{}
	for _, seq := range diffRuns() {
		t.Run(seq.name, func(t *testing.T) {
			for _, r := range env.run(t, seq, false) {
				steps++
				if r.intended != "" {
					met[r.intended] = true
				}
				if r.err != "" {
					t.Errorf("%.100q: %s\n\tproxy:        %.600q\n\tredis-server: %.600q", r.args, r.err, r.replies[sideProxy], r.replies[sideRedis])
				}
			}
		})
	}
	tableSteps := 0
	for _, seq := range diffTable {
		tableSteps += len(seq.steps)
	}
	t.Logf("%d sequences of %d steps (%d runs with RESP3's, %d steps run), intended differences met: %d of %d",
		len(diffTable), tableSteps, len(diffRuns()), steps, len(met), len(intendedIDs()))
	seen := map[string]bool{}
	for _, d := range intendedDiffs {
		if id := d.id; !met[id] && d.flags&byChance == 0 {
			if !seen[id] {
				t.Errorf("no step of the table meets the intended difference %s: remove it, or add the step", id)
			}
			seen[id] = true
		}
	}
}

// diffRuns are diffTable's sequences as TestDifferential runs them: each
// as it is, and each of the open setup again after HELLO 3, so that every
// reply is compared in RESP3 too.
func diffRuns() []diffSeq {
	var runs []diffSeq
	for _, seq := range diffTable {
		runs = append(runs, seq)
		if seq.setup == "open" {
			runs = append(runs, diffSeq{seq.name + "-resp3", seq.setup, append([][]string{{"HELLO", "3"}}, seq.steps...)})
		}
	}
	return runs
}

// intendedIDs are the ids of intendedDiffs, each once, in order.
func intendedIDs() []string {
	var ids []string
	for _, d := range intendedDiffs {
		if !slices.Contains(ids, d.id) {
			ids = append(ids, d.id)
		}
	}
	return ids
}

// sameConfirmations: UNSUBSCRIBE with no channel confirms each channel the
// client left, in the order of its channels' dictionary (Redis's, drawn by
// its hash seed; the proxy's, a Go map's): the confirmations are compared
// as a set, each with its channel, and the counts left in the order sent.
func sameConfirmations(proxy, redis string, _ *diffSetup) bool {
	confirmations := func(s string) (chans, counts []string, ok bool) {
		s = strings.ReplaceAll(s, ">3\r\n", "*3\r\n") // RESP3's pushes, read as arrays
		for s != "" {
			v, rest, err := commanddocs.Parse([]byte(s))
			if err != nil || len(v.Elems) != 3 {
				return nil, nil, false
			}
			chans = append(chans, v.Elems[0].Str+" "+v.Elems[1].Str)
			counts = append(counts, strconv.FormatInt(v.Elems[2].Num, 10))
			s = string(rest)
		}
		slices.Sort(chans)
		return chans, counts, true
	}
	pc, pn, pok := confirmations(proxy)
	rc, rn, rok := confirmations(redis)
	return pok && rok && slices.Equal(pc, rc) && slices.Equal(pn, rn) && proxy[0] == redis[0]
}

// aclLogVolatile are the parts of ACL LOG's entries that differ between two
// servers by nature: an entry's age and its client's CLIENT LIST line.
var aclLogVolatile = []*regexp.Regexp{
	regexp.MustCompile(`(age-seconds\r\n)(\$\d+\r\n[^\r]*|,[^\r]*)\r\n`),
	regexp.MustCompile(`(client-info\r\n)\$\d+\r\n[^\r]*\r\n`),
}

// maskVolatile masks aclLogVolatile in a reply.
func maskVolatile(s string) string {
	for _, re := range aclLogVolatile {
		s = re.ReplaceAllString(s, "${1}<masked>\r\n")
	}
	return s
}

// ruleWords finds a description of command rules in a reply: +@all or
// -@all, then rules.
var ruleWords = regexp.MustCompile(`[+-]@all( [+-][-@a-z_|0-9]+)*`)

// normaliseRules keeps each description's +@all or -@all and its
// categories in their order (Redis's choice, fixed) and sorts the
// single-command rules after them (in the order of Redis's command
// dictionary, which its hash seed draws at start).
func normaliseRules(s string) string {
	return ruleWords.ReplaceAllStringFunc(s, func(d string) string {
		w := strings.Fields(d)
		n := 0
		for n < len(w) && (strings.HasPrefix(w[n], "+@") || strings.HasPrefix(w[n], "-@")) {
			n++
		}
		slices.Sort(w[n:])
		return strings.Join(w, " ")
	})
}

// TestIntendedDifferencesDocumented: docs/clients.md's table of the
// differences from redis-server 7.0 lists intendedDiffs, row for row (the
// same id and commands, and a reason), and its list of what differs by
// nature names every CLIENT LIST field the harness masks.
func TestIntendedDifferencesDocumented(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "docs", "clients.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "## Differences from redis-server 7.0\n")
	if !ok {
		t.Fatal("docs/clients.md has no section \"Differences from redis-server 7.0\"")
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `([^`]+)` \\| (.*) \\|$")
	var documented []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if strings.TrimSpace(m[3]) == "" {
			t.Errorf("docs/clients.md: %s (%s) gives no reason", m[1], m[2])
		}
		documented = append(documented, m[1]+" "+m[2])
	}
	var listed []string
	for _, d := range intendedDiffs {
		listed = append(listed, d.id+" "+d.pattern)
	}
	if !slices.Equal(documented, listed) {
		t.Errorf("docs/clients.md lists the differences\n\t%q\nthe harness\n\t%q", documented, listed)
	}
	for _, f := range clientLineMasked {
		if !strings.Contains(section, "`"+f+"`") {
			t.Errorf("docs/clients.md does not say that CLIENT LIST's %s differs by nature", f)
		}
	}
}

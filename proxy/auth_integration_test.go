package proxy

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/commanddocs"
	"github.com/replproxy/replproxy/proxy/wire"
)

// The four users an operator creates (README, Security), as user lines.
var operatorUsers = []string{
	"--user", "replica", "on", ">replica-secret", "+psync", "+replconf", "+ping",
	"--user", "sentinel", "on", ">sentinel-secret", "allchannels", "+multi", "+slaveof", "+ping", "+exec", "+subscribe",
	"+config|rewrite", "+role", "+publish", "+info", "+client|setname", "+client|kill", "+script|kill",
	"--user", "monitor", "on", ">monitor-secret", "+info", "+ping",
	"--user", "admin", "on", ">admin-secret", "+@all",
	"--requirepass", "default-secret",
}

// TestReplicationUser: real redis-server replicas sync through the proxy as
// a user that may only replicate (masteruser/masterauth with +psync
// +replconf +ping); that user is refused CONFIG SET, REPLICAOF and CLIENT
// KILL with Redis's NOPERM, and ACL LOG shows each attempt.
func TestReplicationUser(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 5000, "key", 100)
	p := startProxy(t, append(replicaOf(primary), operatorUsers...)...)
	host, port, _ := strings.Cut(p.AddrString(), ":")
	var rcs []*redistest.Client
	for range 2 {
		r := redistest.StartServer(t, "--replicaof", host, port, "--masteruser", "replica", "--masterauth", "replica-secret")
		rcs = append(rcs, redistest.Dial(t, r.Addr()))
	}
	writeValues(t, pc, "through-acl", 100, 100)
	redistest.WaitSynced(t, pc, rcs...)

	a := adminDial(t, p)
	if got := a.do("AUTH", "replica", "replica-secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH replica: %q", got)
	}
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"CONFIG", "SET", "repl-timeout", "5"}, "config|set"},
		{[]string{"REPLICAOF", "NO", "ONE"}, "replicaof"},
		{[]string{"CLIENT", "KILL", "TYPE", "replica"}, "client|kill"},
	} {
		want := "-NOPERM this user has no permissions to run the '" + tc.name + "' command\r\n"
		if got := a.do(tc.args...); got != want {
			t.Errorf("%q as the replication user: %q, want %q", tc.args, got, want)
		}
	}
	if got := freshInfo(t, rcs[0].Addr(), "replication")["master_link_status"]; got != "up" {
		t.Errorf("a replica's link is %q after the refused commands", got)
	}
	admin := adminDial(t, p)
	admin.do("AUTH", "admin", "admin-secret")
	log := admin.do("ACL", "LOG")
	for _, object := range []string{"config|set", "replicaof", "client|kill"} {
		if !strings.Contains(log, "\r\n$"+itoa(int64(len(object)))+"\r\n"+object+"\r\n") {
			t.Errorf("ACL LOG lacks the refused %s:\n%s", object, log)
		}
	}
	if strings.Count(log, "\r\n$7\r\nreplica\r\n") != 3 {
		t.Errorf("ACL LOG does not name the replication user three times:\n%s", log)
	}
	if n := redistest.ParseInfo(strings.SplitN(admin.do("INFO", "stats"), "\r\n", 2)[1])["acl_access_denied_cmd"]; n != "3" {
		t.Errorf("acl_access_denied_cmd %s, want 3", n)
	}
	list := admin.do("CLIENT", "LIST")
	if len(regexp.MustCompile(`(?m)^id=.* flags=S .* user=replica `).FindAllString(list, -1)) != 2 {
		t.Errorf("CLIENT LIST shows the replicas as\n%s", list)
	}
}

// TestMonitoringUser: a user with +info +ping reads INFO, and gets NOPERM
// for PSYNC, SYNC and REPLCONF: not one byte of the stream or of a
// snapshot reaches it.
func TestMonitoringUser(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 1000, "key", 100)
	p, _ := startProxyOf0User(t, primary)
	conn, err := net.Dial("tcp", p.AddrString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(args ...string) string { return rawReply(t, conn, args...) }
	if got := send("AUTH", "monitor", "monitor-secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH monitor: %q", got)
	}
	if got := send("INFO", "replication"); !strings.Contains(got, "master_link_status:up") {
		t.Errorf("INFO as the monitoring user: %q", got)
	}
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"REPLCONF", "listening-port", "6380"}, "replconf"},
		{[]string{"PSYNC", "?", "-1"}, "psync"},
		{[]string{"SYNC"}, "sync"},
	} {
		want := "-NOPERM this user has no permissions to run the '" + tc.name + "' command\r\n"
		if got := send(tc.args...); got != want {
			t.Errorf("%q as the monitoring user: %q, want %q", tc.args, got, want)
		}
	}
	// Anything more on the connection would be a payload or the stream.
	pc.MustDo(t, "SET", "after", "refusal")
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := conn.Read(make([]byte, 1)); n != 0 {
		t.Error("bytes reached the monitoring user after its refused PSYNC")
	}
}

// startProxyOf0User runs a proxy replicating srv with the operator's users
// and returns it with a client authenticated as admin, once its link is up.
func startProxyOf0User(t *testing.T, srv *redistest.Server) (*testProxy, *adminConn) {
	t.Helper()
	p := startProxy(t, append(replicaOf(srv), operatorUsers...)...)
	a := adminDial(t, p)
	if got := a.do("AUTH", "admin", "admin-secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH admin: %q", got)
	}
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool {
		return strings.Contains(a.do("INFO", "replication"), "master_link_status:up")
	})
	return p, a
}

// rawReply sends args on conn and returns one reply's raw bytes, RESP2 or
// RESP3.
func rawReply(t testing.TB, conn net.Conn, args ...string) string {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(wire.AppendCommand(nil, args...)); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := conn.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if _, rest, perr := commanddocs.Parse(buf); perr == nil && len(rest) == 0 {
			return string(buf)
		}
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
}

// aclLogLen is how many entries ACL LOG holds, as a raw RESP2 reply's
// array header says.
func aclLogLen(t testing.TB, a *adminConn) int {
	t.Helper()
	log := a.do("ACL", "LOG")
	head, _, _ := strings.Cut(log, "\r\n")
	if head == "" || head[0] != '*' {
		t.Fatalf("ACL LOG: %q", log)
	}
	return atoiT(t, head[1:])
}

// TestLookAlikeSubcommandRefused: a user allowed +info +ping sends CLIENT
// KILL spelt with a look-alike of an ASCII letter (U+212A KELVIN SIGN,
// which Unicode folds to 'k') in the three forms that would close a
// client: by ID, by TYPE replica, by USER. Each is an unknown subcommand,
// answered byte for byte as a real redis-server 7.0 answers the same user
// (before the ACL, so with no ACL LOG entry there either), and nothing is
// closed: the replica of the proxy (a real redis-server) keeps its link,
// the admin client its connection. The same look-alike from a user with
// +@all is unknown too, and other look-alikes (U+017F LONG S, U+0130) and
// unknown subcommands alike; CLIENT KILL itself from the +info +ping user
// is refused with NOPERM and logged, as Redis refuses and logs it.
func TestLookAlikeSubcommandRefused(t *testing.T) {
	primary, pc := startPrimary(t)
	p := startProxy(t, append(replicaOf(primary), operatorUsers...)...)
	host, port, _ := strings.Cut(p.AddrString(), ":")
	rs := redistest.StartServer(t, "--replicaof", host, port, "--masteruser", "replica", "--masterauth", "replica-secret")
	rc := redistest.Dial(t, rs.Addr())
	pc.MustDo(t, "SET", "k", "v")
	redistest.WaitSynced(t, pc, rc)

	// The same users on a real redis-server, each side with an admin
	// client that is the USER admin victim.
	ref := redistest.StartServer(t)
	rr := dialAddr(t, ref.Addr())
	for _, line := range [][]string{
		{"ACL", "SETUSER", "monitor", "on", ">monitor-secret", "+info", "+ping"},
		{"ACL", "SETUSER", "admin", "on", ">admin-secret", "+@all", "~*", "&*"},
	} {
		if got := rr.do(line...); got != "+OK\r\n" {
			t.Fatalf("%q on redis-server: %q", line, got)
		}
	}
	victims := map[string]*adminConn{"proxy": adminDial(t, p), "redis": dialAddr(t, ref.Addr())}
	attackers := map[string]*adminConn{"proxy": adminDial(t, p), "redis": dialAddr(t, ref.Addr())}
	ids := map[string]string{}
	for side, v := range victims {
		if got := v.do("AUTH", "admin", "admin-secret"); got != "+OK\r\n" {
			t.Fatalf("%s: AUTH admin: %q", side, got)
		}
		ids[side] = strings.Trim(v.do("CLIENT", "ID"), ":\r\n")
		if got := attackers[side].do("AUTH", "monitor", "monitor-secret"); got != "+OK\r\n" {
			t.Fatalf("%s: AUTH monitor: %q", side, got)
		}
	}
	admins := map[string]*adminConn{"proxy": adminDial(t, p), "redis": rr}
	if got := admins["proxy"].do("AUTH", "admin", "admin-secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH admin: %q", got)
	}
	logBefore := map[string]int{"proxy": aclLogLen(t, admins["proxy"]), "redis": aclLogLen(t, rr)}

	const kelvin = "\u212aILL"
	for _, tc := range []struct {
		as   map[string]*adminConn
		args func(id string) []string
	}{
		{attackers, func(id string) []string { return []string{"CLIENT", kelvin, "ID", id} }},
		{attackers, func(string) []string { return []string{"CLIENT", kelvin, "TYPE", "replica"} }},
		{attackers, func(string) []string { return []string{"CLIENT", kelvin, "USER", "admin"} }},
		{attackers, func(id string) []string { return []string{"client", "\u212aill", "id", id, "skipme", "no"} }},
		{attackers, func(string) []string { return []string{"CLIENT", "\u017fETNAME", "x"} }},
		{attackers, func(id string) []string { return []string{"CLIENT", "K\u0130LL", "ID", id} }},
		{attackers, func(string) []string { return []string{"CLIENT", "NOSUCH", "TYPE", "replica"} }},
		{admins, func(id string) []string { return []string{"CLIENT", kelvin, "ID", id} }},
		{admins, func(string) []string { return []string{"CLIENT", kelvin, "TYPE", "replica"} }},
		{admins, func(string) []string { return []string{"CLIENT", kelvin, "USER", "admin", "SKIPME", "yes"} }},
	} {
		want := tc.as["redis"].do(tc.args(ids["redis"])...)
		got := tc.as["proxy"].do(tc.args(ids["proxy"])...)
		if got != want || !strings.HasPrefix(got, "-ERR unknown subcommand '") {
			t.Errorf("%q: the proxy answered %q, redis-server %q", tc.args("<id>"), got, want)
		}
	}
	for side, a := range admins {
		if n := aclLogLen(t, a) - logBefore[side]; n != 0 {
			t.Errorf("%s: %d ACL LOG entries for unknown subcommands, want none (Redis answers them before its ACL)", side, n)
		}
	}
	// Nothing was closed.
	for side, v := range victims {
		if got := v.do("PING"); got != "+PONG\r\n" {
			t.Errorf("%s: the admin client answers %q after the attempts", side, got)
		}
	}
	if st := freshInfo(t, rs.Addr(), "replication")["master_link_status"]; st != "up" {
		t.Errorf("the proxy's replica's link is %q after the attempts", st)
	}
	if n := redistest.ParseInfo(p.Info("replication"))["connected_slaves"]; n != "1" {
		t.Errorf("the proxy has %s replicas after the attempts, want 1", n)
	}

	// CLIENT KILL as itself: NOPERM, and an ACL LOG entry, on both.
	for side, a := range attackers {
		got := a.do("CLIENT", "KILL", "ID", ids[side])
		if want := "-NOPERM this user has no permissions to run the 'client|kill' command\r\n"; got != want {
			t.Errorf("%s: CLIENT KILL as monitor: %q, want %q", side, got, want)
		}
		if n := aclLogLen(t, admins[side]) - logBefore[side]; n != 1 {
			t.Errorf("%s: %d ACL LOG entries after a refused CLIENT KILL, want 1", side, n)
		}
		if log := admins[side].do("ACL", "LOG", "1"); !strings.Contains(log, "$6\r\nobject\r\n$11\r\nclient|kill\r\n$8\r\nusername\r\n$7\r\nmonitor\r\n") {
			t.Errorf("%s: ACL LOG's last entry: %q", side, log)
		}
	}
}

// TestSubcommandsBeyondRedis70: CLIENT SETINFO, which the proxy serves as
// Redis 7.2 does, runs for a user allowed all of CLIENT, and is refused
// (NOPERM, ACL LOG) to one allowed only some of it; a Redis 7.0
// subcommand the proxy does not serve is checked as Redis checks it (a
// refusal is NOPERM and logged) and then answered as unknown, never run.
func TestSubcommandsBeyondRedis70(t *testing.T) {
	p := startProxy(t, "--user", "setname", "on", ">pw", "+client|setname", "--user", "client", "on", ">pw", "+client", "--user", "admin", "on", ">pw", "+@all")
	as := func(user string) *adminConn {
		a := adminDial(t, p)
		if got := a.do("AUTH", user, "pw"); got != "+OK\r\n" {
			t.Fatalf("AUTH %s: %q", user, got)
		}
		return a
	}
	setname, client, admin := as("setname"), as("client"), as("admin")
	for _, tc := range []struct {
		a          *adminConn
		args       []string
		want       string
		logsObject string
	}{
		{setname, []string{"CLIENT", "SETINFO", "lib-name", "x"}, "-NOPERM this user has no permissions to run the 'client|setinfo' command\r\n", "client|setinfo"},
		{client, []string{"CLIENT", "SETINFO", "lib-name", "x"}, "+OK\r\n", ""},
		{setname, []string{"CLIENT", "SETINFO", "x"}, "-ERR wrong number of arguments for 'client|setinfo' command\r\n", ""},
		{setname, []string{"CLIENT", "NO-EVICT", "on"}, "-NOPERM this user has no permissions to run the 'client|no-evict' command\r\n", "client|no-evict"},
		{admin, []string{"CLIENT", "NO-EVICT", "on"}, "-ERR unknown subcommand 'NO-EVICT'. Try CLIENT HELP.\r\n", ""},
		{admin, []string{"CLIENT", "PAUSE", "100000"}, "-ERR unknown subcommand 'PAUSE'. Try CLIENT HELP.\r\n", ""},
		{setname, []string{"CLIENT", "NOSUCH"}, "-ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.\r\n", ""},
		{setname, []string{"CLIENT", "SETNAME", "n"}, "+OK\r\n", ""},
		{setname, []string{"CLIENT", "KILL"}, "-ERR wrong number of arguments for 'client|kill' command\r\n", ""},
	} {
		before := aclLogLen(t, admin)
		if got := tc.a.do(tc.args...); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.want)
		}
		log := admin.do("ACL", "LOG", "1")
		switch logged := aclLogLen(t, admin) > before; {
		case tc.logsObject == "" && logged:
			t.Errorf("%q: logged in ACL LOG: %q", tc.args, log)
		case tc.logsObject != "" && (!logged || !strings.Contains(log, "$6\r\nobject\r\n$"+itoa(int64(len(tc.logsObject)))+"\r\n"+tc.logsObject+"\r\n")):
			t.Errorf("%q: ACL LOG's last entry %q, want object %s", tc.args, log, tc.logsObject)
		}
	}
}

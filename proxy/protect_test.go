package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
)

// infoField returns one field of the proxy's INFO.
func infoField(p *testProxy, section, key string) string {
	return redistest.ParseInfo(p.Info(section))[key]
}

// send writes raw bytes, with a deadline for them and for the replies.
func (a *adminConn) send(b []byte) {
	a.t.Helper()
	a.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := a.conn.Write(b); err != nil {
		a.t.Fatal(err)
	}
}

// expectClosed checks that the connection ends, after any bytes already sent.
func (a *adminConn) expectClosed() {
	a.t.Helper()
	a.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	// A reset counts: closing with unread input sends one.
	if _, err := io.Copy(io.Discard, a.rd); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		a.t.Fatalf("connection not closed: %v", err)
	}
}

// bulkCommand encodes a command whose last argument is n bytes of 'x'.
func bulkCommand(n int, args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)+1) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	b = append(b, "$"+strconv.Itoa(n)+"\r\n"...)
	b = append(b, strings.Repeat("x", n)...)
	return append(b, "\r\n"...)
}

// flakyListener fails its first accepts with EMFILE, as a process out of
// descriptors sees them.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

func TestAcceptLoopSurvivesEMFILE(t *testing.T) {
	fl := &flakyListener{}
	fl.fails.Store(6)
	p := newTestProxy(t, proxySetup{wrap: func(ln net.Listener) net.Listener { fl.Listener = ln; return fl }})
	if got := adminDial(t, p).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING after EMFILE answered %q", got)
	}
	if n := fl.fails.Load(); n >= 0 {
		t.Fatalf("the listener still had %d failures to give", n+1)
	}
	// Six failures within about 600 ms of back-off: one line, the rest counted.
	if n := p.Log.Count("accept failed"); n < 1 || n > 2 {
		t.Fatalf("%d log lines for 6 accept errors", n)
	}
}

func TestFileLimitHook(t *testing.T) {
	var asked []int
	hook := func(maxclients int) int { asked = append(asked, maxclients); return min(maxclients, 50) }
	p := newTestProxy(t, proxySetup{opts: Options{FileLimit: hook}, args: []string{"--maxclients", "10000"}})
	if got := infoField(p, "clients", "maxclients"); got != "50" {
		t.Fatalf("INFO maxclients %q, want 50", got)
	}
	if !p.Log.Contains("maxclients lowered to fit the open file limit") || !p.Log.Contains("maxclients=10000") ||
		!p.Log.Contains("effective-maxclients=50") {
		t.Fatal("no warning naming the requested and the effective maxclients")
	}
	a := adminDial(t, p)
	for _, tc := range []struct{ set, want string }{
		{"40", "+OK\r\n"},
		{"50", "+OK\r\n"},
		{"51", "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 50\r\n"},
	} {
		if got := a.do("CONFIG", "SET", "maxclients", tc.set); got != tc.want {
			t.Errorf("CONFIG SET maxclients %s: %q, want %q", tc.set, got, tc.want)
		}
	}
	if got := a.do("CONFIG", "GET", "maxclients"); got != "*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n" {
		t.Fatalf("CONFIG GET maxclients after a refused SET: %q", got)
	}
	if len(asked) != 4 || asked[0] != 10000 {
		t.Fatalf("hook asked %v", asked)
	}
	t.Run("no room", func(t *testing.T) {
		cfg := config.DefaultConfig()
		cfg.Port = 0
		if _, err := New(cfg, Options{FileLimit: func(int) int { return 0 }}); err == nil {
			t.Fatal("New succeeded with no descriptors for clients")
		}
	})
}

func TestUnauthenticatedLimits(t *testing.T) {
	p := startProxy(t, "--requirepass", "pw")
	for _, tc := range []struct {
		name, send, want string
	}{
		{"eleven arguments", "*11\r\n", "-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"a bulk over 16 KiB", "*2\r\n$4\r\nAUTH\r\n$16385\r\n", "-ERR Protocol error: unauthenticated bulk length\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := adminDial(t, p)
			a.send([]byte(tc.send))
			if got := a.reply(); got != tc.want {
				t.Fatalf("answered %q, want %q", got, tc.want)
			}
			a.expectClosed()
		})
	}
	t.Run("within the limits", func(t *testing.T) {
		a := adminDial(t, p)
		args := []string{"PING", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
		if got := a.do(args...); !strings.HasPrefix(got, "-NOAUTH") {
			t.Fatalf("ten arguments before AUTH: %q", got)
		}
		if got := a.do("AUTH", strings.Repeat("p", 16384)); !strings.HasPrefix(got, "-WRONGPASS") {
			t.Fatalf("a 16 KiB password: %q", got)
		}
	})
	t.Run("lifted by AUTH in the same pipeline", func(t *testing.T) {
		a := adminDial(t, p)
		a.send(append([]byte("*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"), bulkCommand(100000, "ECHO")...))
		if got := a.reply(); got != "+OK\r\n" {
			t.Fatalf("AUTH: %q", got)
		}
		if got := a.reply(); len(got) != 100000+len("$100000\r\n\r\n") {
			t.Fatalf("ECHO of 100000 bytes after AUTH answered %.40q", got)
		}
	})
}

func TestProtoMaxBulkLen(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	// The default is Redis's 512 MiB: a 2 MiB argument goes through.
	a.send(bulkCommand(2<<20, "ECHO"))
	if got := a.reply(); len(got) != 2<<20+len("$2097152\r\n\r\n") {
		t.Fatalf("ECHO of 2 MiB answered %.40q", got)
	}
	if got := a.do("CONFIG", "SET", "proto-max-bulk-len", "1mb"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET proto-max-bulk-len: %q", got)
	}
	a.send(bulkCommand(1<<20, "ECHO"))
	if got := a.reply(); len(got) != 1<<20+len("$1048576\r\n\r\n") {
		t.Fatalf("ECHO of 1 MiB answered %.40q", got)
	}
	a.send([]byte("*2\r\n$4\r\nECHO\r\n$1048577\r\n"))
	if got := a.reply(); got != "-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("a bulk over proto-max-bulk-len: %q", got)
	}
	a.expectClosed()
}

func TestClientQueryBufferLimit(t *testing.T) {
	p := startProxy(t, "--client-query-buffer-limit", "1mb")
	a := adminDial(t, p)
	// Two bulks of 600 KB: the second would take the command past 1 MiB.
	a.send(append([]byte("*3\r\n$4\r\nECHO\r\n$600000\r\n"+strings.Repeat("x", 600000)+"\r\n"), "$600000\r\n"...))
	a.expectClosed() // no reply, as Redis
	if got := infoField(p, "stats", "client_query_buffer_limit_disconnections"); got != "1" {
		t.Fatalf("client_query_buffer_limit_disconnections %q, want 1", got)
	}
	if got := adminDial(t, p).do("ECHO", strings.Repeat("y", 900000)); len(got) != 900000+len("$900000\r\n\r\n") {
		t.Fatalf("a command under the limit answered %.40q", got)
	}
}

func TestQueryBufferInMemClients(t *testing.T) {
	p := startProxy(t)
	before := atoiT(t, infoField(p, "memory", "mem_clients_normal"))
	a := adminDial(t, p)
	// 4 MiB of an 8 MiB argument, then nothing: the proxy holds them.
	a.send([]byte("*2\r\n$4\r\nECHO\r\n$8388608\r\n" + strings.Repeat("x", 4<<20)))
	redistest.WaitFor(t, 10*time.Second, "mem_clients_normal to count the query buffer", func() bool {
		return atoiT(t, infoField(p, "memory", "mem_clients_normal")) >= before+4<<20
	})
	a.conn.Close()
	redistest.WaitFor(t, 10*time.Second, "mem_clients_normal to drop once the client left", func() bool {
		return atoiT(t, infoField(p, "memory", "mem_clients_normal")) < before+1<<20
	})
}

func TestAuthFailuresRateLimited(t *testing.T) {
	p := startProxy(t, "--requirepass", "pw")
	a := adminDial(t, p)
	const n = 20000
	go a.conn.Write([]byte(strings.Repeat("AUTH x\r\n", n)))
	a.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	for i := range n {
		line, err := a.rd.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "-WRONGPASS") {
			t.Fatalf("reply %d: %q, %v", i, line, err)
		}
	}
	elapsed := time.Since(start)
	if got := infoField(p, "stats", "acl_access_denied_auth"); got != strconv.Itoa(n) {
		t.Fatalf("acl_access_denied_auth %q, want %d", got, n)
	}
	// At most one line per second (and one at the start).
	lines := p.Log.Count("authentication failed")
	if lines < 1 || lines > int(elapsed/time.Second)+2 {
		t.Fatalf("%d log lines for %d failed AUTH in %v", lines, n, elapsed)
	}
	// A later failure, once the rate limit's period (logEvery) has passed,
	// says how many were held back: one more failure per poll until it
	// does.
	suppressed := regexp.MustCompile(`authentication failed.*suppressed=[1-9][0-9]*`)
	redistest.WaitFor(t, 10*logEvery, "a log line giving the number of failures suppressed", func() bool {
		a.do("AUTH", "x")
		return suppressed.MatchString(p.Log.String())
	})
}

func TestConfigSetValueAsIs(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	if got := a.do("CONFIG", "SET", "requirepass", "correct horse battery"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET requirepass with spaces: %q", got)
	}
	b := adminDial(t, p)
	if got := b.do("AUTH", "correct"); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH with the first word: %q", got)
	}
	if got := b.do("AUTH", "correct horse battery"); got != "+OK\r\n" {
		t.Fatalf("AUTH with the whole password: %q", got)
	}
	if got := b.do("CONFIG", "SET", "requirepass", ""); got != "+OK\r\n" {
		t.Fatalf(`CONFIG SET requirepass "": %q`, got)
	}
	if got := adminDial(t, p).do("PING"); got != "+PONG\r\n" {
		t.Fatalf("PING without AUTH after clearing the password: %q", got)
	}
	for _, tc := range []struct{ name, value, want, got string }{
		{"masterauth", " two  spaces ", "+OK\r\n", ""},
		{"client-output-buffer-limit", "normal 1mb 2mb 3", "+OK\r\n", ""},
		{"loglevel", "verbose notice", "-ERR CONFIG SET failed (possibly related to argument 'loglevel')", ""},
		{"maxclients", "100 200", "-ERR CONFIG SET failed (possibly related to argument 'maxclients')", ""},
	} {
		if got := b.do("CONFIG", "SET", tc.name, tc.value); !strings.HasPrefix(got, tc.want) {
			t.Errorf("CONFIG SET %s %q: %q, want %q", tc.name, tc.value, got, tc.want)
		}
	}
	cfg := p.config()
	if cfg.MasterAuth != " two  spaces " {
		t.Errorf("masterauth %q", cfg.MasterAuth)
	}
	if want := (config.OutputBufferLimit{Hard: 1 << 20, Soft: 2 << 20, SoftPeriod: 3 * time.Second}); cfg.ClientOutputBufferLimit.Normal != want {
		t.Errorf("client-output-buffer-limit normal %+v", cfg.ClientOutputBufferLimit.Normal)
	}
	if cfg.MaxClients != 10000 || cfg.LogLevel != config.LogVerbose {
		t.Errorf("a refused value changed the config: maxclients %d, loglevel %s", cfg.MaxClients, cfg.LogLevel)
	}
}

// remoteListener makes the connections it accepts look as if they came from
// a non-loopback address while remote is set.
type remoteListener struct {
	net.Listener
	remote atomic.Bool
}

type remoteConn struct{ net.Conn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP("192.0.2.77"), Port: 40000}
}

func (l *remoteListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil && l.remote.Load() {
		conn = remoteConn{conn}
	}
	return conn, err
}

func TestProtectedMode(t *testing.T) {
	const denied = "-DENIED replproxy is running in protected mode because protected mode is enabled and no password is set for the default user."
	for _, tc := range []struct {
		name string
		args []string
		want string // prefix of the answer to PING from a non-loopback address
	}{
		{"default", nil, denied},
		{"bound everywhere", []string{"--bind", "* -::*"}, denied},
		{"protected-mode no", []string{"--protected-mode", "no"}, "+PONG"},
		{"requirepass", []string{"--requirepass", "pw"}, "-NOAUTH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := &remoteListener{}
			rl.remote.Store(true)
			p := newTestProxy(t, proxySetup{wrap: func(ln net.Listener) net.Listener { rl.Listener = ln; return rl }, args: tc.args})
			a := adminDial(t, p)
			a.send([]byte("PING\r\n"))
			got := a.reply()
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("non-loopback PING answered %q, want %q...", got, tc.want)
			}
			if tc.want == denied {
				a.expectClosed()
				if got := infoField(p, "stats", "rejected_connections"); got != "1" {
					t.Fatalf("rejected_connections %q, want 1", got)
				}
			}
			rl.remote.Store(false)
			if got := adminDial(t, p).do("PING"); got != "+PONG\r\n" && !strings.HasPrefix(got, "-NOAUTH") {
				t.Fatalf("loopback PING answered %q", got)
			}
		})
	}
	t.Run("a real non-loopback address", func(t *testing.T) {
		ip := nonLoopbackIP(t)
		p := startProxy(t, "--bind", "127.0.0.1 "+ip)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		conn, err := d.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(p.Port())))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte("CONFIG GET masterauth\r\n"))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		if !strings.HasPrefix(line, denied) {
			t.Fatalf("a client from %s got %q", ip, line)
		}
	})
}

// nonLoopbackIP returns an IPv4 address of this machine that is not a
// loopback one, or skips the test.
func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

func TestProtectedModeConfigSet(t *testing.T) {
	rl := &remoteListener{}
	p := newTestProxy(t, proxySetup{wrap: func(ln net.Listener) net.Listener { rl.Listener = ln; return rl }})
	local := adminDial(t, p)
	if got := local.do("CONFIG", "GET", "protected-mode"); got != "*2\r\n$14\r\nprotected-mode\r\n$3\r\nyes\r\n" {
		t.Fatalf("CONFIG GET protected-mode: %q", got)
	}
	remotePing := func() string {
		rl.remote.Store(true)
		defer rl.remote.Store(false)
		a := adminDial(t, p)
		a.send([]byte("PING\r\n"))
		return a.reply()
	}
	if got := remotePing(); !strings.HasPrefix(got, "-DENIED") {
		t.Fatalf("remote PING with protected mode: %q", got)
	}
	for _, step := range []struct {
		set  []string
		want string
	}{
		{[]string{"protected-mode", "no"}, "+PONG"},
		{[]string{"protected-mode", "yes"}, "-DENIED"},
		{[]string{"requirepass", "pw"}, "-NOAUTH"},
		{[]string{"requirepass", ""}, "-DENIED"},
	} {
		if got := local.do(append([]string{"CONFIG", "SET"}, step.set...)...); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET %v: %q", step.set, got)
		}
		if got := remotePing(); !strings.HasPrefix(got, step.want) {
			t.Fatalf("after CONFIG SET %v a remote PING answered %q, want %q", step.set, got, step.want)
		}
	}
}

func TestConfigGetHidesSecrets(t *testing.T) {
	p := startProxy(t, "--masterauth", "primary-s3cret", "--requirepass", "proxy-s3cret")
	a := adminDial(t, p)
	a.do("AUTH", "proxy-s3cret")
	for _, pattern := range []string{"*", "*pass*", "masterauth", "requirepass", "MASTERAUTH"} {
		got := a.do("CONFIG", "GET", pattern)
		for _, secret := range []string{"s3cret", "masterauth", "requirepass"} {
			if strings.Contains(got, secret) {
				t.Errorf("CONFIG GET %s shows %q: %.200q", pattern, secret, got)
			}
		}
	}
	if got := a.do("CONFIG", "GET", "masteruser"); got != "*2\r\n$10\r\nmasteruser\r\n$0\r\n\r\n" {
		t.Errorf("CONFIG GET masteruser: %q", got)
	}
}

func TestClientNamesAndReplicaIPs(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	const badName = "-ERR Client names cannot contain spaces, newlines or special characters."
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CLIENT", "SETNAME", "a b"}, badName},
		{[]string{"CLIENT", "SETNAME", "a\r\nb"}, badName},
		{[]string{"CLIENT", "SETNAME", "tab\there"}, badName},
		{[]string{"CLIENT", "SETNAME", "caf\xc3\xa9"}, badName},
		{[]string{"CLIENT", "SETNAME", "\x7f"}, badName},
		{[]string{"CLIENT", "SETNAME", "ok-name!~"}, "+OK"},
		{[]string{"CLIENT", "SETNAME", ""}, "+OK"},
		{[]string{"REPLCONF", "ip-address", "10.0.0.1,state=online"}, "-ERR REPLCONF ip-address"},
		{[]string{"REPLCONF", "ip-address", "10.0.0.1\r\nx"}, "-ERR REPLCONF ip-address"},
		{[]string{"REPLCONF", "ip-address", "a b"}, "-ERR REPLCONF ip-address"},
		{[]string{"REPLCONF", "ip-address", "a=b"}, "-ERR REPLCONF ip-address"},
		{[]string{"REPLCONF", "ip-address", "10.0.0.1"}, "+OK"},
		{[]string{"REPLCONF", "ip-address", "replica-1.example"}, "+OK"},
	} {
		if got := a.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q answered %q, want %q...", tc.args, got, tc.want)
		}
	}
	// An unknown command name never reaches CLIENT LIST.
	if got := a.do("bogus name\r\nid=1", "x"); !strings.HasPrefix(got, "-ERR replproxy relays replication only") {
		t.Fatalf("unknown command: %q", got)
	}
	list := adminDial(t, p).do("CLIENT", "LIST")
	lines := strings.Split(strings.TrimSuffix(list[strings.Index(list, "\r\n")+2:], "\n\r\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("CLIENT LIST has %d lines for 2 clients:\n%s", len(lines), list)
	}
	if !strings.Contains(list, " cmd=NULL ") || strings.Contains(list, "bogus") {
		t.Fatalf("CLIENT LIST after an unknown command:\n%s", list)
	}
}

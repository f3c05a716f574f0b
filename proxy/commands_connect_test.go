package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestConnectCommands checks the commands client libraries and monitoring
// tools send on connect against Redis 7.0's replies under RESP2, without a
// password (HELLO 3 and RESP3: resp3_integration_test.go).
func TestConnectCommands(t *testing.T) {
	p := startProxy(t)
	a := adminDial(t, p)
	id := a.do("CLIENT", "ID")
	cases := []struct {
		args []string
		want string // the whole raw reply, or its prefix when it ends in "…"
	}{
		{[]string{"HELLO", "2"}, "*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n" + redisCompatVersion + "\r\n" +
			"$5\r\nproto\r\n:2\r\n$2\r\nid\r\n" + id + "$4\r\nmode\r\n$10\r\nstandalone\r\n" +
			"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"},
		{[]string{"HELLO"}, "*14\r\n…"},
		{[]string{"HELLO", "4"}, "-NOPROTO unsupported protocol version\r\n"},
		{[]string{"HELLO", "abc"}, "-ERR Protocol version is not an integer or out of range\r\n"},
		{[]string{"HELLO", "2", "SETNAME"}, "-ERR Syntax error in HELLO option 'SETNAME'\r\n"},
		{[]string{"HELLO", "2", "AUTH", "default"}, "-ERR Syntax error in HELLO option 'AUTH'\r\n"},
		{[]string{"HELLO", "2", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'\r\n"},
		{[]string{"HELLO", "2", "SETNAME", "a b"}, "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{[]string{"HELLO", "2", "SETNAME", "lib"}, "*14\r\n…"},
		{[]string{"CLIENT", "GETNAME"}, "$3\r\nlib\r\n"},
		{[]string{"CLIENT", "SETINFO", "lib-name", "go-redis(x)"}, "+OK\r\n"},
		{[]string{"CLIENT", "SETINFO", "LIB-VER", "9.23.0"}, "+OK\r\n"},
		{[]string{"CLIENT", "SETINFO", "lib-name", "a b"}, "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"},
		{[]string{"CLIENT", "SETINFO", "color", "red"}, "-ERR Unrecognized option 'color'\r\n"},
		{[]string{"SLOWLOG", "GET"}, "*0\r\n"},
		{[]string{"SLOWLOG", "GET", "5"}, "*0\r\n"},
		{[]string{"SLOWLOG", "GET", "x"}, "-ERR count should be greater than or equal to -1\r\n"},
		{[]string{"SLOWLOG", "LEN"}, ":0\r\n"},
		{[]string{"SLOWLOG", "RESET"}, "+OK\r\n"},
		{[]string{"SLOWLOG", "LEN", "x"}, "-ERR wrong number of arguments for 'slowlog|len' command\r\n"},
		{[]string{"SLOWLOG"}, "-ERR wrong number of arguments for 'slowlog' command\r\n"},
		{[]string{"SLOWLOG", "FOO"}, "-ERR unknown subcommand 'FOO'. Try SLOWLOG HELP.\r\n"},
		{[]string{"LATENCY", "LATEST"}, "*0\r\n"},
		{[]string{"LATENCY", "HISTORY", "command"}, "*0\r\n"},
		{[]string{"LATENCY", "HISTORY"}, "-ERR wrong number of arguments for 'latency|history' command\r\n"},
		{[]string{"LATENCY", "RESET"}, ":0\r\n"},
		{[]string{"LATENCY", "RESET", "a", "b"}, ":0\r\n"},
		{[]string{"LATENCY", "DOCTOR"}, "$…"},
		{[]string{"LATENCY", "FOO"}, "-ERR unknown subcommand 'FOO'. Try LATENCY HELP.\r\n"},
		{[]string{"SHUTDOWN", "FOO"}, "-ERR syntax error\r\n"},
		{[]string{"SHUTDOWN", "NOSAVE", "SAVE"}, "-ERR syntax error\r\n"},
		{[]string{"SHUTDOWN", "ABORT"}, "-ERR No shutdown in progress.\r\n"},
	}
	for _, tc := range cases {
		got := a.do(tc.args...)
		if prefix, ok := strings.CutSuffix(tc.want, "…"); ok {
			if !strings.HasPrefix(got, prefix) {
				t.Errorf("%q answered %q, want %q...", tc.args, got, prefix)
			}
		} else if got != tc.want {
			t.Errorf("%q answered %q, want %q", tc.args, got, tc.want)
		}
	}

	// TIME: seconds and microseconds, now.
	lines := strings.Split(a.do("TIME"), "\r\n")
	if len(lines) != 6 || lines[0] != "*2" {
		t.Fatalf("TIME answered %q", lines)
	}
	sec, err1 := strconv.ParseInt(lines[2], 10, 64)
	usec, err2 := strconv.ParseInt(lines[4], 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec >= 1e6 || time.Since(time.Unix(sec, usec*1000)).Abs() > 5*time.Second {
		t.Errorf("TIME answered %q", lines)
	}

	// CLIENT INFO is this client's CLIENT LIST line, and only that.
	info := a.do("CLIENT", "INFO")
	line := info[strings.Index(info, "\r\n")+2 : len(info)-2]
	if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "id="+strings.Trim(id, ":\r\n")+" ") ||
		!strings.Contains(line, " name=lib ") || !strings.Contains(line, " cmd=client|info ") {
		t.Errorf("CLIENT INFO answered %q", info)
	}
	if list := a.do("CLIENT", "LIST"); !strings.Contains(list, strings.TrimSuffix(line, "\n")[:strings.Index(line, " age=")]) {
		t.Errorf("CLIENT INFO's line %q is not in CLIENT LIST %q", line, list)
	}
}

// TestConnectCommandsAuth checks HELLO's AUTH option and SHUTDOWN with
// requirepass: HELLO without AUTH is refused, AUTH inside HELLO counts
// failures as AUTH does and lifts the pre-AUTH limits, SHUTDOWN needs AUTH.
func TestConnectCommandsAuth(t *testing.T) {
	p := startProxy(t, "--requirepass", "secret")
	a := adminDial(t, p)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"HELLO", "2"}, "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
		{[]string{"HELLO"}, "-NOAUTH HELLO must be called"},
		{[]string{"HELLO", "2", "AUTH", "default", "wrong"}, "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{[]string{"HELLO", "2", "AUTH", "other", "secret"}, "-WRONGPASS"},
		{[]string{"SHUTDOWN"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"CLIENT", "INFO"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"TIME"}, "-NOAUTH Authentication required.\r\n"},
		{[]string{"HELLO", "2", "AUTH", "default", "secret", "SETNAME", "mon"}, "*14\r\n"},
		{[]string{"CLIENT", "GETNAME"}, "$3\r\nmon\r\n"},
		{[]string{"HELLO", "2"}, "*14\r\n"},
	} {
		if got := a.do(tc.args...); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q answered %q, want %q...", tc.args, got, tc.want)
		}
	}
	if got := redistest.ParseInfo(p.Info("stats"))["acl_access_denied_auth"]; got != "2" {
		t.Errorf("acl_access_denied_auth = %q after two failed HELLO AUTH, want 2", got)
	}
	// Authenticated by HELLO: the reader left the pre-AUTH limits (a bulk
	// over Redis's pre-AUTH bound is read, not refused).
	if got := a.do("ECHO", strings.Repeat("x", 64<<10)); !strings.HasPrefix(got, "$65536\r\n") {
		t.Errorf("a large ECHO after HELLO AUTH answered %.60q", got)
	}
}

// TestShutdownCommand checks that SHUTDOWN, authenticated, stops the server
// as its context ending does: no reply, the connection closes, Run returns
// nil and the port stops accepting.
func TestShutdownCommand(t *testing.T) {
	p := startProxy(t, "--requirepass", "secret")
	a := adminDial(t, p)
	if got := a.do("AUTH", "secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH: %q", got)
	}
	other := adminDial(t, p)
	a.conn.Write([]byte("SHUTDOWN NOSAVE NOW\r\n"))
	a.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(a.rd); len(b) != 0 || err != nil {
		t.Errorf("SHUTDOWN answered %q (%v), want the connection closed", b, err)
	}
	other.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := other.rd.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("another client still connected after SHUTDOWN")
		}
	}
	// Run ended by itself: the port stops accepting before the test stops it.
	redistest.WaitFor(t, 5*time.Second, "the port closed after SHUTDOWN", func() bool {
		c, err := net.DialTimeout("tcp", p.AddrString(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Log.Contains("shutdown requested by a client") {
		t.Error("SHUTDOWN was not logged")
	}
}

// TestGoRedisConnects connects go-redis v9 (RESP3 by default: HELLO 3 with
// AUTH, then CLIENT SETNAME and CLIENT SETINFO), with and without
// requirepass, and runs what a monitoring client runs.
func TestGoRedisConnects(t *testing.T) {
	for _, pass := range []string{"", "secret"} {
		t.Run("requirepass="+pass, func(t *testing.T) {
			args := []string{}
			if pass != "" {
				args = append(args, "--requirepass", pass)
			}
			p := startProxy(t, args...)
			for _, proto := range []int{3, 2} {
				rdb := redis.NewClient(&redis.Options{
					Addr: p.AddrString(), Password: pass, Protocol: proto, ClientName: "gr" + strconv.Itoa(proto),
					MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
				})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := rdb.Ping(ctx).Err(); err != nil {
					t.Errorf("protocol %d: PING: %v", proto, err)
				}
				if info, err := rdb.Info(ctx, "replication").Result(); err != nil || !strings.Contains(info, "role:master") {
					t.Errorf("protocol %d: INFO: %v %q", proto, err, info)
				}
				if ci, err := rdb.ClientInfo(ctx).Result(); err != nil || ci.Name != "gr"+strconv.Itoa(proto) || ci.ID == 0 {
					t.Errorf("protocol %d: CLIENT INFO: %v %+v", proto, err, ci)
				}
				if _, err := rdb.Time(ctx).Result(); err != nil {
					t.Errorf("protocol %d: TIME: %v", proto, err)
				}
				if n, err := rdb.SlowLogGet(ctx, 10).Result(); err != nil || len(n) != 0 {
					t.Errorf("protocol %d: SLOWLOG GET: %v %v", proto, err, n)
				}
				cancel()
				rdb.Close()
			}
			if pass != "" {
				// A wrong password fails the connection, as against Redis.
				rdb := redis.NewClient(&redis.Options{Addr: p.AddrString(), Password: "wrong", MaxRetries: -1})
				defer rdb.Close()
				if err := rdb.Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
					t.Errorf("go-redis with a wrong password: %v, want WRONGPASS", err)
				}
			}
		})
	}
}

// TestRedisCLIConnects runs the real redis-cli against the proxy: INFO,
// HELLO 2 and CLIENT INFO, with no error in what it prints.
func TestRedisCLIConnects(t *testing.T) {
	redistest.Require(t)
	p := startProxy(t, "--requirepass", "secret")
	port := strconv.Itoa(p.Port())
	for _, args := range [][]string{{"INFO"}, {"HELLO", "2"}, {"CLIENT", "INFO"}, {"TIME"}, {"SLOWLOG", "GET"}, {"LATENCY", "LATEST"}} {
		out := redistest.RedisCLI(t, append([]string{"-h", "127.0.0.1", "-p", port, "--no-auth-warning", "-a", "secret"}, args...)...)
		if strings.Contains(out, "ERR") || strings.Contains(out, "NOAUTH") || strings.Contains(out, "Error") {
			t.Errorf("redis-cli %q printed an error: %s", args, out)
		}
		switch args[0] {
		case "INFO":
			if !strings.Contains(out, "redis_version:"+redisCompatVersion) {
				t.Errorf("redis-cli INFO: %s", out)
			}
		case "HELLO":
			if !strings.Contains(out, "proto") || !strings.Contains(out, "standalone") {
				t.Errorf("redis-cli HELLO 2: %s", out)
			}
		}
		if args[0] == "CLIENT" && !strings.HasPrefix(out, "id=") {
			t.Errorf("redis-cli CLIENT INFO: %s", out)
		}
	}
}

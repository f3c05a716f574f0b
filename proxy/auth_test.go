package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/report"
)

// TestUsersFromFiles: users come from user lines or an aclfile; ACL SAVE
// writes the aclfile and ACL LOAD reads it back, disconnecting the clients
// of the users it replaced; CONFIG REWRITE writes the users in force as
// user lines; HELLO's AUTH takes any user.
func TestUsersFromFiles(t *testing.T) {
	dir := t.TempDir()
	aclPath := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(aclPath, []byte("user ops on >ops-secret +@all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, "--aclfile", aclPath)
	a := adminDial(t, p)
	if got := a.do("HELLO", "2", "AUTH", "ops", "ops-secret"); !strings.HasPrefix(got, "*14\r\n") {
		t.Fatalf("HELLO 2 AUTH ops: %q", got)
	}
	if got := a.do("ACL", "WHOAMI"); got != "$3\r\nops\r\n" {
		t.Fatalf("ACL WHOAMI: %q", got)
	}
	a.do("ACL", "SETUSER", "monitor", "on", ">m", "+info")
	if got := a.do("ACL", "SAVE"); got != "+OK\r\n" {
		t.Fatalf("ACL SAVE: %q", got)
	}
	saved, _ := os.ReadFile(aclPath)
	if !strings.Contains(string(saved), "user monitor on #") || !strings.Contains(string(saved), "user ops on #") {
		t.Errorf("the saved aclfile:\n%s", saved)
	}
	// ACL LOAD replaces every user but default: ops's connection goes.
	if got := a.do("ACL", "LOAD"); got != "+OK\r\n" {
		t.Fatalf("ACL LOAD: %q", got)
	}
	a.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := a.rd.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("the connection of a user ACL LOAD replaced is still open after +OK: %v", err)
	}
	b := adminDial(t, p)
	if got := b.do("AUTH", "monitor", "m"); got != "+OK\r\n" {
		t.Errorf("AUTH as a user the saved file holds: %q", got)
	}
	// The aclfile gone: Redis's error, naming the file as configured and
	// the cause in strerror's words; the users stay.
	if err := os.Remove(aclPath); err != nil {
		t.Fatal(err)
	}
	ops := adminDial(t, p)
	if got := ops.do("AUTH", "ops", "ops-secret"); got != "+OK\r\n" {
		t.Fatalf("AUTH ops: %q", got)
	}
	if got, want := ops.do("ACL", "LOAD"), "-ERR Error loading ACLs, opening file '"+aclPath+"': No such file or directory\r\n"; got != want {
		t.Errorf("ACL LOAD without its file: %q, want %q", got, want)
	}
	if got := ops.do("ACL", "WHOAMI"); got != "$3\r\nops\r\n" {
		t.Errorf("ACL WHOAMI after a failed ACL LOAD: %q", got)
	}

	// CONFIG REWRITE writes user lines, never with an aclfile.
	conf := filepath.Join(dir, "replproxy.conf")
	os.WriteFile(conf, []byte("port 0\n"), 0o600)
	q := newTestProxy(t, proxySetup{args: []string{"--user", "replica", "on", ">r", "+psync"}, opts: Options{ConfigFile: conf}})
	c := adminDial(t, q)
	c.do("ACL", "SETUSER", "late", "on", "nopass", "+ping")
	if got := c.do("CONFIG", "REWRITE"); got != "+OK\r\n" {
		t.Fatalf("CONFIG REWRITE: %q", got)
	}
	text, _ := os.ReadFile(conf)
	for _, want := range []string{"user default on nopass ~* &* +@all", "user late on nopass resetchannels -@all +ping", "user replica on #"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the rewritten file lacks %q:\n%s", want, text)
		}
	}
	cfg, err := config.Parse([]string{conf})
	if err != nil {
		t.Fatalf("the rewritten file does not load: %v\n%s", err, text)
	}
	if len(cfg.Users) != 3 {
		t.Errorf("the rewritten file has %d users", len(cfg.Users))
	}
}

// TestHostileUsers: an aclfile or user lines no Redis would accept fail
// the start with Redis's error, never a crash, and grant nothing.
func TestHostileUsers(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		file string
	}{
		{name: "unknown rule", args: []string{"--user", "x", "on", "+nosuchcommand"}},
		{name: "bad hash", args: []string{"--user", "x", "#00"}},
		{name: "open selector", args: []string{"--user", "x", "(+ping"}},
		{name: "aclfile junk", file: "user\nuser x on >p +@all\n\x00\xff garbage\n"},
		{name: "aclfile comment", file: "# a comment\nuser x on nopass +@all\n"},
		{name: "aclfile unmatched parenthesis", file: "user x on +ping (+info\n"},
		{name: "aclfile missing", file: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--port", "0"}, tc.args...)
			if tc.args == nil {
				path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".acl")
				if tc.file != "" {
					os.WriteFile(path, []byte(tc.file), 0o600)
				}
				args = append(args, "--aclfile", path)
			}
			cfg, err := config.Parse(args)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
			if err == nil {
				srv.Close()
				t.Fatal("the proxy started")
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestRevokedChannels: a subscriber whose user loses the channel it is
// subscribed to is disconnected, as Redis does; one whose channels are
// still allowed stays.
func TestRevokedChannels(t *testing.T) {
	p := startProxy(t, "--user", "watcher", "on", "nopass", "+subscribe", "+ping", "&keep", "&drop")
	sub := func(ch string) *adminConn {
		a := adminDial(t, p)
		a.do("AUTH", "watcher", "x")
		if got := a.do("SUBSCRIBE", ch); !strings.Contains(got, ch) {
			t.Fatalf("SUBSCRIBE %s: %q", ch, got)
		}
		return a
	}
	keep, drop := sub("keep"), sub("drop")
	admin := adminDial(t, p)
	if got := admin.do("ACL", "SETUSER", "watcher", "resetchannels", "&keep"); got != "+OK\r\n" {
		t.Fatalf("ACL SETUSER: %q", got)
	}
	drop.conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := drop.rd.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("the subscriber to a revoked channel is still connected: %v", err)
	}
	if got := keep.do("PING"); !strings.Contains(got, "pong") {
		t.Errorf("the subscriber to an allowed channel: PING answered %q", got)
	}
}

// TestAccessOnItsOwn: access, made with no server, asks a client of a
// default user with a password to authenticate, refuses a wrong password
// (counted, in the ACL LOG, WRONGPASS) and takes the right one.
func TestAccessOnItsOwn(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.RequirePass = "secret"
	var stats report.Stats
	a, err := newAccess(cfg, &stats, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	var conf liveConfig
	conf.cur.Store(newSettings(cfg, nil))
	conn, peer := net.Pipe()
	defer peer.Close()
	defer conn.Close()
	c := newClient(1, conn, clientShared{conf: &conf, stats: &stats, limitLog: &logLimiter{}}, hclog.NewNullLogger(),
		a.users.Default(), a.defaultOpen())
	if a.defaultOpen() || !a.authRequired(c) {
		t.Fatal("a default user with a password is open")
	}
	if a.authenticate(c, []byte("AUTH"), "default", []byte("wrong")) || !strings.HasPrefix(string(c.out), "-WRONGPASS") {
		t.Fatalf("a wrong password: %q", c.out)
	}
	if stats.ACLDeniedAuth.Load() != 1 || a.aclLog.Len() != 1 {
		t.Fatalf("a wrong password counted %d times, %d ACL LOG entries; want 1, 1", stats.ACLDeniedAuth.Load(), a.aclLog.Len())
	}
	c.out = c.out[:0]
	if !a.authenticate(c, []byte("AUTH"), "default", []byte("secret")) || a.authRequired(c) {
		t.Fatal("the right password did not authenticate")
	}
}

package acl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// loadCorpus is aclfile texts TestLoadMatchesRedis loads on both sides.
var loadCorpus = []string{
	"user default on nopass ~* &* +@all\nuser alice on >a ~k* +get\n",
	"user alice on +get\n\n\nuser bob off\r\nuser carol on (+set ~c*) (+get)\n",
	"",
	"\n\n  \t\n",
	"# comment\n",
	"user a on\nuser a off\n",
	"user a on nosuch +nosuch1 >x <y +nosuch2 badop\n",
	"user\n",
	"USER a\n",
	"user a\tb on\n",
	"user  a on\n",
	"user b (+get ~y\nuser c ~x\n",
	"user default on >pw +@all -get (+get ~a) (+set)\nuser a on\n",
	"user a on +get\nuser b on -@nosuch\nuser c on ~* ~a\n",
	"user a on +@all -@dangerous ~* &*\nuser b on #" + hashOfX + " +psync +replconf +ping\n",
	"user a on \t+get\t\n",
	"user a on (+get\t~x)\n",
	"user default off +@all\n",
	"user a \"quoted\" on\n",
	"user a on +get\x00garbage\nuser b on\n",
	"user a on\x00 junk\nuser b off\x00\nbogus\n",
	// fgets reads 1023 bytes at most: where the NUL falls decides what
	// survives.
	"user " + strings.Repeat("a", 1017) + "\x00 on\nuser b on\n",
	"user " + strings.Repeat("a", 1018) + "\x00 on\nuser b on\n",
}

// TestLoadMatchesRedis loads each aclfile text of the corpus with ACL LOAD
// on a real redis-server 7.0 (started with an aclfile) and with
// Users.Load, and compares the replies and the users loaded.
func TestLoadMatchesRedis(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "users.acl")
	if err := os.WriteFile(file, []byte("user default on nopass ~* &* +@all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := redistest.StartServer(t, "--aclfile", file)
	r := redisACL{t, redistest.Dial(t, srv.Addr())}
	ours := NewUsers()
	for i, text := range loadCorpus {
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		want := r.do("ACL", "LOAD")
		var got any = "OK"
		if err := ours.Load(file, []byte(text)); err != nil {
			got = errReply(err.(*Error).Reply())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("load %d %q:\n got   %s\n redis %s", i, text, show(got), show(want))
		}
		compareLists(t, r, ours)
		// Back to the first state: the connection stays authenticated as
		// default whatever the file did to default's password, and every
		// file that defines default leaves it +@all.
		base := []byte("user default on nopass ~* &* +@all\n")
		if err := os.WriteFile(file, base, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := r.do("ACL", "LOAD"); got != "OK" {
			t.Fatalf("reload: %s", show(got))
		}
		if err := ours.Load(file, base); err != nil {
			t.Fatal(err)
		}
	}
	// ACL SAVE's file is ours, byte for byte modulo the rules' order, and
	// loads back into the same users.
	ours.Load(file, []byte(loadCorpus[1]))
	os.WriteFile(file, []byte(loadCorpus[1]), 0o644)
	r.do("ACL", "LOAD")
	r.do("ACL", "SAVE")
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := normLines(string(ours.Save())), normLines(string(saved)); got != want {
		t.Errorf("ACL SAVE:\n got   %q\n redis %q", got, want)
	}
	again := NewUsers()
	if err := again.Load(file, saved); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.List(), ours.List()) {
		t.Errorf("Load(Save()) = %q, want %q", again.List(), ours.List())
	}
}

// TestConfigUsersMatchesRedis starts redis-server with configuration files
// whose user lines are wrong and compares its error with ours.
func TestConfigUsersMatchesRedis(t *testing.T) {
	bin, _ := redistest.Require(t)
	for _, tc := range []struct {
		lines []string // lines of the configuration file
		// log is true when Redis reports the error in its log at startup
		// (ApplyConfig's), false when it reports it while reading the file
		// (Add's).
		log bool
	}{
		{[]string{`user alice on badrule`}, false},
		{[]string{`user alice on +get nosuch`}, false},
		{[]string{`user alice on (+get`}, false},
		{[]string{`user alice (+get`}, false},
		{[]string{`user alice on ~a ~* ~b`}, false},
		{[]string{`user alice on >x <y`}, false},
		{[]string{`user alice #abc`}, false},
		{[]string{`user bob on +get`, `user bob off`}, false},
		{[]string{`user alice on +nosuch`}, true},
		{[]string{`user "a b" on`}, true},
		{[]string{`user ok on +get`, `user alice on -@nosuch`}, true},
		{[]string{`acl-pubsub-default allchannels`, `user alice on &news`}, false},
	} {
		var conf strings.Builder
		port := redistest.FreePort(t)
		fmt.Fprintf(&conf, "port %d\nbind 127.0.0.1\nsave \"\"\n", port)
		var cu ConfigUsers
		var got error
		for _, l := range tc.lines {
			conf.WriteString(l + "\n")
			args, ok := splitArgs(l)
			if !ok {
				t.Fatalf("%q: bad quotes", l)
			}
			switch {
			case args[0] == "acl-pubsub-default":
				cu.AllChannels = args[1] == "allchannels"
			case got == nil:
				got = cu.Add(args)
			}
		}
		if got == nil {
			_, got = NewUsers().ApplyConfig(&cu)
		}
		path := filepath.Join(t.TempDir(), "redis.conf")
		if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, path)
		cmd.Dir = t.TempDir()
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		exited := redistest.StartProcess(t, cmd)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("%q: redis-server did not exit", tc.lines)
		}
		if got == nil {
			t.Errorf("%q: no error; redis-server said:\n%s", tc.lines, out)
			continue
		}
		if !strings.Contains(out.String(), got.Error()) {
			t.Errorf("%q: our error %q is not in redis-server's output:\n%s", tc.lines, got, out)
		}
		if tc.log != strings.Contains(out.String(), "Critical error while loading ACLs") {
			t.Errorf("%q: redis-server reported it at another stage than expected:\n%s", tc.lines, out)
		}
	}
}

package acl

import (
	"testing"
)

func TestCanRun(t *testing.T) {
	s := NewUsers()
	sentinel := mustSetUser(t, s, "sentinel", "on", "allchannels", "+multi", "+slaveof", "+ping", "+exec", "+subscribe",
		"+config|rewrite", "+role", "+publish", "+info", "+client|setname", "+client|kill", "+script|kill")
	first := mustSetUser(t, s, "first", "on", "+select|0", "+client", "-client|kill", "(+get)")
	for _, tc := range []struct {
		u        *User
		cmd, sub string
		want     bool
	}{
		{sentinel, "ping", "", true},
		{sentinel, "PING", "", true},
		{sentinel, "config", "rewrite", true},
		{sentinel, "CONFIG", "REWRITE", true},
		{sentinel, "config", "get", false},
		{sentinel, "config", "", false},
		{sentinel, "config", "nosuch", false},
		{sentinel, "client", "setname", true},
		{sentinel, "client", "list", false},
		{sentinel, "script", "kill", true},
		{sentinel, "script", "flush", false},
		{sentinel, "get", "", false},
		{sentinel, "auth", "", true}, // no_auth: any user
		{sentinel, "hello", "3", true},
		{sentinel, "nosuch", "", false},
		{first, "select", "0", true},
		{first, "select", "1", false},
		{first, "select", "", false},
		{first, "client", "list", true},
		{first, "client", "kill", false},
		{first, "client", "", true},
		{first, "get", "k", true}, // by the selector
		{first, "set", "k", false},
	} {
		if got := tc.u.CanRun(tc.cmd, tc.sub); got != tc.want {
			t.Errorf("%s CanRun(%q, %q) = %v, want %v", tc.u.Name(), tc.cmd, tc.sub, got, tc.want)
		}
	}
}

// TestCheck checks whole commands: command, keys and channels, one
// selector having to allow all three, and the refusal reported.
func TestCheck(t *testing.T) {
	s := NewUsers()
	u := mustSetUser(t, s, "u", "on", "+get", "+set", "+publish", "+psubscribe", "+subscribe", "~k*", "&news.*",
		"(+get %R~r*)", "(+set %W~w* &other)")
	p := u.Profile()
	for _, tc := range []struct {
		args   []string
		reason Reason // 0: allowed
		object string
		err    string
	}{
		{[]string{"get", "k1"}, 0, "", ""},
		{[]string{"get", "r1"}, 0, "", ""},
		{[]string{"get", "w1"}, ReasonKey, "w1", "NOPERM this user has no permissions to access one of the keys used as arguments"},
		{[]string{"set", "w1", "v"}, 0, "", ""},
		{[]string{"set", "r1", "v"}, ReasonKey, "r1", ""},
		{[]string{"ping"}, ReasonCommand, "ping", "NOPERM this user has no permissions to run the 'ping' command"},
		{[]string{"config", "get", "x"}, ReasonCommand, "config|get", "NOPERM this user has no permissions to run the 'config|get' command"},
		{[]string{"publish", "news.a", "m"}, 0, "", ""},
		{[]string{"publish", "sport", "m"}, ReasonChannel, "sport", "NOPERM this user has no permissions to access one of the channels used as arguments"},
		{[]string{"subscribe", "news.a", "news.b", "sport"}, ReasonChannel, "sport", ""},
		{[]string{"psubscribe", "news.*"}, 0, "", ""},
		{[]string{"psubscribe", "news.a"}, ReasonChannel, "news.a", ""}, // a pattern must equal a rule
		{[]string{"nosuch"}, ReasonCommand, "nosuch", ""},
		{[]string{"AUTH", "x"}, 0, "", ""},
	} {
		d := p.Check(bs(tc.args...))
		switch {
		case tc.reason == 0 && d != nil:
			t.Errorf("Check(%q) = %+v, want allowed", tc.args, d)
		case tc.reason != 0 && (d == nil || d.Reason != tc.reason || d.Object != tc.object):
			t.Errorf("Check(%q) = %+v, want %v on %q", tc.args, d, tc.reason, tc.object)
		case tc.err != "" && d.Error() != tc.err:
			t.Errorf("Check(%q).Error() = %q, want %q", tc.args, d.Error(), tc.err)
		}
	}
}

func TestChannels(t *testing.T) {
	s := NewUsers()
	p := mustSetUser(t, s, "u", "&news.*", "&exact", "(&other*)").Profile()
	for _, tc := range []struct {
		channel   string
		sub, psub bool
	}{
		{"news.a", true, false}, {"news.*", true, true}, {"exact", true, true}, {"other1", true, false},
		{"other*", true, true}, {"sport", false, false}, {"exact\x00x", false, true},
	} {
		if got := p.CanSubscribe(tc.channel); got != tc.sub {
			t.Errorf("CanSubscribe(%q) = %v", tc.channel, got)
		}
		if got := p.CanPSubscribe(tc.channel); got != tc.psub {
			t.Errorf("CanPSubscribe(%q) = %v", tc.channel, got)
		}
	}
	all := mustSetUser(t, s, "all", "allchannels").Profile()
	if !all.CanSubscribe("x") || !all.CanPSubscribe("*") {
		t.Error("allchannels refused")
	}
}

func TestChannelsRevoked(t *testing.T) {
	s := NewUsers()
	profile := func(rules ...string) *Profile {
		u, _, err := s.SetUser("tmp", bs(append([]string{"reset"}, rules...)...))
		if err != nil {
			t.Fatal(err)
		}
		return u.Profile()
	}
	for _, tc := range []struct {
		prev, next []string
		want       bool
	}{
		{[]string{"&a"}, []string{"&a", "&b"}, false},
		{[]string{"&a", "&b"}, []string{"&a"}, true},
		{[]string{"&a"}, []string{"allchannels"}, false},
		{[]string{"allchannels"}, []string{"&a"}, true},
		{[]string{"&a"}, []string{"(&a)"}, false},
		{[]string{"(&x)"}, []string{"&y", "(&*)"}, false},
		{nil, []string{"&a"}, false},
		{[]string{"&a*"}, []string{"&ab"}, true},
	} {
		if got := ChannelsRevoked(profile(tc.prev...), profile(tc.next...)); got != tc.want {
			t.Errorf("ChannelsRevoked(%q, %q) = %v", tc.prev, tc.next, got)
		}
	}
}

// TestDryRun checks DRYRUN's replies, errors included.
func TestDryRun(t *testing.T) {
	s := NewUsers()
	mustSetUser(t, s, "u", "on", "+get", "+config|get", "%R~k*", "&c")
	for _, tc := range []struct {
		args []string
		want Value
	}{
		{[]string{"u", "get", "k1"}, okValue},
		{[]string{"u", "get", "x"}, bulk("This user has no permissions to access the 'x' key")},
		{[]string{"u", "set", "k1", "v"}, bulk("This user has no permissions to run the 'set' command")},
		{[]string{"u", "config", "get", "x"}, okValue},
		{[]string{"u", "config", "set", "x", "y"}, bulk("This user has no permissions to run the 'config|set' command")},
		{[]string{"u", "get"}, errorValue(newError("wrong number of arguments for 'get' command"))},
		{[]string{"u", "nosuch"}, errorValue(newError("Command 'nosuch' not found"))},
		{[]string{"u", "config", "nosuch"}, errorValue(newError("Command 'config' not found"))},
		{[]string{"nobody", "get", "k"}, errorValue(newError("User 'nobody' not found"))},
		{[]string{"default", "flushall"}, okValue},
	} {
		if got := s.DryRun(bs(tc.args...)); got.Kind != tc.want.Kind || got.Str != tc.want.Str {
			t.Errorf("DryRun(%q) = %+v, want %+v", tc.args, got, tc.want)
		}
	}
}

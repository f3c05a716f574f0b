package acl

import (
	"slices"
	"strings"
	"testing"
)

// TestSetUserRules applies rule lists to a new user and checks the reply
// and the ACL LIST line (expected lines taken from redis-server 7.0.15,
// single-command rules in this package's order).
func TestSetUserRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []string
		err   string // the error's Msg; "" for none
		line  string // Rules() after the rules
	}{
		{"new user", nil, "", "off resetchannels -@all"},
		{"replication", []string{"on", ">x", "+psync", "+replconf", "+ping"}, "",
			"on #" + hashOfX + " resetchannels -@all +ping +psync +replconf"},
		{"sentinel", []string{"on", "allchannels", "+multi", "+slaveof", "+ping", "+exec", "+subscribe", "+config|rewrite",
			"+role", "+publish", "+info", "+client|setname", "+client|kill", "+script|kill"}, "",
			"on &* -@all +client|kill +client|setname +config|rewrite +exec +info +multi +ping +publish +role +script|kill +slaveof +subscribe"},
		{"admin", []string{"on", "+@all", "~*", "&*"}, "", "on ~* &* +@all"},
		{"all but dangerous", []string{"+@all", "-@dangerous"}, "", "off resetchannels +@all -@dangerous"},
		{"read but get", []string{"+@read", "-get"}, "", "off resetchannels -@all +@read -get"},
		{"container then sub", []string{"+config", "-config|set"}, "", "off resetchannels -@all +config -config|set"},
		{"first args", []string{"+select|0", "+SELECT|0", "+select|1"}, "", "off resetchannels -@all +select|0 +select|1"},
		{"first args hidden", []string{"+select", "+select|0"}, "", "off resetchannels -@all +select"},
		{"first args reset by -cmd", []string{"+select|0", "-select"}, "", "off resetchannels -@all"},
		{"future commands kept", []string{"+@all", "-@all", "+get", "allcommands", "-set"}, "", "off resetchannels +@all -set"},
		{"keys", []string{"~a", "%R~b", "%W~c", "%RW~d", "%R~a", "%W~b"}, "", "off ~a ~b %W~c ~d resetchannels -@all"},
		{"allkeys", []string{"~a", "allkeys"}, "", "off ~* resetchannels -@all"},
		{"channels", []string{"&a", "&b", "&a"}, "", "off resetchannels &a &b -@all"},
		{"passwords", []string{">a", ">b", "<a", "nopass", ">x"}, "", "off #" + hashOfX + " resetchannels -@all"},
		{"selectors", []string{"(+get ~k*)", "(", "+set", "&c)", "+ping"}, "",
			"off resetchannels -@all +ping (~k* resetchannels -@all +get) (resetchannels &c -@all +set)"},
		{"clearselectors", []string{"(+get)", "clearselectors"}, "", "off resetchannels -@all"},
		{"flags", []string{"on", "skip-sanitize-payload", "nopass"}, "", "on nopass skip-sanitize-payload resetchannels -@all"},
		{"reset", []string{"on", ">x", "~*", "&*", "+@all", "(+get)", "reset"}, "", "off sanitize-payload resetchannels -@all"},
		{"empty rule", []string{"", "on"}, "", "on resetchannels -@all"},
		{"unknown command", []string{"+nosuch"}, "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL", ""},
		{"unknown category", []string{"+@nosuch"}, "Error in ACL SETUSER modifier '+@nosuch': Unknown command or category name in ACL", ""},
		{"syntax", []string{"on", "bogus"}, "Error in ACL SETUSER modifier 'bogus': Syntax error", ""},
		{"keys after all", []string{"allkeys", "~a"}, "Error in ACL SETUSER modifier '~a': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns", ""},
		{"channels after all", []string{"&*", "&a"}, "Error in ACL SETUSER modifier '&a': Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels", ""},
		{"hash", []string{"#abc"}, "Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters", ""},
		{"no password", []string{"<x"}, "Error in ACL SETUSER modifier '<x': The password you are trying to remove from the user does not exist", ""},
		{"sub of sub", []string{"+config|get|x"}, "Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported", ""},
		{"empty first arg", []string{"+select|"}, "Error in ACL SETUSER modifier '+select|': Syntax error", ""},
		{"-cmd|firstarg", []string{"-select|0"}, "Error in ACL SETUSER modifier '-select|0': Unknown command or category name in ACL", ""},
		{"key pattern without R or W", []string{"%~k"}, "Error in ACL SETUSER modifier '%~k': Syntax error", ""},
		{"unmatched", []string{"on", "(+get", "~a"}, "Unmatched parenthesis in acl selector starting at '(+get'.", ""},
		{"bad rule in selector", []string{"(+get on)"}, "Error in ACL SETUSER modifier '(+get on)': Syntax error", ""},
		{"NUL ends the rule's text", []string{"bogus\x00x"}, "Error in ACL SETUSER modifier 'bogus': Syntax error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewUsers()
			u, prev, err := s.SetUser("u", bs(tc.rules...))
			switch {
			case tc.err != "":
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if e := err.(*Error); e.Reply() != "ERR "+tc.err {
					t.Fatalf("Reply() = %q", e.Reply())
				}
				if s.Lookup("u") != nil {
					t.Fatal("a refused SETUSER created the user")
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			case prev != nil:
				t.Fatal("prev is not nil for a new user")
			case u.Profile().Rules() != tc.line:
				t.Fatalf("rules\n got  %q\n want %q", u.Profile().Rules(), tc.line)
			}
		})
	}
}

// TestSetUserAllOrNothing checks that a refused SETUSER leaves an existing
// user as it was, and that an accepted one returns the previous profile.
func TestSetUserAllOrNothing(t *testing.T) {
	s := NewUsers()
	u := mustSetUser(t, s, "u", "on", ">x", "+get", "~a")
	before := u.Profile()
	if _, _, err := s.SetUser("u", bs("+set", "-@all", "resetpass", "bogus")); err == nil {
		t.Fatal("bogus accepted")
	}
	if u.Profile() != before {
		t.Fatal("a refused SETUSER changed the profile")
	}
	u2, prev, err := s.SetUser("u", bs("+set"))
	if err != nil || u2 != u || prev != before || u.Profile() == before {
		t.Fatalf("SetUser = %p %p %v; user %p, before %p", u2, prev, err, u, before)
	}
	if got := u.Profile().Rules(); got != "on #"+hashOfX+" ~a resetchannels -@all +get +set" {
		t.Fatalf("rules %q", got)
	}
	if !before.CanRun("get", "") || before.CanRun("set", "") {
		t.Fatal("the previous profile changed")
	}
}

// TestSetUserNames checks the names Redis refuses.
func TestSetUserNames(t *testing.T) {
	s := NewUsers()
	for _, name := range []string{"a b", "a\x00", "\t", "a\nb"} {
		if _, _, err := s.SetUser(name, nil); err == nil || err.Error() != "Usernames can't contain spaces or null characters" {
			t.Errorf("SetUser(%q): %v", name, err)
		}
	}
	for _, name := range []string{"", "é", "a|b", "(x)"} {
		if _, _, err := s.SetUser(name, nil); err != nil {
			t.Errorf("SetUser(%q): %v", name, err)
		}
	}
}

func TestMergeSelectors(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
		open int
	}{
		{[]string{"on", "(+get", "~a)", "off"}, []string{"on", "(+get ~a)", "off"}, -1},
		{[]string{"(+get)", "()"}, []string{"(+get)", "()"}, -1},
		{[]string{"(", "+get", ")"}, []string{"( +get )"}, -1},
		{[]string{"(a", "(b", "c)"}, []string{"(b c)"}, -1},
		{[]string{"on", "(+get", "~a"}, []string{"on"}, 1},
		{[]string{"(a", "", "x\x00y)"}, []string{"(a  x"}, -1},
	} {
		got, open := mergeSelectors(tc.in)
		if !slices.Equal(got, tc.want) || open != tc.open {
			t.Errorf("mergeSelectors(%q) = %q %d, want %q %d", tc.in, got, open, tc.want, tc.open)
		}
	}
}

// TestDefaultUser checks the default user as Redis creates it, and
// requirepass.
func TestDefaultUser(t *testing.T) {
	s := NewUsers()
	d := s.Default()
	if d.Name() != "default" || d.Profile().Rules() != "on nopass ~* &* +@all" || s.Lookup("default") != d {
		t.Fatalf("default: %q", d.Profile().Rules())
	}
	if _, ok := s.Authenticate("default", []byte("anything")); !ok {
		t.Fatal("nopass default refused a password")
	}
	s.SetDefaultPassword("secret")
	if got := d.Profile().Rules(); !strings.HasPrefix(got, "on #") || strings.Contains(got, "nopass") {
		t.Fatalf("after requirepass: %q", got)
	}
	if _, ok := s.Authenticate("default", []byte("anything")); ok {
		t.Fatal("wrong password accepted")
	}
	if u, ok := s.Authenticate("default", []byte("secret")); !ok || u != d {
		t.Fatal("requirepass refused")
	}
	s.SetDefaultPassword("")
	if got := d.Profile().Rules(); got != "on nopass ~* &* +@all" {
		t.Fatalf("after requirepass \"\": %q", got)
	}
}

func TestAuthenticate(t *testing.T) {
	s := NewUsers()
	mustSetUser(t, s, "on", "on", ">pw", ">other")
	mustSetUser(t, s, "off", "off", ">pw")
	mustSetUser(t, s, "open", "on", "nopass")
	mustSetUser(t, s, "nopw", "on")
	mustSetUser(t, s, "hashed", "on", "#"+hashOfX)
	for _, tc := range []struct {
		user, pass string
		ok         bool
	}{
		{"on", "pw", true}, {"on", "other", true}, {"on", "PW", false}, {"on", "", false},
		{"off", "pw", false}, {"nosuch", "pw", false}, {"open", "x", true}, {"open", "", true},
		{"nopw", "", false}, {"hashed", "x", true}, {"hashed", "y", false},
	} {
		u, ok := s.Authenticate(tc.user, []byte(tc.pass))
		if ok != tc.ok || (ok && u.Name() != tc.user) || (!ok && u != nil) {
			t.Errorf("Authenticate(%q, %q) = %v %v, want %v", tc.user, tc.pass, u, ok, tc.ok)
		}
	}
}

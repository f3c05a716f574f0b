package acl

import (
	"slices"
	"strings"
	"testing"
)

const warnNoChange = "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text, err string
	}{
		{"comment", "# users\n", "f.acl:1 should start with user keyword followed by the username. "},
		{"no name", "user\n", "f.acl:1 should start with user keyword followed by the username. "},
		{"case", "USER a\n", "f.acl:1 should start with user keyword followed by the username. "},
		{"duplicate", "\nuser a on\nuser a off\n", "WARNING: Duplicate user 'a' found on line 3. "},
		{"tab in name", "user a\tb on\n", "'f.acl:1: username 'a\tb' contains invalid characters. "},
		{"rules", "user a on nosuch +nosuch1 >x <y +nosuch2 badop\n",
			"f.acl:1: Syntax error. f.acl:1: Error in applying operation '+nosuch1': Unknown command or category name in ACL. " +
				"f.acl:1: Error in applying operation '+nosuch2': Unknown command or category name in ACL. "},
		{"unmatched", "user a (+get ~y\nuser b bogus\n",
			"f.acl:1: Unmatched parenthesis in selector definition.f.acl:2: Syntax error. "},
		{"unmatched after rules", "user a on +get (~x\n", "f.acl:1: Unmatched parenthesis in selector definition."},
		{"several lines", "user a on\nbogus\nuser b bogus\n",
			"f.acl:2 should start with user keyword followed by the username. f.acl:3: Syntax error. "},
		// Redis reads the file with fgets and appends each buffer as a C
		// string: a NUL drops the rest of its line, newline included.
		{"NUL joins lines", "user a on\x00 junk\nuser b off\x00\nbogus\n", "f.acl:1: Syntax error. "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewUsers()
			mustSetUser(t, s, "keep", "on")
			keep := s.Lookup("keep")
			err := s.Load("f.acl", []byte(tc.text))
			if err == nil || err.Error() != tc.err+warnNoChange {
				t.Fatalf("Load: %v\nwant %q", err, tc.err+warnNoChange)
			}
			if keep.Deleted() || s.Lookup("keep") != keep || len(s.Names()) != 2 {
				t.Fatal("a refused Load changed the users")
			}
		})
	}
}

func TestLoad(t *testing.T) {
	s := NewUsers()
	old := mustSetUser(t, s, "alice", "on", "+get")
	def := s.Default()
	text := "user alice on >a ~k* +get\r\n\n  user bob off (+set ~b) \t\nuser carol on +get  +set\n"
	if err := s.Load("f.acl", []byte(text)); err != nil {
		t.Fatal(err)
	}
	if !old.Deleted() || s.Lookup("alice") == old || s.Lookup("alice").Deleted() {
		t.Fatal("the old alice was not retired for a new one")
	}
	if s.Default() != def || def.Deleted() || def.Profile().Rules() != "on nopass ~* &* +@all" {
		t.Fatalf("default: %q", def.Profile().Rules())
	}
	want := []string{
		"user alice on #ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb ~k* resetchannels -@all +get",
		"user bob off resetchannels -@all (~b resetchannels -@all +set)",
		"user carol on resetchannels -@all +get +set",
		"user default on nopass ~* &* +@all",
	}
	if got := s.List(); !slices.Equal(got, want) {
		t.Fatalf("List() = %q", got)
	}
	if got := string(s.Save()); got != strings.Join(want, "\n")+"\n" {
		t.Fatalf("Save() = %q", got)
	}
	// A file that defines default gives it its rules, from a new user's.
	if err := s.Load("f.acl", []byte("user default on >pw +@all\n")); err != nil {
		t.Fatal(err)
	}
	if got := s.List(); len(got) != 1 || !strings.HasPrefix(got[0], "user default on #") || !strings.HasSuffix(got[0], " resetchannels +@all") {
		t.Fatalf("List() = %q", got)
	}
	// An empty file leaves Redis's default user alone.
	if err := s.Load("f.acl", nil); err != nil || !slices.Equal(s.List(), []string{"user default on nopass ~* &* +@all"}) {
		t.Fatalf("Load(empty) = %v, %q", err, s.List())
	}
}

func TestReadLikeFgets(t *testing.T) {
	long := strings.Repeat("x", 1030)
	for _, tc := range []struct{ in, want string }{
		{"a\nb\n", "a\nb\n"},
		{"a\x00b\nc", "ac"},
		{"a\x00b", "a"},
		{long[:1023] + "\x00" + "tail\n", long[:1023]},
		{long[:1022] + "\x00" + "tail\n", long[:1022] + "tail\n"},
	} {
		if got := readLikeFgets([]byte(tc.in)); got != tc.want {
			t.Errorf("readLikeFgets(%q…) = %q…", clip(tc.in, 20), clip(got, 20))
		}
	}
}

func TestConfigUsers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		err   string // from Add or ApplyConfig
		list  []string
		notes int
	}{
		{"users", []string{`user alice on >a +get`, `user bob +set`}, "",
			[]string{"user alice on #ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb resetchannels -@all +get",
				"user bob off resetchannels -@all +set", "user default on nopass ~* &* +@all"}, 1},
		{"default reset first", []string{`user default on nopass +get`}, "",
			[]string{"user default on nopass sanitize-payload resetchannels -@all +get"}, 0},
		{"selector over arguments", []string{`user a on "(+get" "~x)"`}, "",
			[]string{"user a on resetchannels -@all (~x resetchannels -@all +get)", "user default on nopass ~* &* +@all"}, 0},
		{"wrong argument named", []string{`user alice on +get nosuch`}, "Error in user declaration 'on': Syntax error", nil, 0},
		{"duplicate", []string{`user a on`, `user a off`}, "Error in user declaration 'a': Duplicate user found. A user can only be defined once in config files", nil, 0},
		{"unmatched", []string{`user alice on (+get`}, "Error in user declaration 'alice': Unknown command or category name in ACL", nil, 0},
		{"unknown command later", []string{`user a on +nosuch`}, "Error loading ACL rule '+nosuch' for the user named 'a': Unknown command or category name in ACL", nil, 0},
		{"spaces", []string{`user "a b" on`}, "Spaces not allowed in ACL usernames", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewUsers()
			var c ConfigUsers
			var err error
			for _, l := range tc.lines {
				args, _ := splitArgs(l)
				if err = c.Add(args); err != nil {
					break
				}
			}
			var notes []string
			if err == nil {
				notes, err = s.ApplyConfig(&c)
			}
			switch {
			case tc.err != "":
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if len(s.Names()) != 1 {
					t.Fatal("a refused configuration created users")
				}
			case err != nil:
				t.Fatal(err)
			case !slices.Equal(s.List(), tc.list) || len(notes) != tc.notes:
				t.Fatalf("List() = %q, notices %q", s.List(), notes)
			}
		})
	}
}

package acl

import (
	"slices"
	"strings"
	"testing"
)

func TestSubcommand(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		hasFile bool
		sub     string
		err     string
	}{
		{[]string{"ACL", "SETUSER", "u"}, false, "setuser", ""},
		{[]string{"acl", "GetUser", "u"}, false, "getuser", ""},
		{[]string{"ACL", "LIST"}, false, "list", ""},
		{[]string{"ACL", "CAT", "read"}, false, "cat", ""},
		{[]string{"ACL", "LOG", "RESET"}, false, "log", ""},
		{[]string{"ACL", "DRYRUN", "u", "get", "k"}, false, "dryrun", ""},
		{[]string{"ACL", "LOAD"}, true, "load", ""},
		{[]string{"ACL", "LOAD"}, false, "", ErrNoACLFile},
		{[]string{"ACL", "SAVE", "x"}, false, "", "wrong number of arguments for 'acl|save' command"},
		{[]string{"ACL", "GETUSER"}, false, "", "wrong number of arguments for 'acl|getuser' command"},
		{[]string{"ACL", "CAT", "a", "b"}, false, "", "unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP."},
		{[]string{"acl", "nosuch"}, false, "", "unknown subcommand 'nosuch'. Try ACL HELP."},
		{[]string{"ACL"}, false, "", "wrong number of arguments for 'acl' command"},
	} {
		sub, err := Subcommand(bs(tc.args...), tc.hasFile)
		gotErr := ""
		if err != nil {
			gotErr = err.Msg
		}
		if sub != tc.sub || gotErr != tc.err {
			t.Errorf("Subcommand(%q, %v) = %q %q, want %q %q", tc.args, tc.hasFile, sub, gotErr, tc.sub, tc.err)
		}
	}
}

func TestGenPass(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		size int // characters; -1 for an error
	}{
		{"", 64}, {"1", 1}, {"4", 1}, {"5", 2}, {"256", 64}, {"4096", 1024}, {"0", -1}, {"4097", -1}, {"x", -1}, {"-1", -1},
	} {
		var args [][]byte
		if tc.arg != "" {
			args = bs(tc.arg)
		}
		v := GenPass(args)
		if tc.size < 0 {
			if v.Kind != KindError {
				t.Errorf("GENPASS %q = %+v, want an error", tc.arg, v)
			}
			continue
		}
		if v.Kind != KindBulk || len(v.Str) != tc.size || strings.Trim(v.Str, "0123456789abcdef") != "" {
			t.Errorf("GENPASS %q = %+v", tc.arg, v)
		}
	}
	if a, b := GenPass(nil), GenPass(nil); a.Str == b.Str {
		t.Error("two passwords are the same")
	}
}

func TestCat(t *testing.T) {
	if got := plainOf(Cat(nil)); len(got.([]any)) != 21 {
		t.Fatalf("ACL CAT = %v", got)
	}
	var names []string
	for _, v := range Cat(bs("transaction")).Elems {
		names = append(names, v.Str)
	}
	if want := []string{"discard", "exec", "multi", "unwatch", "watch"}; !slices.Equal(names, want) {
		t.Fatalf("ACL CAT transaction = %q, want %q", names, want)
	}
	if v := Cat(bs(strings.Repeat("z", 200))); v.Kind != KindError || v.Str != "ERR Unknown category '"+strings.Repeat("z", 128)+"'" {
		t.Fatalf("ACL CAT unknown = %+v", v)
	}
	if got := Categories(); got[0] != "keyspace" || len(got) != 21 {
		t.Fatalf("Categories() = %q", got)
	}
}

func TestHelp(t *testing.T) {
	v := Help()
	if len(v.Elems) != 29 || v.Elems[0].Kind != KindSimple || v.Elems[28].Str != "    Prints this help." {
		t.Fatalf("ACL HELP = %+v", v)
	}
}

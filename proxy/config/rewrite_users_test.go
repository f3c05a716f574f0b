package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestUserLines: user lines accumulate in order, from the file and the
// command line; CONFIG SET and CONFIG GET know no such directive; CONFIG
// REWRITE writes them back (quoted where needed) unless an aclfile holds
// the users; and both at once are refused, as Redis refuses them.
func TestUserLines(t *testing.T) {
	c := DefaultConfig()
	text := "user replica on >s3cret +psync +replconf +ping\nuser 'mon itor' on \">a b\" +info\n"
	if err := c.Load("u.conf", text); err != nil {
		t.Fatal(err)
	}
	if err := c.applyArgs([]string{"--user", "admin", "on", "nopass", "+@all"}, 1); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"replica", "on", ">s3cret", "+psync", "+replconf", "+ping"}, {"mon itor", "on", ">a b", "+info"}, {"admin", "on", "nopass", "+@all"}}
	if !reflect.DeepEqual(c.Users, want) {
		t.Fatalf("Users %q, want %q", c.Users, want)
	}
	if _, ok := c.Get("user"); ok {
		t.Error("CONFIG GET knows user")
	}
	if Mutable("user") {
		t.Error("CONFIG SET may set user")
	}
	rw := c.Rewrite(text + "port 7000\n")
	again := DefaultConfig()
	if err := again.Load("rw.conf", rw); err != nil {
		t.Fatalf("Load(Rewrite): %v\n%s", err, rw)
	}
	if !reflect.DeepEqual(again.Users, want) {
		t.Errorf("users after a rewrite %q, want %q\n%s", again.Users, want, rw)
	}
	if n := strings.Count(rw, "\nuser ") + btoi(strings.HasPrefix(rw, "user ")); n != 3 {
		t.Errorf("%d user lines in the rewrite, want 3:\n%s", n, rw)
	}
	if err := c.Set("user"); !errors.Is(err, ErrArgCount) {
		t.Errorf("user with no name: %v", err)
	}
	c.ACLFile = "/etc/users.acl"
	if err := c.Validate(); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("user lines and an aclfile: %v, want refused", err)
	}
	if rw := c.Rewrite(text); strings.Contains(rw, "user ") {
		t.Errorf("a rewrite with an aclfile keeps user lines:\n%s", rw)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

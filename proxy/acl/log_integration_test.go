package acl

import (
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestLogMatchesRedis makes Redis refuse a command, a key, a channel, an
// AUTH and a command queued in MULTI, and compares its ACL LOG with ours
// fed the same events: every field but the age (a double either way) and
// the client info (the server's).
func TestLogMatchesRedis(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	r := redisACL{t, redistest.Dial(t, srv.Addr())}
	r.do("ACL", "SETUSER", "lg", "on", ">pw", "+get", "+multi", "+exec", "+publish", "~k*", "&c*")
	c, err := redistest.DialOpts(t, srv.Addr(), redistest.DialOptions{Username: "lg", Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]any{
		{"SET", "k", "v"}, {"GET", "x"}, {"PUBLISH", "d", "m"}, {"GET", "x"}, {"MULTI"}, {"SET", "k", "v"}, {"EXEC"},
		{"AUTH", "lg", "wrong"}, {"auth", "nobody", "x"},
	} {
		c.Do(cmd...)
	}
	ours := NewLog(DefaultLogMaxLen)
	for _, e := range []Event{
		{Reason: ReasonCommand, Context: ContextToplevel, Object: "set", Username: "lg"},
		{Reason: ReasonKey, Context: ContextToplevel, Object: "x", Username: "lg"},
		{Reason: ReasonChannel, Context: ContextToplevel, Object: "d", Username: "lg"},
		{Reason: ReasonKey, Context: ContextToplevel, Object: "x", Username: "lg"},
		{Reason: ReasonCommand, Context: ContextMulti, Object: "set", Username: "lg"},
		{Reason: ReasonAuth, Context: ContextToplevel, Object: "AUTH", Username: "lg"},
		{Reason: ReasonAuth, Context: ContextToplevel, Object: "auth", Username: "nobody"},
	} {
		ours.Add(e, time.Now())
	}
	strip := func(v any) any {
		entries := v.([]any)
		for i, e := range entries {
			fields := slices.Clone(e.([]any))
			if len(fields) != 14 || fields[10] != "age-seconds" || fields[12] != "client-info" {
				t.Fatalf("entry %d: %s", i, show(e))
			}
			if _, err := strconv.ParseFloat(fields[11].(string), 64); err != nil {
				t.Fatalf("entry %d: age-seconds %q", i, fields[11])
			}
			fields[11], fields[13] = "age", "client"
			entries[i] = fields
		}
		return entries
	}
	if got, want := strip(plainOf(ours.Command(nil, time.Now()))), strip(r.do("ACL", "LOG")); !reflect.DeepEqual(got, want) {
		t.Errorf("ACL LOG:\n got   %s\n redis %s", show(got), show(want))
	}
}

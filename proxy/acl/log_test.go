package acl

import (
	"fmt"
	"testing"
	"time"
)

// testNow is a fixed time for the log's tests.
var testNow = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func TestLogEntry(t *testing.T) {
	l := NewLog(DefaultLogMaxLen)
	l.Add(Event{Reason: ReasonCommand, Context: ContextMulti, Object: "get", Username: "u", ClientInfo: "id=1"}, testNow)
	got := plainOf(l.Command(nil, testNow.Add(1234*time.Millisecond)))
	want := []any{[]any{"count", int64(1), "reason", "command", "context", "multi", "object", "get", "username", "u",
		"age-seconds", "1.234", "client-info", "id=1"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ACL LOG = %v\nwant %v", got, want)
	}
	if v := l.Command(nil, testNow); v.Elems[0].Kind != KindMap || v.Elems[0].Elems[11].Kind != KindDouble {
		t.Fatal("an entry is not a map, or its age not a double")
	}
}

// TestLogGrouping checks that like refusals within a minute share an
// entry, which becomes the newest and takes the last client info.
func TestLogGrouping(t *testing.T) {
	l := NewLog(DefaultLogMaxLen)
	ev := func(obj, user string) Event {
		return Event{Reason: ReasonKey, Object: obj, Username: user, ClientInfo: "c-" + obj}
	}
	l.Add(ev("a", "u"), testNow)
	l.Add(ev("b", "u"), testNow)
	l.Add(Event{Reason: ReasonKey, Object: "a", Username: "u", ClientInfo: "later"}, testNow.Add(60*time.Second))
	l.Add(ev("a", "v"), testNow.Add(60*time.Second))
	l.Add(ev("b", "u"), testNow.Add(60*time.Second+time.Millisecond)) // 60.001 s after b's last: a new entry
	got := l.Command(nil, testNow.Add(61*time.Second))
	var summary []string
	for _, e := range got.Elems {
		summary = append(summary, fmt.Sprintf("%s/%s/%d/%s", e.Elems[7].Str, e.Elems[9].Str, e.Elems[1].Int, e.Elems[13].Str))
	}
	if want := "[b/u/1/c-b a/v/1/c-a a/u/2/later b/u/1/c-b]"; fmt.Sprint(summary) != want {
		t.Fatalf("entries %v, want %s", summary, want)
	}
	// Only the 10 newest entries are compared with a new one.
	l.Reset()
	l.Add(ev("old", "u"), testNow)
	for i := 0; i < 10; i++ {
		l.Add(ev(fmt.Sprint(i), "u"), testNow)
	}
	l.Add(ev("old", "u"), testNow)
	if l.Len() != 12 {
		t.Fatalf("%d entries, want 12: an 11th-newest entry was grouped", l.Len())
	}
}

func TestLogMaxLen(t *testing.T) {
	l := NewLog(3)
	for i := 0; i < 5; i++ {
		l.Add(Event{Reason: ReasonAuth, Object: "AUTH", Username: fmt.Sprint(i)}, testNow)
	}
	if l.Len() != 3 {
		t.Fatalf("%d entries, want 3", l.Len())
	}
	if v := l.Command(nil, testNow); v.Elems[0].Elems[9].Str != "4" || v.Elems[2].Elems[9].Str != "2" {
		t.Fatal("not the newest entries, newest first")
	}
	l.SetMaxLen(1)
	if l.Len() != 3 {
		t.Fatal("SetMaxLen trimmed at once; Redis trims at the next entry")
	}
	l.Add(Event{Reason: ReasonAuth, Object: "AUTH", Username: "x"}, testNow)
	if l.Len() != 1 {
		t.Fatalf("%d entries after the next one, want 1", l.Len())
	}
	l.SetMaxLen(0)
	l.Add(Event{Reason: ReasonAuth, Object: "AUTH", Username: "y"}, testNow)
	if l.Len() != 0 {
		t.Fatal("acllog-max-len 0 kept an entry")
	}
}

func TestLogCommand(t *testing.T) {
	l := NewLog(DefaultLogMaxLen)
	for i := 0; i < 15; i++ {
		l.Add(Event{Reason: ReasonChannel, Object: fmt.Sprint(i)}, testNow)
	}
	for _, tc := range []struct {
		arg  string
		want int // entries; -1 for an error
	}{
		{"", 10}, {"3", 3}, {"0", 0}, {"-5", 0}, {"100", 15}, {"x", -1}, {"1.5", -1},
	} {
		var args [][]byte
		if tc.arg != "" {
			args = bs(tc.arg)
		}
		v := l.Command(args, testNow)
		if tc.want < 0 {
			if v.Kind != KindError || v.Str != "ERR value is not an integer or out of range" {
				t.Errorf("LOG %q = %+v", tc.arg, v)
			}
			continue
		}
		if v.Kind != KindArray || len(v.Elems) != tc.want {
			t.Errorf("LOG %q: %d entries, want %d", tc.arg, len(v.Elems), tc.want)
		}
	}
	if v := l.Command(bs("ReSeT"), testNow); v.Kind != KindSimple || v.Str != "OK" || l.Len() != 0 {
		t.Fatalf("LOG RESET = %+v, %d entries left", v, l.Len())
	}
}

func TestReasonAndContextNames(t *testing.T) {
	for r, want := range map[Reason]string{ReasonCommand: "command", ReasonKey: "key", ReasonAuth: "auth", ReasonChannel: "channel", 9: "unknown"} {
		if r.String() != want {
			t.Errorf("Reason(%d) = %q", r, r.String())
		}
	}
	for c, want := range map[Context]string{ContextToplevel: "toplevel", ContextLua: "lua", ContextMulti: "multi", ContextModule: "module", 9: "unknown"} {
		if c.String() != want {
			t.Errorf("Context(%d) = %q", c, c.String())
		}
	}
}

func TestFormatDouble(t *testing.T) {
	for f, want := range map[float64]string{0: "0", 1.234: "1.234", 0.001: "0.001", 61: "61", 1e20: "1e+20", 1.0 / 3: "0.33333333333333331"} {
		if got := FormatDouble(f); got != want {
			t.Errorf("FormatDouble(%v) = %q, want %q", f, got, want)
		}
	}
}

package clientlist

import (
	"bytes"
	"strings"
	"testing"
)

// TestAppendFlags: a replica is S whatever it subscribed to, a subscriber P,
// anyone else N; a client with no command yet shows cmd=NULL.
func TestAppendFlags(t *testing.T) {
	for _, tc := range []struct {
		c    Client
		want []string
	}{
		{Client{ID: 1, Proto: 2}, []string{"id=1 ", " flags=N ", " cmd=NULL ", " resp=2\n"}},
		{Client{ID: 2, Replica: true, Subs: 1, OMem: 7, Cmd: "replconf", Proto: 2}, []string{" flags=S ", " sub=1 ", " omem=7 tot-mem=7 ", " cmd=replconf "}},
		{Client{ID: 3, Subs: 2, Proto: 3}, []string{" flags=P ", " sub=2 ", " resp=3\n"}},
	} {
		var b strings.Builder
		Append(&b, tc.c)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%+v: %q has no %q", tc.c, b.String(), w)
			}
		}
	}
}

// TestKillFilter: filters are read in order, the first bad one is the
// reply; a client closed already, or the sender under SKIPME yes, is never
// matched; TYPE tells replicas, subscribers and the rest apart.
func TestKillFilter(t *testing.T) {
	args := func(s string) [][]byte { return bytes.Fields([]byte(s)) }
	for _, tc := range []struct {
		args  [][]byte
		reply string
	}{
		{args("ID 0"), "ERR client-id should be greater than 0"},
		{args("TYPE nosuch"), "ERR Unknown client type 'nosuch'"},
		{args("USER bob"), "ERR No such user 'bob'"},
		{args("SKIPME maybe"), "ERR syntax error"},
		{args("ADDR"), "ERR syntax error"},
		{args("ID x TYPE nosuch"), "ERR client-id should be greater than 0"},
		{args("TYPE slave USER default SKIPME no"), ""},
		{args("tYpE SLAVE sKiPmE No"), ""},
		// Names fold as Redis folds them, ASCII letters only: a look-alike
		// that Unicode folds to an ASCII letter is no filter, nor a type.
		{args("\u0130D 5"), "ERR syntax error"},                               // dotted capital I
		{args("\u017fKIPME no"), "ERR syntax error"},                          // long s
		{args("TYPE \u212aeplica"), "ERR Unknown client type '\u212aeplica'"}, // Kelvin sign
		{args("SKIPME \u0274o"), "ERR syntax error"},
		// A name is quoted whole, as Redis's %s quotes it, up to a NUL.
		{args("USER " + strings.Repeat("u", 300)), "ERR No such user '" + strings.Repeat("u", 300) + "'"},
		{args("TYPE " + strings.Repeat("t", 300)), "ERR Unknown client type '" + strings.Repeat("t", 300) + "'"},
		{[][]byte{[]byte("USER"), []byte("bob\x00hidden")}, "ERR No such user 'bob'"},
	} {
		f := KillFilter{Known: func(u string) bool { return u == "default" }}
		if got := f.Parse(tc.args); got != tc.reply {
			t.Errorf("%q: %q, want %q", tc.args, got, tc.reply)
		}
	}
	normal, sub, replica := Client{ID: 1, Addr: "a"}, Client{ID: 2, Subs: 1}, Client{ID: 3, Replica: true}
	for _, tc := range []struct {
		f    KillFilter
		c    Client
		self bool
		want bool
	}{
		{KillFilter{Type: "normal"}, normal, false, true},
		{KillFilter{User: "default"}, normal, false, true},
		{KillFilter{User: "replica"}, normal, false, false},
		{KillFilter{User: "replica"}, Client{ID: 4, User: "replica"}, false, true},
		{KillFilter{Type: "normal"}, sub, false, false},
		{KillFilter{Type: "pubsub"}, sub, false, true},
		{KillFilter{Type: "replica"}, replica, false, true},
		{KillFilter{Type: "replica"}, normal, false, false},
		{KillFilter{Type: "master"}, normal, false, false},
		{KillFilter{Addr: "a", ByAddr: true}, normal, false, true},
		{KillFilter{Addr: "b", ByAddr: true}, normal, false, false},
		// An empty address is one no client has, not no filter.
		{KillFilter{Addr: "", ByAddr: true}, normal, false, false},
		{KillFilter{LAddr: "", ByLAddr: true}, Client{ID: 5, LAddr: "127.0.0.1:1"}, false, false},
		{KillFilter{SkipMe: true}, normal, true, false},
		{KillFilter{}, normal, true, true},
		{KillFilter{}, Client{ID: 4, Closing: true}, false, false},
	} {
		if got := tc.f.Matches(tc.c, tc.self); got != tc.want {
			t.Errorf("%+v matches %+v (self %v): %v, want %v", tc.f, tc.c, tc.self, got, tc.want)
		}
	}
}

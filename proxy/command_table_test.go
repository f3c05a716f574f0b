package proxy

import "testing"

// TestResolve: the table, made with no server, resolves arguments as
// Redis's lookupCommand does: a command, a subcommand it serves (by any
// case), one Redis 7.0 has that it does not serve, and names neither has.
func TestResolve(t *testing.T) {
	table := newCommandTable(commandEntries(nil), nil)
	for _, tc := range []struct {
		args                          []string
		ok, unserved, beyond, handled bool
		full                          string
		arity                         int
	}{
		{args: []string{"PING"}, ok: true, handled: true, full: "ping", arity: -1},
		{args: []string{"client", "KILL", "ID", "1"}, ok: true, handled: true, full: "client|kill", arity: -3},
		{args: []string{"client", "setinfo", "lib-name", "x"}, ok: true, handled: true, beyond: true, full: "client|setinfo", arity: clientSetInfoArity},
		{args: []string{"client", "pause", "10"}, ok: true, unserved: true, handled: true, full: "client|pause", arity: -3},
		{args: []string{"client", "nosuch"}, handled: true},
		{args: []string{"get", "k"}},
	} {
		var args [][]byte
		for _, a := range tc.args {
			args = append(args, []byte(a))
		}
		r, ok := table.resolve(args)
		full := ""
		if r.full != nil {
			full = *r.full
		}
		if ok != tc.ok || r.unserved != tc.unserved || r.beyondRedis70 != tc.beyond || (r.cmd.run != nil) != tc.handled ||
			full != tc.full || ok && r.arity != tc.arity {
			t.Errorf("%q: ok %v unserved %v beyond %v handled %v full %q arity %d; want %v %v %v %v %q %d",
				tc.args, ok, r.unserved, r.beyondRedis70, r.cmd.run != nil, full, r.arity,
				tc.ok, tc.unserved, tc.beyond, tc.handled, tc.full, tc.arity)
		}
	}
}

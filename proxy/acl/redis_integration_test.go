package acl

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// hashOfX is the SHA-256 of "x", a password hash for the corpus.
const hashOfX = "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"

// ruleCorpus is the rule lists TestMatchesRedis applies to a new user on
// both Redis and this package: the users an operator creates, then
// categories, subcommands, first arguments, removals, passwords, keys,
// channels, selectors, flags, and rules Redis refuses.
var ruleCorpus = [][]string{
	// The four users of the proxy's documentation.
	{"on", ">replpass", "+psync", "+replconf", "+ping"},
	{"on", ">sentpass", "allchannels", "+multi", "+slaveof", "+ping", "+exec", "+subscribe", "+config|rewrite", "+role",
		"+publish", "+info", "+client|setname", "+client|kill", "+script|kill"},
	{"on", ">monpass", "+info", "+ping"},
	{"on", ">adminpass", "~*", "&*", "+@all"},
	// Categories and their normalisation.
	{"+@all", "-@dangerous"},
	{"-@all", "+@read", "-get"},
	{"+@admin"},
	{"+@connection", "-@fast"},
	{"+@all", "-@pubsub"},
	{"-@all", "+@pubsub", "-subscribe"},
	{"+@write", "-@keyspace", "+@hash"},
	{"+@fast", "+@slow"},
	{"+@all", "-@fast", "-@slow"},
	{"+@slow", "+@fast", "-@all", "+ping"},
	{"+@dangerous", "-@admin"},
	{"+@all", "-@admin", "+info", "+config|get"},
	{"+@scripting", "-eval", "+eval_ro"},
	{"+@read", "+@write", "-@dangerous", "-flushall"},
	{"allcommands", "-get", "nocommands", "+set"},
	{"+@All", "-@READ"},
	// Subcommands and containers.
	{"+config", "-config|set"},
	{"+@all", "-config|set", "+config|get"},
	{"+client", "-client|kill", "+client|kill"},
	{"+@all", "-config"},
	{"-config|get"},
	{"+config|GET", "+CONFIG|set"},
	{"+acl|whoami", "+acl|cat"},
	{"+@all", "-acl|setuser"},
	// First arguments of commands without subcommands.
	{"+select|0", "+select|1", "+debug|object"},
	{"+select", "+select|0"},
	{"+@all", "+select|0"},
	{"+debug|x", "+debug|y", "-debug", "+debug|z"},
	{"+get|x", "+GET|X"},
	{"+multi", "+exec", "+discard", "+watch"},
	// Passwords.
	{"on", "nopass"},
	{"on", ">a", ">b", "<a"},
	{"#" + hashOfX, "!" + hashOfX},
	{">x", "resetpass"},
	{"nopass", ">x"},
	{">x", ">x", "#" + hashOfX},
	{">pass with spaces"},
	{">"},
	// Keys.
	{"~a", "~b", "%R~c", "%W~d", "%RW~e", "~a"},
	{"%R~x", "%W~x"},
	{"%wr~x", "%R", "%W~"},
	{"allkeys"},
	{"~*", "resetkeys", "~x"},
	{"resetkeys", "~a", "~*"},
	{"%R~foo*", "%W~bar*", "+get", "+set", "+copy", "+sort", "+eval"},
	// Channels.
	{"&a", "&b*", "resetchannels", "&c"},
	{"&*", "resetchannels"},
	{"&ch*", "+subscribe", "+psubscribe", "+publish", "+spublish"},
	{"allchannels", "+@pubsub"},
	// Selectors.
	{"(+get ~k*)", "(+set %W~w*)"},
	{"(+get ~a)", "clearselectors"},
	{"(+get", "~x)"},
	{"()"},
	{"(+get \"unbal)"},
	{"(+get ~a)", "(+get ~a)"},
	{"(+@all ~*)", "-@all"},
	{"+get", "(+set &c*)", "(~x +config|get)"},
	{"(\"+get\" '~a b')"},
	{"(\"+get\" \"~a\\x41\")"},
	// Flags, reset, case, empty rules.
	{"on", "off"},
	{"skip-sanitize-payload"},
	{"sanitize-payload", "skip-sanitize-payload"},
	{"on", ">p", "+@all", "~*", "(+get)", "reset"},
	{"ON", "+GET", "~K", "+@READ", "-@ALL"},
	{"on", "", "+get"},
	// Rules Redis refuses.
	{"+nosuch"},
	{"-@nosuch"},
	{"+@"},
	{"bogus"},
	{"+config|"},
	{"+config|get|x"},
	{"+config|nosuch"},
	{"+select|"},
	{"-select|0"},
	{"#abc"},
	{"!" + strings.ToUpper(hashOfX)},
	{"<nopw"},
	{"~a b"},
	{"%X~k"},
	{"%~k"},
	{"%RR~k"},
	{"&a b"},
	{"~*", "~a"},
	{"allkeys", "%R~a"},
	{"&*", "&a"},
	{"("},
	{"(+get", "~a"},
	{"(on)"},
	{"(+nosuch)"},
	{"(~a ~*)", "(&* &a)"},
	{"+", "-"},
	{"on", "+get", "bogus", "+set"},
}

// dryRunCorpus is the commands TestMatchesRedis asks ACL DRYRUN about, for
// every user of the corpus.
var dryRunCorpus = [][]string{
	{"ping"}, {"get", "k"}, {"get"}, {"set", "k", "v"}, {"set", "k", "v", "get"}, {"copy", "foo1", "bar1"},
	{"config", "get", "maxmemory"}, {"config", "set", "maxmemory", "1"}, {"config", "nosuch"}, {"config"},
	{"client", "kill", "id", "1"}, {"client", "setname", "x"}, {"psync", "?", "-1"}, {"replconf", "listening-port", "1"},
	{"info"}, {"multi"}, {"exec"}, {"script", "kill"}, {"subscribe", "ch1", "other"}, {"psubscribe", "ch*"},
	{"psubscribe", "c*"}, {"publish", "ch1", "m"}, {"publish", "other", "m"}, {"spublish", "chx", "m"},
	{"select", "0"}, {"select", "1"}, {"select", "2"}, {"debug", "object", "k"}, {"auth", "x"}, {"hello"}, {"role"},
	{"slaveof", "no", "one"}, {"sort", "foo1", "store", "bar1"}, {"sort", "bar1"}, {"eval", "s", "1", "foo1"},
	{"eval", "s", "2", "foo1", "bar1"}, {"eval", "s", "x"}, {"xread", "streams", "s", "0"}, {"acl", "whoami"},
	{"acl", "setuser", "x"}, {"nosuchcmd"}, {"flushall"}, {"keys", "*"}, {"get", "K"}, {"watch", "foo1"},
	{"bitfield", "foo1", "get", "u8", "0"}, {"bitfield", "bar1", "set", "u8", "0", "1"},
}

// redisACL runs ACL subcommands on a real Redis and returns plain replies.
type redisACL struct {
	t *testing.T
	c *redistest.Client
}

func (r redisACL) do(args ...string) any {
	r.t.Helper()
	anyArgs := make([]any, len(args))
	for i, a := range args {
		anyArgs[i] = a
	}
	v, err := r.c.Do(anyArgs...)
	if err != nil {
		if _, ok := err.(*redistest.ReplyError); !ok {
			r.t.Fatalf("%q: %v", args, err)
		}
	}
	return plainOfResp(v)
}

// setUserReply is our ACL SETUSER reply, in its RESP2 shape.
func setUserReply(s *Users, name string, rules []string) any {
	if _, _, err := s.SetUser(name, bs(rules...)); err != nil {
		return errReply(err.(*Error).Reply())
	}
	return "OK"
}

// TestMatchesRedis applies each rule list of the corpus to a new user on a
// real redis-server 7.0 and on Users, and compares the replies: SETUSER,
// GETUSER, the user's ACL LIST line, DRYRUN for a set of commands; then
// the whole ACL LIST, ACL USERS, ACL CAT for every category and GENPASS.
func TestMatchesRedis(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	r := redisACL{t, redistest.Dial(t, srv.Addr())}
	ours := NewUsers()
	if len(ruleCorpus) < 40 {
		t.Fatalf("the corpus has %d rule lists, want at least 40", len(ruleCorpus))
	}
	for i, rules := range ruleCorpus {
		name := fmt.Sprintf("u%02d", i)
		t.Run(name, func(t *testing.T) {
			r := redisACL{t, r.c}
			compareSetUser(t, r, ours, name, rules)
		})
	}
	compareLists(t, r, ours)
	t.Run("modify", func(t *testing.T) {
		r := redisACL{t, r.c}
		// An existing user changed step by step, a failing step changing
		// nothing.
		for _, rules := range [][]string{
			{"on", ">x", "+get", "~a", "(+set)"},
			{"+set", "-get", "&c"},
			{"+config|get", "bogus"},
			{"clearselectors", "%R~b"},
			{"nopass", "resetkeys", "+@all", "-@admin"},
		} {
			compareSetUser(t, r, ours, "mod", rules)
		}
	})
	t.Run("cat", func(t *testing.T) { compareCat(t, redisACL{t, r.c}) })
	t.Run("genpass", func(t *testing.T) { compareGenPass(t, redisACL{t, r.c}) })
	t.Run("errors", func(t *testing.T) { compareErrors(t, redisACL{t, r.c}, ours) })
	t.Run("pubsub-default", func(t *testing.T) { comparePubSubDefault(t, redisACL{t, r.c}, ours) })
	compareLists(t, r, ours)
}

// compareSetUser applies rules to name on both sides and compares the
// reply, the user as GETUSER and ACL LIST show it, and DRYRUN.
func compareSetUser(t *testing.T, r redisACL, ours *Users, name string, rules []string) {
	t.Helper()
	want := r.do(append([]string{"ACL", "SETUSER", name}, rules...)...)
	if got := setUserReply(ours, name, rules); !reflect.DeepEqual(got, want) {
		t.Errorf("SETUSER %q: got %s, redis %s", rules, show(got), show(want))
	}
	want = normGetUser(r.do("ACL", "GETUSER", name))
	if got := normGetUser(plainOf(ours.GetUser(name))); !reflect.DeepEqual(got, want) {
		t.Errorf("GETUSER after %q:\n got   %s\n redis %s", rules, show(got), show(want))
	}
	if want == nil {
		return
	}
	wantLine := ""
	for _, l := range r.do("ACL", "LIST").([]any) {
		if strings.HasPrefix(l.(string), "user "+name+" ") {
			wantLine = l.(string)
		}
	}
	if u := ours.Lookup(name); normRules(wantLine) != normRules("user "+name+" "+u.Profile().Rules()) {
		t.Errorf("ACL LIST after %q:\n got   %s\n redis %s", rules, "user "+name+" "+u.Profile().Rules(), wantLine)
	}
	for _, cmd := range dryRunCorpus {
		args := append([]string{name}, cmd...)
		want := r.do(append([]string{"ACL", "DRYRUN"}, args...)...)
		if got := plainOf(ours.DryRun(bs(args...))); !reflect.DeepEqual(got, want) {
			t.Errorf("DRYRUN %q after %q: got %s, redis %s", cmd, rules, show(got), show(want))
		}
	}
}

// compareLists compares ACL LIST and ACL USERS.
func compareLists(t *testing.T, r redisACL, ours *Users) {
	t.Helper()
	want := r.do("ACL", "LIST").([]any)
	got := ours.List()
	if len(got) != len(want) {
		t.Fatalf("ACL LIST: %d lines, redis %d", len(got), len(want))
	}
	for i := range got {
		if normRules(got[i]) != normRules(want[i].(string)) {
			t.Errorf("ACL LIST line %d:\n got   %s\n redis %s", i, got[i], want[i])
		}
	}
	if got, want := plainOf(bulks(ours.Names())), r.do("ACL", "USERS"); !reflect.DeepEqual(got, want) {
		t.Errorf("ACL USERS: got %s, redis %s", show(got), show(want))
	}
}

// compareCat compares ACL CAT and ACL CAT <category> for every category
// (as sets: Redis's order changes with every process).
func compareCat(t *testing.T, r redisACL) {
	if got, want := plainOf(Cat(nil)), r.do("ACL", "CAT"); !reflect.DeepEqual(got, want) {
		t.Fatalf("ACL CAT: got %s, redis %s", show(got), show(want))
	}
	sorted := func(v any) []string {
		var out []string
		for _, e := range v.([]any) {
			out = append(out, e.(string))
		}
		slices.Sort(out)
		return out
	}
	for _, cat := range append(Categories(), "READ", "Admin", "read\x00x") {
		want := sorted(r.do("ACL", "CAT", cat))
		if got := sorted(plainOf(Cat(bs(cat)))); !slices.Equal(got, want) {
			t.Errorf("ACL CAT %s: got %q, redis %q", cat, got, want)
		}
	}
	for _, bad := range []string{"nosuch", "", "all", strings.Repeat("x", 200)} {
		if got, want := plainOf(Cat(bs(bad))), r.do("ACL", "CAT", bad); !reflect.DeepEqual(got, want) {
			t.Errorf("ACL CAT %q: got %s, redis %s", bad, show(got), show(want))
		}
	}
}

// compareGenPass compares GENPASS's lengths and errors.
func compareGenPass(t *testing.T, r redisACL) {
	for _, arg := range []string{"", "1", "4", "5", "255", "256", "257", "4096", "0", "4097", "-1", "abc", " 5", "+5", "05",
		"99999999999999999999"} {
		args := []string{"ACL", "GENPASS"}
		var ourArgs [][]byte
		if arg != "" {
			args, ourArgs = append(args, arg), bs(arg)
		}
		want, got := r.do(args...), plainOf(GenPass(ourArgs))
		ws, wok := want.(string)
		gs, gok := got.(string)
		if wok != gok || (wok && len(ws) != len(gs)) || (!wok && !reflect.DeepEqual(got, want)) {
			t.Errorf("GENPASS %q: got %s, redis %s", arg, show(got), show(want))
		}
		if gok && strings.Trim(gs, "0123456789abcdef") != "" {
			t.Errorf("GENPASS %q: %q is not lowercase hex", arg, gs)
		}
	}
}

// compareErrors compares the replies of the subcommands' error paths.
func compareErrors(t *testing.T, r redisACL, ours *Users) {
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %s, redis %s", what, show(got), show(want))
		}
	}
	for _, name := range []string{"a b", "a\x00b", "tab\tx"} {
		check("SETUSER "+strconv.Quote(name), setUserReply(ours, name, []string{"on"}), r.do("ACL", "SETUSER", name, "on"))
	}
	_, err := ours.DelUser([]string{"x", "default"})
	check("DELUSER default", errReply(err.(*Error).Reply()), r.do("ACL", "DELUSER", "x", "default"))
	mustSetUser(t, ours, "gone1")
	r.do("ACL", "SETUSER", "gone1")
	deleted, _ := ours.DelUser([]string{"gone1", "gone1", "nosuch"})
	check("DELUSER count", int64(len(deleted)), r.do("ACL", "DELUSER", "gone1", "gone1", "nosuch"))
	check("GETUSER nosuch", plainOf(ours.GetUser("nosuch")), r.do("ACL", "GETUSER", "nosuch"))
	check("DRYRUN nosuch", plainOf(ours.DryRun(bs("nosuch", "get", "k"))), r.do("ACL", "DRYRUN", "nosuch", "get", "k"))
	for _, args := range [][]string{
		{"ACL", "NOSUCH"}, {"ACL", "GETUSER"}, {"ACL", "LIST", "x"}, {"ACL", "CAT", "a", "b"}, {"ACL", "SETUSER"},
		{"ACL", "DRYRUN", "default"}, {"ACL", "LOAD"}, {"ACL", "SAVE", "x"}, {"ACL", "LOG", "1", "2"}, {"acl", "help", "x"},
		{"ACL", strings.Repeat("Z", 150)}, {"ACL", "users", "x"}, {"ACL", "WHOAMI", "x"}, {"ACL", "GENPASS", "1", "2"},
		{"ACL", "DELUSER"}, {"ACL", "dryrun", "a"}, {"ACL"},
	} {
		want := r.do(args...)
		_, e := Subcommand(bs(args...), false)
		var got any = "no error"
		if e != nil {
			got = errReply(e.Reply())
		}
		check(fmt.Sprintf("%q", args), got, want)
	}
	check("ACL HELP", plainOf(Help()), r.do("ACL", "HELP"))
	for _, arg := range []string{"abc", "-5", "reset"} {
		check("ACL LOG "+arg, plainOf(NewLog(DefaultLogMaxLen).Command(bs(arg), time.Now())), r.do("ACL", "LOG", arg))
	}
}

// comparePubSubDefault compares new users and reset under
// acl-pubsub-default allchannels.
func comparePubSubDefault(t *testing.T, r redisACL, ours *Users) {
	r.do("CONFIG", "SET", "acl-pubsub-default", "allchannels")
	ours.SetPubSubDefault(true)
	defer func() {
		r.do("CONFIG", "SET", "acl-pubsub-default", "resetchannels")
		ours.SetPubSubDefault(false)
	}()
	for i, rules := range [][]string{{"+get"}, {"(+get)"}, {"&x"}, {"resetchannels", "reset"}, {"(+set ~a)", "(resetchannels &b)"}} {
		compareSetUser(t, r, ours, fmt.Sprintf("ps%d", i), rules)
	}
}

// TestGlobMatchesRedis checks the glob cases against Redis's own matching,
// through a channel rule and ACL DRYRUN PUBLISH (the path the ACL uses).
func TestGlobMatchesRedis(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	r := redisACL{t, redistest.Dial(t, srv.Addr())}
	for _, tc := range globCases {
		if tc.pattern == "*" || hasSpaceOrNUL(tc.pattern) {
			continue // &* is allchannels, and spaces are refused
		}
		if got := r.do("ACL", "SETUSER", "g", "reset", "on", "+publish", "&"+tc.pattern); got != "OK" {
			t.Fatalf("SETUSER &%q: %s", tc.pattern, show(got))
		}
		redisMatch := r.do("ACL", "DRYRUN", "g", "publish", tc.s, "m") == "OK"
		if redisMatch != tc.match || globMatch(tc.pattern, tc.s) != tc.match {
			t.Errorf("pattern %q, channel %q: redis %v, ours %v, case says %v",
				clip(tc.pattern, 40), clip(tc.s, 40), redisMatch, globMatch(tc.pattern, tc.s), tc.match)
		}
	}
}

// TestRandomRulesMatchRedis applies random rule lists, drawn with a fixed
// seed from a vocabulary of categories, commands, subcommands, first
// arguments and patterns, to users on both sides, and compares SETUSER,
// GETUSER, DRYRUN and ACL LIST: the greedy choice of categories in
// descriptions is where an error would hide.
func TestRandomRulesMatchRedis(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	r := redisACL{t, redistest.Dial(t, srv.Addr())}
	ours := NewUsers()
	var vocab []string
	for _, c := range Categories() {
		vocab = append(vocab, "+@"+c, "-@"+c)
	}
	vocab = append(vocab, "+@all", "-@all", "allcommands", "nocommands", "+get", "-get", "+config", "-config",
		"+config|get", "-config|set", "+client", "-client|kill", "+client|list", "+select|0", "+select|1", "-select",
		"+debug|object", "+acl|whoami", "-acl", "+script|kill", "+psync", "-ping", "~a", "%R~b", "%W~c", "resetkeys",
		"&c*", "resetchannels", "(+get ~k)", "(+@read -@keyspace)", "clearselectors", "on", "off", ">x", "nopass")
	rng := rand.New(rand.NewPCG(7, 0))
	for i := 0; i < 300; i++ {
		rules := make([]string, 1+rng.IntN(8))
		for j := range rules {
			rules[j] = vocab[rng.IntN(len(vocab))]
		}
		name := fmt.Sprintf("r%03d", i)
		want := r.do(append([]string{"ACL", "SETUSER", name}, rules...)...)
		if got := setUserReply(ours, name, rules); !reflect.DeepEqual(got, want) {
			t.Fatalf("SETUSER %q: got %s, redis %s", rules, show(got), show(want))
		}
		want = normGetUser(r.do("ACL", "GETUSER", name))
		if got := normGetUser(plainOf(ours.GetUser(name))); !reflect.DeepEqual(got, want) {
			t.Fatalf("GETUSER after %q:\n got   %s\n redis %s", rules, show(got), show(want))
		}
		if want == nil {
			continue
		}
		for _, cmd := range [][]string{{"get", "a"}, {"get", "k"}, {"config", "get", "x"}, {"client", "kill", "x"},
			{"select", "0"}, {"select", "2"}, {"debug", "object", "k"}, {"publish", "c1", "m"}, {"acl", "whoami"}, {"hset", "c", "f", "v"}} {
			args := append([]string{name}, cmd...)
			want := r.do(append([]string{"ACL", "DRYRUN"}, args...)...)
			if got := plainOf(ours.DryRun(bs(args...))); !reflect.DeepEqual(got, want) {
				t.Fatalf("DRYRUN %q after %q: got %s, redis %s", cmd, rules, show(got), show(want))
			}
		}
	}
	compareLists(t, r, ours)
}

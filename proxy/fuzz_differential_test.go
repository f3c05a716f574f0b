package proxy

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/wire"
)

// FuzzDifferential mutates the differential harness's sequences (diffTable)
// and runs each on the proxy and on redis-server 7.0, as TestDifferential
// runs them: any difference that byNature does not normalise and
// intendedDiffs does not allow fails. The input picks a sequence and a list
// of mutations, four bytes each (mutate): the case of a name's letters,
// Unicode look-alikes of them (the Kelvin sign, the long s, the dotted
// capital I, full-width letters), arguments dropped, added, made huge
// (within the query limits, or past the limits before AUTH), turned into
// numbers or given a NUL byte, and steps swapped, repeated or taken from
// another sequence. A step that would change what the reset cannot restore
// (SHUTDOWN, REPLICAOF to a primary, MULTI, CLIENT PAUSE or REPLY, CONFIG
// SET of a directive other than diffDirectives', the default user's rules)
// is left out (safeStep), and a sequence ends after a difference that may
// leave the servers in different states (an intended difference that
// diverges: Redis runs what the proxy does not serve).
//
// The servers, a proxy and a redis-server per setup, start once per fuzz
// process. Under go test without -fuzz the seeds run: each sequence with a
// few mutations. It needs redis-server: under -short it skips, and under
// CI=true without Redis it fails (redistest.Require).
func FuzzDifferential(f *testing.F) {
	for i := range diffTable {
		// Each sequence plain, and with a few mutations drawn from its
		// index: deterministic, different per sequence.
		f.Add(uint16(i), []byte{})
		b := byte(i)
		f.Add(uint16(i), []byte{0, b, 1, b * 3, 1, b + 1, 1, 7, 3, b, 0, b, 5, b + 2, 1, 2, 9, b, 2, 1})
	}
	env := startDiffEnv(f) // skips under -short (redistest.Require)
	f.Fuzz(func(t *testing.T, pick uint16, ops []byte) {
		base := diffTable[int(pick)%len(diffTable)]
		seq := diffSeq{name: base.name + "-mutated", setup: base.setup, steps: mutate(base.steps, ops)}
		su := env.setups[seq.setup]
		seq.steps = slices.DeleteFunc(seq.steps, func(step []string) bool { return !safeStep(step, su) })
		for _, r := range env.run(t, seq, true) {
			if r.err != "" {
				t.Errorf("%s: %.200q: %s\n\tproxy:        %.600q\n\tredis-server: %.600q\n\tsequence: %q",
					seq.name, r.args, r.err, r.replies[sideProxy], r.replies[sideRedis], seq.steps)
			}
		}
	})
}

// fuzzMaxSteps bounds a mutated sequence.
const fuzzMaxSteps = 64

// fuzzWords are the arguments a mutation adds: option words, values, and
// bytes that need quoting.
var fuzzWords = []string{"x", "", "0", "-1", "1", "yes", "no", "ID", "TYPE", "USER", "SKIPME", "AUTH", "SETNAME",
	"*", "news", "default", "normal", "pubsub", "replica", "\x00", "99999999999999999999", "a b", "\r\n", "HELP",
	"COUNT", "RESET", "+1", "01", "-0", "3", "2"}

// lookAlikes are Unicode letters that Go's case folding, but not Redis's,
// takes for an ASCII letter.
var lookAlikes = map[byte]string{'k': "\u212a", 'K': "\u212a", 's': "\u017f", 'S': "\u017f", 'i': "\u0130", 'I': "\u0130"}

// mutate applies ops, four bytes a mutation, to a copy of steps.
func mutate(steps [][]string, ops []byte) [][]string {
	out := make([][]string, len(steps))
	for i, s := range steps {
		out[i] = slices.Clone(s)
	}
	for len(ops) >= 4 && len(out) > 0 {
		kind, at, argAt, param := ops[0], int(ops[1])%len(out), int(ops[2]), ops[3]
		ops = ops[4:]
		step := out[at]
		if len(step) == 0 || strings.HasPrefix(step[0], "!") {
			continue
		}
		first := 0
		if step[0] == "@2" {
			first = 1
		}
		if first >= len(step) {
			continue
		}
		arg := first + argAt%(len(step)-first)
		switch kind % 10 {
		case 0: // the case of ASCII letters, by param's bits
			b := []byte(step[arg])
			for j := range b {
				if param>>(j%8)&1 == 1 && ('a' <= b[j] && b[j] <= 'z' || 'A' <= b[j] && b[j] <= 'Z') {
					b[j] ^= 0x20
				}
			}
			step[arg] = string(b)
		case 1: // a look-alike for one ASCII letter
			step[arg] = lookAlike(step[arg], int(param))
		case 2: // an argument dropped
			if len(step)-first > 1 {
				out[at] = slices.Delete(step, arg, arg+1)
			}
		case 3: // an argument added
			out[at] = slices.Insert(step, min(arg+1, len(step)), fuzzWords[int(param)%len(fuzzWords)])
		case 4: // an argument made huge: up to 25 KiB, past 16 KiB a bulk no client may send before AUTH
			step[arg] = strings.Repeat(string(rune('a'+param%26)), 1+int(param)*100)
		case 5: // an argument made a number, or what looks like one
			step[arg] = fuzzWords[[]int{2, 3, 4, 20, 26, 27, 28, 29, 30}[int(param)%9]]
		case 6: // two steps swapped
			j := (at + 1) % len(out)
			out[at], out[j] = out[j], out[at]
		case 7: // a step repeated
			if len(out) < fuzzMaxSteps {
				out = slices.Insert(out, at, slices.Clone(step))
			}
		case 8: // a step of another sequence
			other := diffTable[int(param)%len(diffTable)].steps
			if len(out) < fuzzMaxSteps && len(other) > 0 {
				out = slices.Insert(out, at, slices.Clone(other[argAt%len(other)]))
			}
		case 9: // a NUL byte in an argument
			p := int(param) % (len(step[arg]) + 1)
			step[arg] = step[arg][:p] + "\x00" + step[arg][p:]
		}
	}
	return out
}

// lookAlike replaces the n-th ASCII letter of s (counting round) with a
// Unicode look-alike: lookAlikes' where there is one, else the full-width
// form of the letter.
func lookAlike(s string, n int) string {
	var letters []int
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			letters = append(letters, i)
		}
	}
	if len(letters) == 0 {
		return s
	}
	i := letters[n%len(letters)]
	c := s[i]
	r, ok := lookAlikes[c]
	if !ok || n/len(letters)%2 == 1 {
		r = string(rune(0xFF21 + int(wire.Upper(string(c))[0]-'A'))) // full-width A–Z
	}
	if !utf8.ValidString(r) {
		return s
	}
	return s[:i] + r + s[i+1:]
}

// fuzzUnsafe are the commands a mutated sequence never sends: each would
// change what the reset cannot restore, or stop a server answering.
var fuzzUnsafe = []string{"shutdown", "replicaof", "slaveof", "multi", "monitor", "debug", "flushall", "flushdb", "failover", "save", "bgsave"}

// safeStep reports whether a mutated step may be sent (FuzzDifferential).
func safeStep(step []string, su *diffSetup) bool {
	if len(step) > 0 && step[0] == "@2" {
		step = step[1:]
	}
	if len(step) == 0 || strings.HasPrefix(step[0], "!") {
		return true
	}
	name := wire.Lower(step[0])
	sub := ""
	if len(step) > 1 {
		sub = wire.Lower(step[1])
	}
	switch {
	case name == "shutdown":
		return len(step) == 2 && sub == "abort"
	case name == "replicaof" || name == "slaveof":
		return len(step) != 3 // an arity error only
	case slices.Contains(fuzzUnsafe, name):
		return false
	case name == "client" && slices.Contains([]string{"pause", "unpause", "reply", "tracking", "unblock", "caching"}, sub):
		return false
	case name == "config" && sub == "set":
		for i := 2; i < len(step); i += 2 {
			canonical, proxyHas := config.Canonical(step[i])
			redisHas := false
			for d := range su.redisDirectives {
				redisHas = redisHas || wire.EqualFold(step[i], d)
			}
			safe := slices.ContainsFunc(diffDirectives, func(kv [2]string) bool { return kv[0] == canonical })
			if (proxyHas || redisHas) && !safe {
				return false
			}
		}
	case name == "acl" && (sub == "setuser" || sub == "deluser"):
		return len(step) < 3 || !slices.Contains(step[2:], "default")
	}
	return true
}

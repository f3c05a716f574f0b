package acl

import (
	"slices"
	"strings"
	"testing"
)

func TestParseInt64(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"-1", -1, true}, {"4096", 4096, true},
		{"9223372036854775807", 1<<63 - 1, true}, {"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false}, {"-9223372036854775809", 0, false},
		{"", 0, false}, {"-", 0, false}, {"-0", 0, false}, {"01", 0, false}, {"+1", 0, false},
		{" 1", 0, false}, {"1 ", 0, false}, {"1a", 0, false}, {"99999999999999999999", 0, false},
		{"000000000000000000001", 0, false},
	} {
		n, ok := parseInt64(tc.in)
		if n != tc.n || ok != tc.ok {
			t.Errorf("parseInt64(%q) = %d %v, want %d %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil with ok false: unbalanced
		ok   bool
	}{
		{"", nil, true},
		{"  a  b\tc\n", []string{"a", "b", "c"}, true},
		{`"a b" 'c d'`, []string{"a b", "c d"}, true},
		{`"\x41\n\t\\\"" '\''`, []string{"A\n\t\\\"", "'"}, true},
		{`"\x4g"`, []string{`x4g`}, true},
		{`a"b c"`, []string{"ab c"}, true},
		{`"a"b`, nil, false},
		{`'a'b`, nil, false},
		{`"abc`, nil, false},
		{`'abc`, nil, false},
		{`""`, []string{""}, true},
		{"a\x00b c", []string{"a"}, true},
		{"a\vb", []string{"a\vb"}, true},
		{"\va", []string{"a"}, true},
	} {
		got, ok := splitArgs(tc.in)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("splitArgs(%q) = %q %v, want %q %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTrimSet(t *testing.T) {
	for _, tc := range []struct{ in, set, want string }{
		{" \t a b \r\n", " \t\r\n", "a b"},
		{"\t\t", "\t", ""},
		{"x", " ", "x"},
	} {
		if got := trimSet(tc.in, tc.set); got != tc.want {
			t.Errorf("trimSet(%q, %q) = %q, want %q", tc.in, tc.set, got, tc.want)
		}
	}
}

// globCases are patterns and strings with whether Redis's stringmatchlen
// matches them; TestGlobMatchesRedis checks them against a real Redis.
var globCases = []struct {
	pattern, s string
	match      bool
}{
	{"*", "", false}, // Redis never matches an empty string with a pattern
	{"", "", true},
	{"*", "anything", true},
	{"a*", "abc", true},
	{"a*", "ba", false},
	{"*c", "abc", true},
	{"a*c", "ac", true},
	{"a*b*c", "axxbyyc", true},
	{"a*b*c", "axxbyy", false},
	{"?", "a", true},
	{"?", "", false},
	{"??", "a", false},
	{"h[ae]llo", "hello", true},
	{"h[ae]llo", "hillo", false},
	{"h[^e]llo", "hallo", true},
	{"h[^e]llo", "hello", false},
	{"h[a-b]llo", "hbllo", true},
	{"h[b-a]llo", "hallo", true},
	{"h[a-b]llo", "hcllo", false},
	{"[]]", "]", false},
	{"[]a]", "a", false},
	{"[\\]]", "]", true},
	{"[a-", "a", true},
	{"[a-", "-", true},
	{"[abc", "c", true},
	{"[abc", "d", false},
	{"[^", "x", true},
	{"a\\*b", "a*b", true},
	{"a\\*b", "axb", false},
	{"a\\", "a\\", true},
	{"\\", "\\", true},
	{"[\\", "\\", true},
	{"*a", "aaa", true},
	{"a**", "a", true},
	{"**", "", false},
	{"a", "a\x00", false},
	{"[\x80-\xff]", "\x90", true},
	{"[\x80-\xff]", "a", false},
	{"[a-\xff]", "b", false}, // a C char is signed: the range is from \xff (-1) to a
	{"[a-\xff]", "\x01", true},
	{"[a-\xff]", "\x90", false},
	{strings.Repeat("*a", 900) + "b", strings.Repeat("a", 900) + "b", true},
	{strings.Repeat("*a", 1100) + "b", strings.Repeat("a", 1100) + "b", false}, // nesting past 1000
	{strings.Repeat("a*", 1100) + "b", strings.Repeat("a", 1100) + "b", false},
	{strings.Repeat("*a", 40) + "b", strings.Repeat("a", 60), false},
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range globCases {
		if got := globMatch(tc.pattern, tc.s); got != tc.match {
			t.Errorf("globMatch(%q, %q) = %v, want %v", clip(tc.pattern, 40), clip(tc.s, 40), got, tc.match)
		}
	}
}

package wire

import (
	"bytes"
	"testing"
)

// Cases follow redis-server's sdssplitargs (sds.c) and its tests.
func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // nil with ok false means "unbalanced quotes"
		ok   bool
	}{
		{"", nil, true},
		{"   \t ", nil, true},
		{"PING", []string{"PING"}, true},
		{"  set  a   b ", []string{"set", "a", "b"}, true},
		{"a\tb", []string{"a", "b"}, true},
		{"a\vb", []string{"a\vb"}, true}, // \v and \f separate only before a token
		{"\va", []string{"a"}, true},
		{`set "foo bar" 'baz'`, []string{"set", "foo bar", "baz"}, true},
		{`"\x41\x42\x4a\x4A"`, []string{"ABJJ"}, true},
		{`"\x4"`, []string{"x4"}, true},
		{`"\n\r\t\b\a\q\\\""`, []string{"\n\r\t\b\aq\\\""}, true},
		{`'it\'s' 'a\nb'`, []string{"it's", `a\nb`}, true},
		{`ab"cd" x`, []string{"abcd", "x"}, true},
		{`""`, []string{""}, true},
		{`"" ''`, []string{"", ""}, true},
		{`\n`, []string{`\n`}, true},
		{"a\x00b c", []string{"a"}, true}, // a C string ends at NUL
		{"\"a\x00b\"", nil, false},
		{`"a"b`, nil, false},
		{`'a'b`, nil, false},
		{`"unterminated`, nil, false},
		{`'unterminated`, nil, false},
		{`"a\`, nil, false},
	} {
		args, ok := SplitArgs([]byte(tc.in))
		if ok != tc.ok || len(args) != len(tc.want) {
			t.Errorf("%q: got %q, %v; want %q, %v", tc.in, args, ok, tc.want, tc.ok)
			continue
		}
		for i := range args {
			if !bytes.Equal(args[i], []byte(tc.want[i])) {
				t.Errorf("%q: arg %d = %q, want %q", tc.in, i, args[i], tc.want[i])
			}
		}
	}
}

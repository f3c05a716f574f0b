package wire

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestNamesFoldASCIIOnly: only A–Z and a–z fold into each other. The
// look-alikes Go's Unicode folding takes for ASCII letters (the Kelvin
// sign, the long s, the dotted capital I, full-width letters) stay
// themselves, as in Redis's strcasecmp.
func TestNamesFoldASCIIOnly(t *testing.T) {
	for _, tc := range []struct {
		name, word string
		equal      bool
	}{
		{"KILL", "kill", true},
		{"kIlL", "KiLl", true},
		{"\u212aILL", "kill", false}, // KELVIN SIGN: strings.EqualFold says true
		{"\u017fetname", "setname", false},
		{"\u0130d", "id", false},
		{"\uff2b\uff29\uff2c\uff2c", "kill", false}, // full-width KILL
		{"kil", "kill", false},
		{"", "", true},
		{"@", "`", false}, // 0x40 and 0x60 differ by the case bit but are no letters
		{"[", "{", false},
		{"k\x00", "K\x00", true},
		// strcasecmp reads C strings: a NUL ends the name.
		{"ID\x00x", "id", true},
		{"I\x00D", "id", false},
		{"\x00", "", true},
	} {
		if got := EqualFold(tc.name, tc.word); got != tc.equal {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", tc.name, tc.word, got, tc.equal)
		}
		if got := EqualFold([]byte(tc.name), tc.word); got != tc.equal {
			t.Errorf("EqualFold([]byte(%q), %q) = %v, want %v", tc.name, tc.word, got, tc.equal)
		}
	}
	for in, want := range map[string]string{
		"CLIENT":       "client",
		"\u212aILL":    "\u212aill",
		"\u0130D":      "\u0130d",
		"Sk\u0130pMe":  "sk\u0130pme",
		"\uff2bILL":    "\uff2bill",
		"caf\u00c9":    "caf\u00c9",
		"A\x00B\xffZ@": "a\x00b\xffz@",
	} {
		if got := Lower(in); got != want {
			t.Errorf("Lower(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Upper("client\u212a\u017fz"); got != "CLIENT\u212a\u017fZ" {
		t.Errorf("Upper: %q", got)
	}
	// Every byte but the 52 letters is left alone, by all three.
	for c := 0; c < 256; c++ {
		b := string([]byte{byte(c)})
		letter := 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
		if !letter && (Lower(b) != b || Upper(b) != b) {
			t.Errorf("byte %#x changed by Lower or Upper", c)
		}
		for d := 0; d < 256; d++ {
			e := string([]byte{byte(d)})
			want := c == d || letter && strings.ToLower(b) == strings.ToLower(e)
			if d == 0 { // word is then "": only an empty C string equals it
				want = c == 0
			}
			if EqualFold(b, e) != want {
				t.Errorf("EqualFold(%#x, %#x) = %v", c, d, !want)
			}
		}
	}
	if got := Word("SkipMe\x00yes"); got != "skipme" {
		t.Errorf("Word: %q", got)
	}
	if s := "kill"; Lower(s) != s || !utf8.ValidString(Lower("\u212a")) {
		t.Error("Lower changed a lower-case name, or broke UTF-8")
	}
}

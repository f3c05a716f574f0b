package replid

import "testing"

func TestNewIsValid(t *testing.T) {
	if len(None) != Size || !Valid(None) {
		t.Fatalf("None %q is not a valid replid", None)
	}
	a, b := New(), New()
	if !Valid(a) || !Valid(b) || a == b {
		t.Fatalf("New gave %q and %q", a, b)
	}
	for _, bad := range []string{"", a[:39], a + "0", "../" + a[3:], "ABCDEF" + a[6:], a[:20] + " " + a[21:]} {
		if Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}

func TestParseOffset(t *testing.T) {
	for s, ok := range map[string]bool{"0": true, "4611686018427387904": true, "4611686018427387905": false,
		"9223372036854775807": false, "-1": false, "+5": false, "": false, " 1": false, "12345678901234567890": false} {
		if _, got := ParseOffset(s); got != ok {
			t.Errorf("ParseOffset(%q) ok=%v, want %v", s, got, ok)
		}
	}
}

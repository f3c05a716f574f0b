package rdbcheck

import (
	"math"
	"strconv"
	"testing"
)

// TestScanDouble: what glibc's sscanf("%lg") does with each string (as
// run on glibc 2.36): whether it reads a number, and whether a NaN.
func TestScanDouble(t *testing.T) {
	for _, c := range []struct {
		s       string
		ok, nan bool
	}{
		{"1", true, false}, {"1e", true, false}, {"1e+", true, false}, {"1e5", true, false},
		{"1.", true, false}, {".", false, false}, {" 1", true, false}, {"-", false, false},
		{"+.5", true, false}, {"0x", false, false}, {"0x1p", true, false}, {"0x1p3", true, false},
		{"0x.p1", true, false}, {"0x.", true, false}, {"inf", true, false}, {"infin", false, false},
		{"infinity", true, false}, {"infinityx", true, false}, {"in", false, false}, {"nan", true, true},
		{"nan(", true, true}, {"nan(ab_1)", true, true}, {"NaN", true, true}, {"-nan", true, true},
		{"1ex", true, false}, {"  ", false, false}, {"", false, false}, {".e1", false, false},
		{"1.e2", true, false}, {"0x1.8p1", true, false}, {"0X1P-2", true, false}, {"1e400", true, false},
		{"e5", false, false}, {"0xg", false, false}, {"1.5e-", true, false}, {"-inf", true, false},
		{"+infinit", false, false}, {"1,5", true, false}, {"\t\n\v\f\r5", true, false},
		{"0x.g", true, false}, {"0xp1", false, false}, {"-0x", false, false}, {"-0x.", true, false},
		{"infi", false, false}, {"infx", true, false}, {"INFINITY", true, false}, {"iNf", true, false},
		{"-.", false, false}, {"-.5", true, false}, {"- 1", false, false}, {"+-1", false, false},
		{"00x1", true, false}, {"nanx", true, true}, {"n", false, false}, {"na", false, false},
		{"nax", false, false}, {"-i", false, false}, {"..1", false, false}, {"1..", true, false},
		{"2\x00junk", true, false}, {"\x001", false, false},
	} {
		ok, nan := scanDouble([]byte(c.s))
		if ok != c.ok || ok && nan != c.nan {
			t.Errorf("scanDouble(%q) = %v, %v; want %v, %v", c.s, ok, nan, c.ok, c.nan)
		}
	}
}

func TestString2ll(t *testing.T) {
	for _, c := range []struct {
		s  string
		v  int64
		ok bool
	}{
		{"0", 0, true}, {"-0", 0, false}, {"01", 0, false}, {"1", 1, true}, {"-1", -1, true},
		{"9223372036854775807", math.MaxInt64, true}, {"9223372036854775808", 0, false},
		{"-9223372036854775808", math.MinInt64, true}, {"-9223372036854775809", 0, false},
		{"99999999999999999999", 0, false}, {"", 0, false}, {"-", 0, false}, {"+1", 0, false},
		{" 1", 0, false}, {"1 ", 0, false}, {"123456789012345678901", 0, false},
	} {
		v, ok := string2ll([]byte(c.s))
		if ok != c.ok || ok && v != c.v {
			t.Errorf("string2ll(%q) = %d, %v; want %d, %v", c.s, v, ok, c.v, c.ok)
		}
		if want, err := strconv.ParseInt(c.s, 10, 64); ok && (err != nil || want != v) {
			t.Errorf("string2ll(%q) = %d; strconv says %d, %v", c.s, v, want, err)
		}
	}
}

func TestAtoi(t *testing.T) {
	for _, c := range []struct {
		s string
		v int
	}{
		{"0010", 10}, {" 010", 10}, {"+010", 10}, {"-001", -1}, {"0a10", 0}, {"10xx", 10},
		{"9\x0077", 9}, {"x010", 0}, {"\t\n12", 12}, {"", 0},
	} {
		if v := atoi([]byte(c.s)); v != c.v {
			t.Errorf("atoi(%q) = %d, want %d", c.s, v, c.v)
		}
	}
}

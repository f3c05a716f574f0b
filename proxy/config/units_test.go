package config

import (
	"errors"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var sizeCases = []struct {
	name string
	in   string
	want int64 // from memToLL; ParseSize agrees unless the input starts with '-'
	ok   bool
}{
	{"zero", "0", 0, true},
	{"plain", "12345", 12345, true},
	{"leading zeros", "007", 7, true},
	{"many leading zeros", strings.Repeat("0", 200) + "1", 1, true},
	{"b", "1b", 1, true},
	{"B", "1B", 1, true},
	{"k", "1k", 1000, true},
	{"K", "1K", 1000, true},
	{"kb", "1kb", 1024, true},
	{"KB", "1KB", 1024, true},
	{"kB", "1kB", 1024, true},
	{"Kb", "1Kb", 1024, true},
	{"m", "3m", 3_000_000, true},
	{"mb", "64mb", 64 << 20, true},
	{"MB", "256MB", 256 << 20, true},
	{"g", "2g", 2_000_000_000, true},
	{"gb", "1gb", 1 << 30, true},
	{"GB", "4GB", 4 << 30, true},
	{"zero with unit", "0gb", 0, true},
	{"max int64", "9223372036854775807", math.MaxInt64, true},
	{"max int64 in b", "9223372036854775807b", math.MaxInt64, true},
	{"largest gb", "8589934591gb", 8589934591 << 30, true},
	{"negative", "-5", -5, true},
	{"negative unit", "-1kb", -1024, true},
	{"negative zero", "-0", 0, true},
	{"min int64", "-9223372036854775808", math.MinInt64, true},
	{"min int64 in gb", "-8589934592gb", math.MinInt64, true},

	{"overflow plain", "9223372036854775808", 0, false},
	{"overflow uint64", "18446744073709551616", 0, false},
	{"overflow unit", "8589934592gb", 0, false},
	{"overflow redis wraps to 0", "17179869184gb", 0, false},
	{"overflow huge", "99999999999999999999999gb", 0, false},
	{"underflow", "-9223372036854775809", 0, false},
	{"underflow unit", "-8589934593gb", 0, false},
	{"empty", "", 0, false},
	{"unit only", "mb", 0, false},
	{"minus only", "-", 0, false},
	{"minus unit", "-mb", 0, false},
	{"plus", "+1", 0, false},
	{"double minus", "--1", 0, false},
	{"leading space", " 1", 0, false},
	{"trailing space", "1 ", 0, false},
	{"space before unit", "1 mb", 0, false},
	{"fraction", "1.5mb", 0, false},
	{"exponent", "1e3", 0, false},
	{"hex", "0x10", 0, false},
	{"unknown unit", "1t", 0, false},
	{"long unit", "1kbb", 0, false},
	{"bytes word", "1bytes", 0, false},
	{"kelvin sign", "1\u212Ab", 0, false},
	{"underscore", "1_000", 0, false},
}

func TestMemToLL(t *testing.T) {
	for _, tc := range sizeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memToLL(tc.in)
			if !tc.ok {
				if !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("memToLL(%q) = %d, %v; want ErrInvalidValue", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("memToLL(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range sizeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			ok := tc.ok && !strings.HasPrefix(tc.in, "-") // memtoull rejects any sign
			if !ok {
				var ce *Error
				if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("ParseSize(%q) = %d, %v; want *Error wrapping ErrInvalidValue", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseInteger(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{"zero", "0", 0, true},
		{"positive", "60", 60, true},
		{"negative", "-1", -1, true},
		{"max", "9223372036854775807", math.MaxInt64, true},
		{"min", "-9223372036854775808", math.MinInt64, true},
		{"overflow", "9223372036854775808", 0, false},
		{"empty", "", 0, false},
		{"minus", "-", 0, false},
		{"negative zero", "-0", 0, false},
		{"leading zero", "007", 0, false},
		{"double zero", "00", 0, false},
		{"plus", "+5", 0, false},
		{"space", " 5", 0, false},
		{"unit", "5s", 0, false},
		{"fraction", "1.0", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseInteger(tc.in)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parseInteger(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseBool(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
		ok   bool
	}{
		{"yes", true, true},
		{"YES", true, true},
		{"no", false, true},
		{"No", false, true},
		{"", false, false},
		{"true", false, false},
		{"1", false, false},
		{"yes ", false, false},
	} {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			got, err := ParseBool(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("ParseBool(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidValue) {
				t.Fatalf("error %v does not wrap ErrInvalidValue", err)
			}
			if err == nil {
				back, err := ParseBool(FormatBool(got))
				if err != nil || back != got {
					t.Fatalf("FormatBool round trip: %v, %v", back, err)
				}
			}
		})
	}
}

var refSizeSyntax = regexp.MustCompile(`^(-?)([0-9]+)([A-Za-z]*)$`)

// refMemToLL is an independent model of memToLL: a regular expression and
// arbitrary-precision arithmetic.
func refMemToLL(s string) (int64, bool) {
	m := refSizeSyntax.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	units := map[string]int64{"": 1, "b": 1, "k": 1e3, "kb": 1 << 10, "m": 1e6, "mb": 1 << 20, "g": 1e9, "gb": 1 << 30}
	mul, ok := units[strings.ToLower(m[3])] // m[3] is ASCII, so ToLower is safe
	if !ok {
		return 0, false
	}
	v, _ := new(big.Int).SetString(m[2], 10)
	v.Mul(v, big.NewInt(mul))
	if m[1] == "-" {
		v.Neg(v)
	}
	if !v.IsInt64() {
		return 0, false
	}
	return v.Int64(), true
}

func FuzzMemToLL(f *testing.F) {
	for _, tc := range sizeCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := memToLL(s)
		want, ok := refMemToLL(s)
		if ok != (err == nil) || got != want {
			t.Fatalf("memToLL(%q) = %d, %v; reference says %d, ok=%v", s, got, err, want, ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidValue) {
			t.Fatalf("memToLL(%q) error %v does not wrap ErrInvalidValue", s, err)
		}
		size, serr := ParseSize(s)
		if strings.HasPrefix(s, "-") {
			if serr == nil {
				t.Fatalf("ParseSize(%q) = %d, accepted a sign", s, size)
			}
		} else if size != got || (serr == nil) != (err == nil) {
			t.Fatalf("ParseSize(%q) = %d, %v; memToLL says %d, %v", s, size, serr, got, err)
		}
		if err == nil {
			// CONFIG GET prints plain byte counts; they must parse back.
			if back, err := memToLL(strconv.FormatInt(got, 10)); err != nil || back != got {
				t.Fatalf("memToLL(%d) = %d, %v", got, back, err)
			}
		}
	})
}

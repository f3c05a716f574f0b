package config

import (
	"fmt"
	"math"
	"strconv"

	"github.com/replproxy/replproxy/proxy/wire"
)

// ParseSize parses a byte count with Redis's memory units, as redis-server's
// memtoull does for memory directives: decimal digits (leading zeros allowed)
// followed by an optional case-insensitive unit:
//
//	(none), b  1
//	k          1000        kb  1024
//	m          1000²       mb  1024²
//	g          1000³       gb  1024³
//
// Signs, spaces, fractions and an empty string are rejected, and so is any
// result above math.MaxInt64 (redis-server 7.0 silently wraps or saturates
// on overflow, and accepts "" and a bare unit as 0: replproxy does not).
// Errors are [*Error] wrapping [ErrInvalidValue].
func ParseSize(s string) (int64, error) {
	n, err := parseSize(s)
	if err != nil {
		return 0, &Error{Err: err}
	}
	return n, nil
}

// ParseBool parses Redis's booleans, "yes" and "no", case-insensitively
// (redis-server's yesnotoi). Errors are [*Error] wrapping [ErrInvalidValue].
func ParseBool(s string) (bool, error) {
	switch wire.Lower(s) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, &Error{Err: badValue(s, "argument must be 'yes' or 'no'")}
}

// FormatBool returns "yes" or "no", as CONFIG GET prints booleans.
func FormatBool(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// parseSize is ParseSize without the *Error wrapper: memtoull's grammar, so
// no sign at all.
func parseSize(s string) (int64, error) {
	if len(s) > 0 && s[0] == '-' {
		return 0, badValue(s, "argument must be a memory value")
	}
	return memToLL(s)
}

// memToLL is redis-server's memtoll with overflow checks: an optional '-'
// that must be followed by a digit, one or more decimal digits, then an
// optional unit (see [ParseSize]). The result must fit in an int64.
func memToLL(s string) (int64, error) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return 0, badValue(s, "argument must be a memory value")
	}
	var mul uint64
	switch wire.Lower(s[i:]) {
	case "", "b":
		mul = 1
	case "k":
		mul = 1000
	case "kb":
		mul = 1024
	case "m":
		mul = 1000 * 1000
	case "mb":
		mul = 1024 * 1024
	case "g":
		mul = 1000 * 1000 * 1000
	case "gb":
		mul = 1024 * 1024 * 1024
	default:
		return 0, badValue(s, "argument must be a memory value")
	}
	// limit is the largest magnitude the sign allows: 2^63 for a negative
	// value, 2^63-1 otherwise.
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var v uint64
	for _, c := range []byte(s[start:i]) {
		d := uint64(c - '0')
		if v > (limit-d)/10 {
			return 0, badValue(s, "memory value out of range")
		}
		v = v*10 + d
	}
	if v != 0 && mul > limit/v {
		return 0, badValue(s, "memory value out of range")
	}
	v *= mul
	if neg {
		// -(2^63) is representable; -int64(v) would overflow for it.
		return -int64(v-1) - 1, nil
	}
	return int64(v), nil
}

// parseInteger parses an integer the way redis-server's string2ll does for
// numeric directives: an optional '-', no '+', no spaces, no leading zeros
// ("0" itself is fine, "-0" is not), within int64.
func parseInteger(s string) (int64, bool) {
	if s == "0" {
		return 0, true
	}
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" || digits[0] < '1' || digits[0] > '9' {
		return 0, false
	}
	for i := 1; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// parseIntRange parses an integer directive argument within [lo, hi], with
// redis-server's error texts.
func parseIntRange(s string, lo, hi int64) (int64, error) {
	n, ok := parseInteger(s)
	if !ok {
		return 0, badValue(s, "argument couldn't be parsed into an integer")
	}
	if n < lo || n > hi {
		return 0, badValue(s, fmt.Sprintf("argument must be between %d and %d inclusive", lo, hi))
	}
	return n, nil
}

// badValue is a [*ValueError]: the offending value and the reason. Only
// call it for values that may be printed: never for secrets.
func badValue(value, reason string) error {
	return &ValueError{Value: value, Reason: reason}
}

package rdbcheck

// Redis reads a few numbers out of strings with C's parsers; these are
// their rules, for the strings Redis parses when it loads.

// maxIntString is the longest string string2ll reads: a string of
// LONG_STR_SIZE (21) bytes or more is no integer.
const maxIntString = 20

// string2ll is Redis's string2ll (util.c): an optional '-', then "0" alone
// or a digit 1-9 and more digits, in int64, and nothing else.
func string2ll(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > maxIntString {
		return 0, false
	}
	if len(s) == 1 && s[0] == '0' {
		return 0, true
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
		if len(s) == 0 {
			return 0, false
		}
	}
	if s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (^uint64(0)-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

// scanDouble reports whether glibc's sscanf(s, "%lg") reads a double from
// s (which ends at its first NUL), and whether that double is a NaN. It
// reads a prefix: white space, a sign, then "nan", "inf" or "infinity"
// (in any case), a hexadecimal "0x" with a digit or a point after it, or
// decimal digits (a point may come first). What follows that start does
// not change the verdict, with one quirk of glibc's: "inf" followed by an
// 'i' must go on to "infinity".
func scanDouble(s []byte) (ok, nan bool) {
	for i, c := range s {
		if c == 0 {
			s = s[:i]
			break
		}
	}
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	rest := s[i:]
	lower := func(j int) byte {
		if j >= len(rest) {
			return 0
		}
		return rest[j] | 0x20
	}
	switch {
	case len(rest) == 0:
		return false, false
	case lower(0) == 'n':
		return lower(1) == 'a' && lower(2) == 'n', true
	case lower(0) == 'i':
		if lower(1) != 'n' || lower(2) != 'f' {
			return false, false
		}
		if lower(3) != 'i' {
			return true, false
		}
		return lower(4) == 'n' && lower(5) == 'i' && lower(6) == 't' && lower(7) == 'y', false
	case rest[0] == '0' && lower(1) == 'x':
		return len(rest) > 2 && (isHex(rest[2]) || rest[2] == '.'), false
	case isDigit(rest[0]):
		return true, false
	case rest[0] == '.':
		return len(rest) > 1 && isDigit(rest[1]), false
	}
	return false, false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'f' }

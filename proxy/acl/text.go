package acl

import "github.com/replproxy/replproxy/proxy/wire"

// Redis's string helpers that ACL behaviour depends on, rewritten so that
// every edge case comes out as in Redis 7.0: how a selector's text is split
// into arguments (sdssplitargs), how an aclfile is split (sdssplitlen,
// sdstrim), how numbers are parsed (string2ll) and how channel and key
// patterns match (stringmatchlen, with the nesting limit of CVE-2024-31228
// that redis-server 7.0.15 as shipped carries).

// parseInt64 is Redis's string2ll: an optional '-', then "0" alone or a
// digit 1-9 and more digits, fitting an int64; nothing else (no '+', no
// spaces, no leading zeros, at most 20 bytes).
func parseInt64(s string) (int64, bool) {
	if len(s) == 0 || len(s) >= 21 {
		return 0, false
	}
	if s == "0" {
		return 0, true
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	if len(s) == 0 || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<64-1)/10 {
			return 0, false
		}
		v *= 10
		if v > 1<<64-1-uint64(c-'0') {
			return 0, false
		}
		v += uint64(c - '0')
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

// hasSpaceOrNUL reports whether s has white space (C isspace) or a NUL:
// what Redis refuses in user names and in key and channel patterns, so
// that ACL LIST's lines split back into the same rules.
func hasSpaceOrNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) || s[i] == 0 {
			return true
		}
	}
	return false
}

// trimSet is Redis's sdstrim: s without the bytes of set at either end.
func trimSet(s, set string) string {
	in := func(c byte) bool {
		for i := 0; i < len(set); i++ {
			if set[i] == c {
				return true
			}
		}
		return false
	}
	for len(s) > 0 && in(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && in(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// globNestingLimit is how deep '*' may recurse before a match gives up (a
// no-match): CVE-2024-31228's fix, which redis-server 7.0.15 as shipped by
// Debian carries.
const globNestingLimit = 1000

// globMatch is Redis's stringmatchlen, case-sensitive: pattern against s,
// with * ? [...] [^...] ranges and \ escapes, byte for byte as Redis reads
// them (a C char is signed, so bytes above 0x7f sort below the ASCII ones
// in a range; reads past the pattern's end see a NUL).
func globMatch(pattern, s string) bool {
	skipLonger := false
	return globMatchAt(pattern, s, &skipLonger, 0)
}

func globMatchAt(p, s string, skipLonger *bool, nesting int) bool {
	if nesting > globNestingLimit {
		return false
	}
	at := func(i int) byte {
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && at(1) == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if globMatchAt(p[1:], s, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				s = s[1:]
			}
			// Nothing after this '*' matches anywhere in the rest of s,
			// so no earlier '*' can make it match by starting later.
			*skipLonger = true
			return false
		case '?':
			s = s[1:]
		case '[':
			var match bool
			p, match = globClass(p[1:], s[0])
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// globClass matches c against the class p starts (after its '['). It
// returns p at the class's closing ']' (or at its last byte when there is
// none, as Redis leaves it) and whether c matched.
func globClass(p string, c byte) (rest string, match bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	for {
		switch {
		case len(p) >= 2 && p[0] == '\\':
			p = p[1:]
			if p[0] == c {
				match = true
			}
		case len(p) > 0 && p[0] == ']':
			return p, match != not
		case len(p) == 0:
			// Unterminated: Redis steps back onto the last byte, which
			// the caller then steps over.
			return " ", match != not
		case len(p) >= 3 && p[1] == '-':
			start, end, x := int8(p[0]), int8(p[2]), int8(c)
			if start > end {
				start, end = end, start
			}
			p = p[2:]
			if x >= start && x <= end {
				match = true
			}
		default:
			if p[0] == c {
				match = true
			}
		}
		p = p[1:]
	}
}

// splitArgs is Redis's sdssplitargs (wire.SplitArgs) on a string: it splits
// a selector's text into its rules and a configuration line into its
// arguments. ok is false for unbalanced quotes; a NUL ends s, as the C
// string it is to Redis.
func splitArgs(s string) (args []string, ok bool) {
	raw, ok := wire.SplitArgs([]byte(s))
	if !ok {
		return nil, false
	}
	args = make([]string, len(raw))
	for i, a := range raw {
		args[i] = string(a)
	}
	return args, true
}

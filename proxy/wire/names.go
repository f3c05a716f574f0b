package wire

// Names from the network (command and subcommand names, option words such
// as TYPE or SKIPME, CONFIG's directive names, REPLCONF's options, ACL
// rule words) are matched here, and only here, by one rule: Redis's, which
// compares them with strcasecmp and folds them with tolower/toupper in the
// C locale. Only the ASCII letters A–Z and a–z fold into each other; every
// other byte is itself. Go's strings.ToLower and strings.EqualFold fold
// Unicode: they take the Kelvin sign U+212A for 'k' and the long s U+017F
// for 's', so a name Redis has never heard of ("\u212aILL") would pass for
// one it has ("kill"), past any check that looked it up the ASCII way.
// internal/layering's test keeps Unicode case folding out of the code that
// reads names.

// Lower returns name with the ASCII letters A–Z lowered, every other byte
// as it is: C's tolower in the C locale. It returns name itself when
// nothing changes.
func Lower(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}

// Upper returns name with the ASCII letters a–z raised, every other byte as
// it is: C's toupper in the C locale, as Redis's error replies name a
// command ("Try CLIENT HELP.").
func Upper(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'a' <= c && c <= 'z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'a' <= c && c <= 'z' {
					b[j] = c - ('a' - 'A')
				}
			}
			return string(b)
		}
	}
	return name
}

// EqualFold reports whether name and word are equal with the ASCII letters
// folded, and only those: strcasecmp(name, word) == 0 in the C locale (but
// for a NUL byte, which is a byte like any other here). name may be a
// string or a byte slice, so that a scanner compares the bytes it holds
// without converting them.
func EqualFold[S ~string | ~[]byte](name S, word string) bool {
	if len(name) != len(word) {
		return false
	}
	for i := 0; i < len(word); i++ {
		if lowerByte(name[i]) != lowerByte(word[i]) {
			return false
		}
	}
	return true
}

// lowerByte is tolower in the C locale.
func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// CString returns s up to its first NUL byte: what Redis's C code sees of
// an argument it takes as char* (strcasecmp, a printf's %s), so that a
// reply quoting a name shows what Redis's would.
func CString(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i]
		}
	}
	return s
}

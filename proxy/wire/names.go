package wire

// Names from the network (command and subcommand names, option words such
// as TYPE or SKIPME, CONFIG's directive names, REPLCONF's options, ACL
// rule words) are matched here, and only here, by one rule: Redis's, which
// compares them with strcasecmp and folds them with tolower/toupper in the
// C locale. Only the ASCII letters A–Z and a–z fold into each other; every
// other byte is itself. A name Redis looks up in a dictionary (a command,
// a subcommand, a directive) is folded whole (Lower); an option word it
// compares with strcasecmp is read as a C string, up to a NUL byte
// (EqualFold, Word). Go's strings.ToLower and strings.EqualFold fold
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

// EqualFold reports whether name and word are equal as Redis's strcasecmp
// compares them in the C locale: as C strings, up to a NUL byte, with the
// ASCII letters folded, and only those ("ID\x00x" is "id", as Redis reads
// an option word). name may be a string or a byte slice, so that a scanner
// compares the bytes it holds without converting them.
func EqualFold[S ~string | ~[]byte](name S, word string) bool {
	for i := 0; ; i++ {
		var a, b byte
		if i < len(name) {
			a = name[i]
		}
		if i < len(word) {
			b = word[i]
		}
		if lowerByte(a) != lowerByte(b) {
			return false
		}
		if a == 0 { // the end of both C strings
			return true
		}
	}
}

// Word returns an option word as Redis's strcasecmp sees it, for a switch
// over the words an option may be: up to its first NUL byte, with the
// ASCII letters lowered. Names Redis looks up in a dictionary (commands,
// subcommands, directives) are not words: Lower folds them whole.
func Word(s string) string { return Lower(CString(s)) }

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

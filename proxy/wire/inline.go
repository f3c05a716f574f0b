package wire

// SplitArgs splits a line as redis-server's sdssplitargs does: inline commands
// (processInlineBuffer) and redis.conf lines both go through it. Tokens are separated by blanks; "double quotes" take the escapes
// \xHH, \n, \r, \t, \b, \a and \<any>; 'single quotes' take only \'; a closing quote must be
// followed by a blank or the end. The line is a C string to Redis, so it ends at a NUL byte.
// ok is false for unbalanced quotes. A blank line gives no arguments.
func SplitArgs(line []byte) (args [][]byte, ok bool) {
	// at returns the byte at i, or 0 past the end, as *p does on a C string.
	at := func(i int) byte {
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	var raw []byte
	var ends []int
	p := 0
	for {
		for at(p) != 0 && isSpace(at(p)) {
			p++
		}
		if at(p) == 0 {
			return cut(raw, ends), true
		}
		inDouble, inSingle, done := false, false, false
		for !done {
			c := at(p)
			switch {
			case inDouble:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					raw = append(raw, unhex(at(p+2))<<4|unhex(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					raw = append(raw, unescape(at(p)))
				case c == '"':
					if at(p+1) != 0 && !isSpace(at(p+1)) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					raw = append(raw, c)
				}
			case inSingle:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					raw = append(raw, '\'')
				case c == '\'':
					if at(p+1) != 0 && !isSpace(at(p+1)) {
						return nil, false
					}
					done = true
				case c == 0:
					return nil, false
				default:
					raw = append(raw, c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0: // NB: not \v or \f, unlike isSpace
					done = true
				case '"':
					inDouble = true
				case '\'':
					inSingle = true
				default:
					raw = append(raw, c)
				}
			}
			if c != 0 {
				p++
			}
		}
		ends = append(ends, len(raw))
	}
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

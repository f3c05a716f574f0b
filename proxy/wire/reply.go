package wire

import "strconv"

// The Append functions encode RESP2 replies and commands in the shape of strconv.AppendInt:
// each appends to b and returns the extended buffer.

// AppendSimple appends the simple string "+s\r\n". CR and LF inside s would end the reply
// early, so trailing ones are dropped and inner ones become spaces, as Redis does for errors.
func AppendSimple(b []byte, s string) []byte {
	b = append(b, '+')
	return appendLine(b, s)
}

// AppendError appends the error reply "-msg\r\n". msg carries its own code, for example
// "ERR unknown command" or "NOMASTERLINK Can't SYNC while not connected with my master"; a
// leading '-' is not doubled. CR and LF are handled as in [AppendSimple].
func AppendError(b []byte, msg string) []byte {
	if len(msg) > 0 && msg[0] == '-' {
		msg = msg[1:]
	}
	b = append(b, '-')
	return appendLine(b, msg)
}

// appendLine appends s without trailing CR/LF and with inner CR/LF as spaces (Redis's
// addReplyErrorFormat), then CRLF.
func appendLine(b []byte, s string) []byte {
	for len(s) > 0 && (s[len(s)-1] == '\r' || s[len(s)-1] == '\n') {
		s = s[:len(s)-1]
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

// AppendInt appends the integer reply ":n\r\n".
func AppendInt(b []byte, n int64) []byte {
	return appendPrefix(b, ':', n)
}

// AppendBulk appends p as the bulk string "$<len>\r\n<p>\r\n".
func AppendBulk(b []byte, p []byte) []byte {
	b = appendPrefix(b, '$', int64(len(p)))
	b = append(b, p...)
	return append(b, '\r', '\n')
}

// AppendBulkString appends s as the bulk string "$<len>\r\n<s>\r\n".
func AppendBulkString(b []byte, s string) []byte {
	b = appendPrefix(b, '$', int64(len(s)))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendNullBulk appends the RESP2 null bulk string "$-1\r\n".
func AppendNullBulk(b []byte) []byte { return append(b, "$-1\r\n"...) }

// AppendArrayHeader appends "*n\r\n"; the caller appends the n elements.
func AppendArrayHeader(b []byte, n int) []byte { return appendPrefix(b, '*', int64(n)) }

// AppendNullArray appends the RESP2 null array "*-1\r\n".
func AppendNullArray(b []byte) []byte { return append(b, "*-1\r\n"...) }

// AppendCommand appends args as a multibulk command, the form Redis expects from a replica:
// AppendCommand(b, "REPLCONF", "ACK", "1027").
func AppendCommand(b []byte, args ...string) []byte {
	b = AppendArrayHeader(b, len(args))
	for _, a := range args {
		b = AppendBulkString(b, a)
	}
	return b
}

// appendPrefix appends "<typ><n>\r\n", skipping strconv for one digit (redcon).
func appendPrefix(b []byte, typ byte, n int64) []byte {
	if n >= 0 && n <= 9 {
		return append(b, typ, byte('0'+n), '\r', '\n')
	}
	b = append(b, typ)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

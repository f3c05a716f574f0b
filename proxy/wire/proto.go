package wire

import (
	"math"
	"strconv"
)

// Proto is the version of RESP a client speaks: [RESP2] from its connection on, [RESP3]
// after HELLO 3. Simple strings, errors, integers, bulk strings and arrays are the same in
// both, so their Append functions take no Proto; the types RESP3 added are appended by
// Proto's methods, which write them as RESP2 carries them (Redis's addReplyMapLen,
// addReplyNull, addReplyVerbatim ...) when the client speaks RESP2. A reply made with them
// is right in both protocols, so a command gets RESP3 by using them where Redis uses the
// new types.
type Proto uint8

// The versions HELLO accepts; wire format, do not change.
const (
	RESP2 Proto = 2
	RESP3 Proto = 3
)

// AppendMapHeader appends the header of a map of n key/value pairs: "%n" in RESP3, and in
// RESP2 the flat array of 2n elements that carries it ("*2n"). The caller appends the n
// keys and values, alternately.
func (p Proto) AppendMapHeader(b []byte, n int) []byte {
	if p == RESP3 {
		return appendPrefix(b, '%', int64(n))
	}
	return appendPrefix(b, '*', 2*int64(n))
}

// AppendSetHeader appends the header of a set of n elements: "~n" in RESP3, "*n" in RESP2.
func (p Proto) AppendSetHeader(b []byte, n int) []byte {
	if p == RESP3 {
		return appendPrefix(b, '~', int64(n))
	}
	return appendPrefix(b, '*', int64(n))
}

// AppendPushHeader appends the header of an out-of-band push of n elements, the form of a
// Pub/Sub message and of SUBSCRIBE's confirmations: ">n" in RESP3, "*n" in RESP2.
func (p Proto) AppendPushHeader(b []byte, n int) []byte {
	if p == RESP3 {
		return appendPrefix(b, '>', int64(n))
	}
	return appendPrefix(b, '*', int64(n))
}

// AppendNull appends the null: "_" in RESP3, the null bulk string "$-1" in RESP2 (Redis's
// addReplyNull).
func (p Proto) AppendNull(b []byte) []byte {
	if p == RESP3 {
		return append(b, "_\r\n"...)
	}
	return AppendNullBulk(b)
}

// AppendNullArray appends the null where an array was expected: "_" in RESP3, the null
// array "*-1" in RESP2 (Redis's addReplyNullArray).
func (p Proto) AppendNullArray(b []byte) []byte {
	if p == RESP3 {
		return append(b, "_\r\n"...)
	}
	return AppendNullArray(b)
}

// AppendVerbatim appends s as the verbatim string "=<len>\r\n<format>:<s>\r\n" in RESP3,
// and as a bulk string in RESP2. format is three bytes: "txt" for plain text (INFO, CLIENT
// LIST), "mkd" for markdown; any other length is cut or padded with spaces to three, so
// that the frame stays well formed.
func (p Proto) AppendVerbatim(b []byte, format, s string) []byte {
	if p != RESP3 {
		return AppendBulkString(b, s)
	}
	b = appendPrefix(b, '=', int64(len(s))+4)
	for i := range 3 {
		c := byte(' ')
		if i < len(format) {
			c = format[i]
		}
		b = append(b, c)
	}
	b = append(b, ':')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// AppendDouble appends f as Redis's addReplyDouble does: ",<f>" in RESP3, a bulk string in
// RESP2, with 17 significant digits (printf's %.17g), and inf, -inf and nan spelled so.
func (p Proto) AppendDouble(b []byte, f float64) []byte {
	var num [32]byte
	d := num[:0]
	switch {
	case math.IsInf(f, 1):
		d = append(d, "inf"...)
	case math.IsInf(f, -1):
		d = append(d, "-inf"...)
	case math.IsNaN(f):
		d = append(d, "nan"...)
	default:
		d = strconv.AppendFloat(d, f, 'g', 17, 64)
	}
	if p != RESP3 {
		return AppendBulk(b, d)
	}
	b = append(b, ',')
	b = append(b, d...)
	return append(b, '\r', '\n')
}

// AppendBool appends v as "#t" or "#f" in RESP3, and as the integer 1 or 0 in RESP2
// (Redis's addReplyBool).
func (p Proto) AppendBool(b []byte, v bool) []byte {
	switch {
	case p == RESP3 && v:
		return append(b, "#t\r\n"...)
	case p == RESP3:
		return append(b, "#f\r\n"...)
	case v:
		return AppendInt(b, 1)
	}
	return AppendInt(b, 0)
}

// String returns "2" or "3", as CLIENT LIST's resp= shows the version.
func (p Proto) String() string { return strconv.Itoa(int(p)) }

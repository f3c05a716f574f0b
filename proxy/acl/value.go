package acl

import (
	"math"
	"strconv"
)

// Kind is the type of a [Value]: which RESP reply the server writes for it.
type Kind uint8

// The kinds of [Value]. RESP2 has no map, set or double: a Map is written
// as a flat array of its keys and values, a Set as an array, a Double as a
// bulk string (see [FormatDouble]), as Redis 7.0 writes them.
const (
	KindNull   Kind = iota // null: $-1 in RESP2, _ in RESP3
	KindSimple             // simple string: +Str
	KindError              // error: -Str (Str carries its code: "ERR ...")
	KindBulk               // bulk string: Str
	KindInt                // integer: Int
	KindDouble             // double: Double
	KindArray              // array: Elems
	KindMap                // map: Elems holds key, value, key, value...
	KindSet                // set: Elems
)

// Value is a reply of an ACL subcommand as plain data, for the server's
// writer to encode in RESP2 or RESP3. A Value returned by this package
// shares nothing with the package's state: the caller may keep it.
type Value struct {
	Kind   Kind
	Str    string  // KindSimple, KindError, KindBulk
	Int    int64   // KindInt
	Double float64 // KindDouble
	Elems  []Value // KindArray, KindSet; KindMap: keys and values alternating
}

// null is the null reply.
var null = Value{Kind: KindNull}

func simple(s string) Value     { return Value{Kind: KindSimple, Str: s} }
func bulk(s string) Value       { return Value{Kind: KindBulk, Str: s} }
func integer(n int64) Value     { return Value{Kind: KindInt, Int: n} }
func array(vs ...Value) Value   { return Value{Kind: KindArray, Elems: vs} }
func errorValue(e *Error) Value { return Value{Kind: KindError, Str: e.Reply()} }

// okValue is +OK.
var okValue = simple("OK")

// bulks returns an array of bulk strings.
func bulks(ss []string) Value {
	v := Value{Kind: KindArray, Elems: make([]Value, len(ss))}
	for i, s := range ss {
		v.Elems[i] = bulk(s)
	}
	return v
}

// FormatDouble formats f as Redis 7.0 writes a double in RESP2 (a bulk
// string) and after the ',' of RESP3: printf's %.17g, which drops trailing
// zeros (an ACL LOG age of 1234 ms is "1.234"), with "inf" and "-inf".
func FormatDouble(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

package wire

import (
	"math"
	"testing"
)

// TestProtoAppend checks each reply type RESP3 added in both protocols, as
// redis-server 7.0 writes it (networking.c: addReplyMapLen, addReplySetLen,
// addReplyPushLen, addReplyNull, addReplyNullArray, addReplyVerbatim,
// addReplyDouble, addReplyBool).
func TestProtoAppend(t *testing.T) {
	for _, tc := range []struct {
		name         string
		append       func(p Proto, b []byte) []byte
		resp2, resp3 string
	}{
		{"map", func(p Proto, b []byte) []byte { return p.AppendMapHeader(b, 7) }, "*14\r\n", "%7\r\n"},
		{"empty map", func(p Proto, b []byte) []byte { return p.AppendMapHeader(b, 0) }, "*0\r\n", "%0\r\n"},
		{"big map", func(p Proto, b []byte) []byte { return p.AppendMapHeader(b, 300) }, "*600\r\n", "%300\r\n"},
		{"set", func(p Proto, b []byte) []byte { return p.AppendSetHeader(b, 2) }, "*2\r\n", "~2\r\n"},
		{"push", func(p Proto, b []byte) []byte { return p.AppendPushHeader(b, 3) }, "*3\r\n", ">3\r\n"},
		{"null", func(p Proto, b []byte) []byte { return p.AppendNull(b) }, "$-1\r\n", "_\r\n"},
		{"null array", func(p Proto, b []byte) []byte { return p.AppendNullArray(b) }, "*-1\r\n", "_\r\n"},
		{"verbatim", func(p Proto, b []byte) []byte { return p.AppendVerbatim(b, "txt", "# Server\r\nx:1\r\n") },
			"$15\r\n# Server\r\nx:1\r\n\r\n", "=19\r\ntxt:# Server\r\nx:1\r\n\r\n"},
		{"empty verbatim", func(p Proto, b []byte) []byte { return p.AppendVerbatim(b, "txt", "") }, "$0\r\n\r\n", "=4\r\ntxt:\r\n"},
		{"verbatim short format", func(p Proto, b []byte) []byte { return p.AppendVerbatim(b, "md", "a") }, "$1\r\na\r\n", "=5\r\nmd :a\r\n"},
		{"verbatim long format", func(p Proto, b []byte) []byte { return p.AppendVerbatim(b, "text", "a") }, "$1\r\na\r\n", "=5\r\ntex:a\r\n"},
		{"double", func(p Proto, b []byte) []byte { return p.AppendDouble(b, 1.5) }, "$3\r\n1.5\r\n", ",1.5\r\n"},
		{"double 17 digits", func(p Proto, b []byte) []byte { return p.AppendDouble(b, 0.1) }, "$19\r\n0.10000000000000001\r\n", ",0.10000000000000001\r\n"},
		{"double exponent", func(p Proto, b []byte) []byte { return p.AppendDouble(b, 1e20) }, "$5\r\n1e+20\r\n", ",1e+20\r\n"},
		{"double integral", func(p Proto, b []byte) []byte { return p.AppendDouble(b, 100) }, "$3\r\n100\r\n", ",100\r\n"},
		{"inf", func(p Proto, b []byte) []byte { return p.AppendDouble(b, math.Inf(1)) }, "$3\r\ninf\r\n", ",inf\r\n"},
		{"-inf", func(p Proto, b []byte) []byte { return p.AppendDouble(b, math.Inf(-1)) }, "$4\r\n-inf\r\n", ",-inf\r\n"},
		{"nan", func(p Proto, b []byte) []byte { return p.AppendDouble(b, math.NaN()) }, "$3\r\nnan\r\n", ",nan\r\n"},
		{"true", func(p Proto, b []byte) []byte { return p.AppendBool(b, true) }, ":1\r\n", "#t\r\n"},
		{"false", func(p Proto, b []byte) []byte { return p.AppendBool(b, false) }, ":0\r\n", "#f\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				p    Proto
				want string
			}{{RESP2, tc.resp2}, {RESP3, tc.resp3}} {
				if got := string(tc.append(c.p, []byte("x"))); got != "x"+c.want {
					t.Errorf("RESP%d: got %q, want %q", c.p, got, "x"+c.want)
				}
			}
		})
	}
	if RESP2.String() != "2" || RESP3.String() != "3" {
		t.Errorf("String: %q %q", RESP2, RESP3)
	}
}

// TestProtoAppendAllocs checks that the RESP3 helpers append without
// allocating, as the RESP2 ones do.
func TestProtoAppendAllocs(t *testing.T) {
	b := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		b = RESP3.AppendMapHeader(b[:0], 7)
		b = RESP3.AppendVerbatim(b, "txt", "id=1 addr=x\n")
		b = RESP3.AppendDouble(b, 0.1)
		b = RESP2.AppendDouble(b, 0.1)
		b = RESP3.AppendNull(b)
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

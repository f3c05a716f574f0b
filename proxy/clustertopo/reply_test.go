package clustertopo

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestReadReply(t *testing.T) {
	raw := "*6\r\n+OK\r\n:-42\r\n$5\r\na\r\nbc\r\n$-1\r\n*-1\r\n*2\r\n*0\r\n$0\r\n\r\n"
	rd := newReplyReader(strings.NewReader(raw+"-ERR next\r\n"), Limits{})
	v, err := rd.read()
	if err != nil {
		t.Fatal(err)
	}
	elems, ok := v.array()
	if !ok || len(elems) != 6 {
		t.Fatalf("read %+v, want an array of 6", v)
	}
	if s, ok := elems[0].text(); !ok || s != "OK" {
		t.Errorf("simple string read as %+v", elems[0])
	}
	if n, ok := elems[1].integer(); !ok || n != -42 {
		t.Errorf("integer read as %+v", elems[1])
	}
	if s, ok := elems[2].text(); !ok || s != "a\r\nbc" {
		t.Errorf("bulk string read as %+v", elems[2])
	}
	if _, ok := elems[3].text(); ok || !elems[3].null {
		t.Errorf("null bulk string read as %+v", elems[3])
	}
	if _, ok := elems[4].array(); ok || !elems[4].null {
		t.Errorf("null array read as %+v", elems[4])
	}
	if inner, ok := elems[5].array(); !ok || len(inner) != 2 || len(inner[0].elems) != 0 || inner[1].str != "" {
		t.Errorf("nested array read as %+v", elems[5])
	}
	// The next reply reads afresh, with its own budget.
	if v, err := rd.read(); err != nil || v.kind != '-' || v.str != "ERR next" {
		t.Errorf("second reply = %+v, %v", v, err)
	}
	if _, err := rd.read(); err != io.EOF {
		t.Errorf("after the last reply: %v, want io.EOF", err)
	}
}

func TestReadReplyErrors(t *testing.T) {
	small := Limits{MaxReplyBytes: 64, MaxValues: 5}
	tests := []struct {
		name, raw string
		lim       Limits
		want      error
	}{
		{"truncated line", "+OK", Limits{}, io.ErrUnexpectedEOF},
		{"truncated bulk", "$5\r\nab", Limits{}, io.ErrUnexpectedEOF},
		{"truncated array", "*3\r\n:1\r\n", Limits{}, io.ErrUnexpectedEOF},
		{"LF without CR", "+OK\n", Limits{}, errProtocol},
		{"bulk without CRLF", "$2\r\nabcd\r\n", Limits{}, errProtocol},
		{"empty line", "\r\n", Limits{}, errProtocol},
		{"RESP3 map", "%1\r\n+a\r\n+b\r\n", Limits{}, errProtocol},
		{"RESP3 null", "_\r\n", Limits{}, errProtocol},
		{"inline text", "hello\r\n", Limits{}, errProtocol},
		{"integer with a plus", ":+1\r\n", Limits{}, errProtocol},
		{"integer with a leading zero", ":01\r\n", Limits{}, errProtocol},
		{"integer overflowing", ":9223372036854775808\r\n", Limits{}, errProtocol},
		{"bulk length -2", "$-2\r\n", Limits{}, errProtocol},
		{"array length -2", "*-2\r\n", Limits{}, errProtocol},
		{"array length a word", "*x\r\n", Limits{}, errProtocol},
		{"line too long", "+" + strings.Repeat("a", maxLine+1) + "\r\n", Limits{}, ErrReplyTooLarge},
		{"line past the buffer", "+" + strings.Repeat("a", readBuffer+10) + "\r\n", Limits{}, ErrReplyTooLarge},
		{"bulk over the bytes left", "$63\r\n" + strings.Repeat("a", 63) + "\r\n", small, ErrReplyTooLarge},
		{"lines over the bytes", "*4\r\n+" + strings.Repeat("a", 20) + "\r\n+" + strings.Repeat("a", 20) + "\r\n+" + strings.Repeat("a", 20) + "\r\n:1\r\n", small, ErrReplyTooLarge},
		{"array over the values left", "*5\r\n", small, ErrReplyTooLarge},
		{"values over the limit", "*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n:3\r\n", small, ErrReplyTooLarge},
		{"nested too deep", strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n", Limits{}, ErrReplyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := newReplyReader(strings.NewReader(tt.raw), tt.lim).read()
			if !errors.Is(err, tt.want) {
				t.Fatalf("read %q = %+v, %v; want %v", tt.raw, v, err, tt.want)
			}
		})
	}
	// As deep as a reply may nest is read.
	if _, err := newReplyReader(strings.NewReader(strings.Repeat("*1\r\n", maxDepth)+":1\r\n"), Limits{}).read(); err != nil {
		t.Errorf("arrays nested %d deep: %v", maxDepth, err)
	}
}

// TestReadReplyAllocatesAsBytesArrive checks that a length is only a
// claim: a reply announcing a huge bulk string or array and then ending
// costs what arrived, not what it announced.
func TestReadReplyAllocatesAsBytesArrive(t *testing.T) {
	for _, raw := range []string{
		"$8388000\r\nabc",
		"*262000\r\n:1\r\n",
		"*1000\r\n" + strings.Repeat("*1000\r\n", 7),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := newReplyReader(strings.NewReader(raw), Limits{}).read()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("read %.20q: %v, want io.ErrUnexpectedEOF", raw, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
			t.Errorf("read %.20q: allocated %d bytes, want at most 256 KiB", raw, got)
		}
	}
}

func TestFields(t *testing.T) {
	v := decode(t, []byte(enc([]any{"a", 1, simple("b"), "x"})), Limits{})
	fs, err := v.fields()
	if err != nil || len(fs) != 2 || fs[0].key != "a" || fs[1].key != "b" {
		t.Fatalf("fields() = %+v, %v", fs, err)
	}
	for _, bad := range []any{[]any{"a"}, []any{1, 2}, []any{"a", 1, "a", 2}, "a", []any{nil, 1}} {
		if fs, err := decode(t, []byte(enc(bad)), Limits{}).fields(); err == nil {
			t.Errorf("fields() of %q = %+v, want an error", enc(bad), fs)
		}
	}
}

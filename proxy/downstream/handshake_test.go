package downstream

import (
	"bytes"
	"strings"
	"testing"
)

// TestReplconfAck: a replica's REPLCONF ACK is read as Handshake.Replconf reads
// it: options in order, up to the first that ends the command.
func TestReplconfAck(t *testing.T) {
	for _, tc := range []struct {
		args string
		off  int64
		ok   bool
	}{
		{"REPLCONF ACK 100", 100, true},
		{"replconf ack 7 fack 3", 7, true},
		{"REPLCONF capa eof ACK 5", 5, true},
		{"REPLCONF ACK", 0, false},
		{"REPLCONF ACK x", 0, false},
		{"REPLCONF ACK -1", 0, false},
		{"REPLCONF GETACK * ACK 5", 0, false},
		{"REPLCONF listening-port 99999 ACK 5", 0, false},
		{"REPLCONF listening-port 6380 ACK 5", 5, true},
		{"REPLCONF bogus 1 ACK 5", 0, false},
		{"REPLCONF rdb-only 1 rdb-filter-only functions ACK 5", 5, true},
		{"REPLCONF rdb-only 2 ACK 5", 0, false},
		{"REPLCONF rdb-filter-only keys ACK 5", 0, false},
	} {
		var args [][]byte
		for _, f := range strings.Fields(tc.args) {
			args = append(args, []byte(f))
		}
		off, ok := replconfAck(args)
		if ok != tc.ok || (ok && off != tc.off) {
			t.Errorf("%q: %d, %v; want %d, %v", tc.args, off, ok, tc.off, tc.ok)
		}
	}
}

// TestHandshakeReplconf: REPLCONF's options go into the handshake in order;
// a refused one is answered with its error and leaves the ones before it
// applied; ACK and GETACK are never answered.
func TestHandshakeReplconf(t *testing.T) {
	for _, tc := range []struct {
		args     string
		answer   bool
		errReply string
		want     Handshake
	}{
		{"REPLCONF listening-port 6380 capa eof capa PSYNC2", true, "", Handshake{Port: 6380, CapaEOF: true, CapaPSync2: true}},
		{"REPLCONF ip-address 10.0.0.1 rdb-only 1 version 7.0.0", true, "", Handshake{IP: "10.0.0.1", RDBOnly: true}},
		{"REPLCONF listening-port", true, "ERR syntax error", Handshake{}},
		{"REPLCONF listening-port 70000", true, "ERR value is not an integer or out of range", Handshake{}},
		{"REPLCONF listening-port 1 ip-address a,b", true, "ERR REPLCONF ip-address cannot contain spaces, newlines, ',', '=' or special characters", Handshake{Port: 1}},
		{"REPLCONF ip-address " + strings.Repeat("a", 256), true, "ERR REPLCONF ip-address provided by replica instance is too long: 256 bytes", Handshake{}},
		{"REPLCONF rdb-only 1 rdb-only 0", true, "", Handshake{}},
		{"REPLCONF rdb-only 2", true, "ERR value is out of range, value must between 0 and 1", Handshake{}},
		{"REPLCONF rdb-only yes", true, "ERR value is not an integer or out of range", Handshake{}},
		{"REPLCONF rdb-only 01", true, "ERR value is not an integer or out of range", Handshake{}},
		{"REPLCONF rdb-only -1", true, "ERR value is out of range, value must between 0 and 1", Handshake{}},
		{"REPLCONF rdb-filter-only x", true, "ERR Unsupported rdb-filter-only option: x", Handshake{}},
		{"REPLCONF rdb-only 1 rdb-filter-only FUNCTIONS", true, "", Handshake{RDBOnly: true, Filtered: true, Filter: "FUNCTIONS"}},
		{"REPLCONF " + strings.Repeat("z", 70) + " 1", true, "ERR Unrecognized REPLCONF option: " + strings.Repeat("z", 70), Handshake{}},
		{"REPLCONF Bogus 1", true, "ERR Unrecognized REPLCONF option: Bogus", Handshake{}},
		{"REPLCONF capa eof ACK 5", false, "", Handshake{CapaEOF: true}},
		{"REPLCONF GETACK *", false, "", Handshake{}},
		{"REPLCONF capa eof capa psync2 capa replproxy", true, "", Handshake{CapaEOF: true, CapaPSync2: true, CapaReplproxy: true}},
		{"REPLCONF link-compression zstd", true, "", Handshake{Compression: "zstd"}},
		{"REPLCONF link-compression ZSTD link-compression no", true, "", Handshake{}},
		{"REPLCONF link-compression lz4", true, "ERR Unsupported link-compression: lz4", Handshake{}},
		{"REPLCONF link-compression", true, "ERR syntax error", Handshake{}},
	} {
		var args [][]byte
		for _, f := range strings.Fields(tc.args) {
			args = append(args, []byte(f))
		}
		var h Handshake
		answer, errReply := h.Replconf(args)
		if answer != tc.answer || errReply != tc.errReply || h != tc.want {
			t.Errorf("%.40q: %v, %q, %+v; want %v, %q, %+v", tc.args, answer, errReply, h, tc.answer, tc.errReply, tc.want)
		}
	}
	// repl-link-compression-allow no: zstd is refused, no is still +OK.
	for _, tc := range []struct {
		val, errReply string
	}{
		{"zstd", LinkCompressionRefused},
		{"no", ""},
		{"lz4", "ERR Unsupported link-compression: lz4"},
	} {
		var h Handshake
		answer, errReply, capped := h.ReplconfAllowing([][]byte{[]byte("REPLCONF"), []byte("link-compression"), []byte(tc.val)}, CompressionPolicy{})
		if !answer || errReply != tc.errReply || capped || h != (Handshake{}) {
			t.Errorf("allow no, link-compression %q: %v, %q, %+v; want %q, a plain link", tc.val, answer, errReply, h, tc.errReply)
		}
	}
	// An empty filter (redis-cli --replica's: none of the data) and a list
	// of filters, which need arguments Fields cannot make.
	for _, tc := range []struct {
		val, errReply string
		want          Handshake
	}{
		{"", "", Handshake{Filtered: true}},
		{"functions functions", "", Handshake{Filtered: true, Filter: "functions functions"}},
		{"functions keys", "ERR Unsupported rdb-filter-only option: keys", Handshake{}},
		{"\"functions\"", "", Handshake{Filtered: true, Filter: "\"functions\""}},
		{"\x00keys", "", Handshake{Filtered: true, Filter: "\x00keys"}},
		{"functions \"keys", "ERR Missing rdb-filter-only values", Handshake{}},
	} {
		var h Handshake
		answer, errReply := h.Replconf([][]byte{[]byte("REPLCONF"), []byte("rdb-filter-only"), []byte(tc.val)})
		if !answer || errReply != tc.errReply || h != tc.want {
			t.Errorf("rdb-filter-only %q: %v, %q, %+v; want %q, %+v", tc.val, answer, errReply, h, tc.errReply, tc.want)
		}
	}
}

// TestLinkCompressionCap: under repl-link-compression-max-links 2, two
// connections agree to zstd (one slot each, asking twice takes no more),
// the third is refused with LinkCompressionCapped, capped, and stays plain;
// link-compression no and EndCompression give a slot back, once, so the
// third then agrees. Without a cap (0), any number agree.
func TestLinkCompressionCap(t *testing.T) {
	var slots LinkSlots
	pol := CompressionPolicy{Allow: true, MaxLinks: 2, Slots: &slots}
	zstd := [][]byte{[]byte("REPLCONF"), []byte("link-compression"), []byte("zstd")}
	no := [][]byte{[]byte("REPLCONF"), []byte("link-compression"), []byte("no")}
	ask := func(h *Handshake, args [][]byte) (string, bool) {
		t.Helper()
		answer, errReply, capped := h.ReplconfAllowing(args, pol)
		if !answer {
			t.Fatalf("%q: no answer", args)
		}
		return errReply, capped
	}
	var a, b, c Handshake
	for _, h := range []*Handshake{&a, &a, &b} {
		if reply, capped := ask(h, zstd); reply != "" || capped || h.Compression != "zstd" {
			t.Fatalf("within the cap: %q, capped %v, %+v", reply, capped, *h)
		}
	}
	if slots.Held() != 2 {
		t.Fatalf("%d slots held by two connections", slots.Held())
	}
	if reply, capped := ask(&c, zstd); reply != LinkCompressionCapped(2) || !capped || c.Compression != "" {
		t.Fatalf("past the cap: %q, capped %v, %+v; want %q, a plain link", reply, capped, c, LinkCompressionCapped(2))
	}
	if reply, _ := ask(&a, no); reply != "" || a.Compression != "" || slots.Held() != 1 {
		t.Fatalf("link-compression no: %q, %+v, %d slots held", reply, a, slots.Held())
	}
	a.EndCompression(&slots) // a plain link's end gives nothing back
	if reply, capped := ask(&c, zstd); reply != "" || capped || slots.Held() != 2 {
		t.Fatalf("a slot given back: %q, capped %v, %d slots held", reply, capped, slots.Held())
	}
	b.EndCompression(&slots)
	c.EndCompression(&slots)
	if slots.Held() != 0 {
		t.Fatalf("%d slots held once every connection ended", slots.Held())
	}
	pol.MaxLinks = 0
	hs := make([]Handshake, 100)
	for i := range hs {
		if reply, capped := ask(&hs[i], zstd); reply != "" || capped {
			t.Fatalf("no cap, link %d: %q, capped %v", i, reply, capped)
		}
	}
	if slots.Held() != 100 {
		t.Fatalf("%d slots held by 100 connections without a cap", slots.Held())
	}
}

// TestLinkCompressionAgreedOnlyByOK: link-compression, replproxy's own
// option, takes effect only when the whole REPLCONF is answered +OK: a
// command refused for any option, before or after it, or ended by ACK or
// GETACK, leaves the compression (and the slots) as they were, while
// Redis's own options before the refused one stay applied, as in Redis.
func TestLinkCompressionAgreedOnlyByOK(t *testing.T) {
	var slots LinkSlots
	pol := CompressionPolicy{Allow: true, MaxLinks: 1, Slots: &slots}
	args := func(s string) [][]byte { return bytes.Fields([]byte(s)) }
	for _, tc := range []struct {
		args     string
		start    string // the handshake's compression before
		answer   bool
		errReply string
		want     string // its compression after
		port     int
	}{
		{"REPLCONF link-compression zstd bogus 1", "", true, "ERR Unrecognized REPLCONF option: bogus", "", 0},
		{"REPLCONF listening-port 7 link-compression zstd rdb-only 2", "", true, "ERR value is out of range, value must between 0 and 1", "", 7},
		{"REPLCONF link-compression zstd listening-port x", "", true, "ERR value is not an integer or out of range", "", 0},
		{"REPLCONF link-compression zstd link-compression lz4", "", true, "ERR Unsupported link-compression: lz4", "", 0},
		{"REPLCONF link-compression zstd ACK 5", "", false, "", "", 0},
		{"REPLCONF link-compression zstd GETACK *", "", false, "", "", 0},
		{"REPLCONF link-compression zstd link-compression no", "", true, "", "", 0},
		{"REPLCONF link-compression no link-compression zstd", "", true, "", "zstd", 0},
		// Agreed already: a refused "no" keeps it, an accepted one ends it.
		{"REPLCONF link-compression no bogus 1", "zstd", true, "ERR Unrecognized REPLCONF option: bogus", "zstd", 0},
		{"REPLCONF link-compression no", "zstd", true, "", "", 0},
	} {
		var h Handshake
		if tc.start == "zstd" {
			if _, errReply, _ := h.ReplconfAllowing(args("REPLCONF link-compression zstd"), pol); errReply != "" {
				t.Fatalf("agreeing first: %q", errReply)
			}
		}
		answer, errReply, capped := h.ReplconfAllowing(args(tc.args), pol)
		if answer != tc.answer || errReply != tc.errReply || capped || h.Compression != tc.want || h.Port != tc.port {
			t.Errorf("%q from %q: %v, %q, capped %v, %+v; want %v, %q, compression %q, port %d",
				tc.args, tc.start, answer, errReply, capped, h, tc.answer, tc.errReply, tc.want, tc.port)
		}
		if want := int64(len(h.Compression) / 4); slots.Held() != want {
			t.Errorf("%q from %q: %d slots held, want %d", tc.args, tc.start, slots.Held(), want)
		}
		h.EndCompression(&slots)
	}
}

package downstream

import (
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

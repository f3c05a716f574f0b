package wire

import (
	"bytes"
	"math"
	"testing"
)

func TestAppend(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{string(AppendSimple(nil, "PONG")), "+PONG\r\n"},
		{string(AppendSimple([]byte("x"), "OK")), "x+OK\r\n"},
		{string(AppendSimple(nil, "a\r\nb\n")), "+a  b\r\n"},
		{string(AppendError(nil, "ERR unknown command")), "-ERR unknown command\r\n"},
		{string(AppendError(nil, "-NOMASTERLINK Can't SYNC")), "-NOMASTERLINK Can't SYNC\r\n"},
		{string(AppendError(nil, "ERR bad\r\nthing\r\n")), "-ERR bad  thing\r\n"},
		{string(AppendError(nil, "ERR "+expectedDollar('\n'))), "-ERR Protocol error: expected '$', got ' '\r\n"},
		{string(AppendInt(nil, 0)), ":0\r\n"},
		{string(AppendInt(nil, 1027)), ":1027\r\n"},
		{string(AppendInt(nil, -1)), ":-1\r\n"},
		{string(AppendInt(nil, math.MinInt64)), ":-9223372036854775808\r\n"},
		{string(AppendBulk(nil, []byte("a\r\nb"))), "$4\r\na\r\nb\r\n"},
		{string(AppendBulk(nil, nil)), "$0\r\n\r\n"},
		{string(AppendBulkString(nil, "master")), "$6\r\nmaster\r\n"},
		{string(AppendNullBulk(nil)), "$-1\r\n"},
		{string(AppendArrayHeader(nil, 3)), "*3\r\n"},
		{string(AppendArrayHeader(nil, 12)), "*12\r\n"},
		{string(AppendNullArray(nil)), "*-1\r\n"},
		{string(AppendCommand(nil, "PING")), "*1\r\n$4\r\nPING\r\n"},
		{string(AppendCommand(nil, "REPLCONF", "ACK", "1027")), "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$4\r\n1027\r\n"},
		{string(AppendCommand(nil)), "*0\r\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestAppendCommandRoundTrip(t *testing.T) {
	args := []string{"PSYNC", "0123456789012345678901234567890123456789", "1", "", "\r\n\x00"}
	r := NewCommandReader(bytes.NewReader(AppendCommand(nil, args...)), Limits{})
	cmd, err := r.ReadCommand()
	if err != nil || cmd.Inline || len(cmd.Args) != len(args) {
		t.Fatalf("got %q, %v", cmd.Args, err)
	}
	for i := range args {
		if string(cmd.Args[i]) != args[i] {
			t.Errorf("arg %d = %q, want %q", i, cmd.Args[i], args[i])
		}
	}
}

func TestAppendAllocs(t *testing.T) {
	b := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(100, func() {
		b = AppendCommand(b[:0], "REPLCONF", "ACK", "1027")
		b = AppendError(b, "ERR x\r\n")
		b = AppendInt(b, 123456)
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
}

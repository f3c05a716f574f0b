package clustertopo

import (
	"strings"
	"testing"
)

// TestParseSlotsRecorded parses CLUSTER SLOTS as a real Redis 7.0 sent it,
// healthy and with a replica failing, into what the harness saw, less
// what CLUSTER SLOTS leaves out: the failing replica, and every health.
func TestParseSlotsRecorded(t *testing.T) {
	for _, state := range recordedStates {
		t.Run(state, func(t *testing.T) {
			topo, err := parseSlots(decode(t, recordedReply(t, state, FromSlots), Limits{}))
			if err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			for line := range strings.Lines(recordedCluster(t, state)) {
				switch {
				case strings.HasSuffix(line, " fail\n"):
				case strings.HasSuffix(line, " online\n"):
					want.WriteString(strings.TrimSuffix(line, "online\n") + "?\n")
				default:
					want.WriteString(line)
				}
			}
			if got := render(topo); got != want.String() {
				t.Errorf("CLUSTER SLOTS parsed as\n%s\nwant\n%s", got, want.String())
			}
		})
	}
}

// slotsNode is a node of a CLUSTER SLOTS entry as Redis 7.0 writes it.
func slotsNode(endpoint string, port int, id string, meta ...any) []any {
	return []any{endpoint, port, id, meta}
}

func TestParseSlots(t *testing.T) {
	a := slotsNode("127.0.0.1", 7000, idA)
	b := slotsNode("127.0.0.1", 7001, idB)
	c := slotsNode("127.0.0.1", 7002, idC)
	ok := []struct {
		name  string
		reply any
		want  string
	}{
		{"ranges of one primary merged, replicas once",
			[]any{[]any{0, 99, a, b}, []any{200, 16383, c}, []any{100, 199, a, b}},
			"shard 0-199\n  primary " + idA + " 127.0.0.1:7000 ?\n  replica " + idB + " 127.0.0.1:7001 ?\n" +
				"shard 200-16383\n  primary " + idC + " 127.0.0.1:7002 ?\n"},
		{"metadata: the IP for an unknown endpoint, hostnames",
			[]any{[]any{0, 16383, slotsNode("?", 7000, idA, "ip", "10.0.0.1", "hostname", "node-a"), slotsNode("node-b", 7001, idB, "ip", "10.0.0.2")}},
			"shard 0-16383\n  primary " + idA + " 10.0.0.1:7000 ?\n  replica " + idB + " node-b:7001 ?\n"},
		{"Redis 6: no metadata",
			[]any{[]any{0, 16383, a[:3], b[:3]}},
			"shard 0-16383\n  primary " + idA + " 127.0.0.1:7000 ?\n  replica " + idB + " 127.0.0.1:7001 ?\n"},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := parseRaw(FromSlots, enc(tt.reply))
			if err != nil {
				t.Fatal(err)
			}
			if got := render(topo); got != tt.want {
				t.Errorf("parsed as\n%s\nwant\n%s", got, tt.want)
			}
		})
	}

	bad := []struct {
		name, want string
		reply      any
	}{
		{"not an array", "not an array", "x"},
		{"no entries", "no shards", []any{}},
		{"an entry without nodes", "not an array of a range", []any{[]any{0, 16383}}},
		{"range backwards", "no range", []any{[]any{5, 4, a}}},
		{"range past the last slot", "no range", []any{[]any{0, 16384, a}}},
		{"a node without an ID (Redis 3)", "not an array of an endpoint", []any{[]any{0, 16383, []any{"127.0.0.1", 7000}}}},
		{"endpoint not a string", "endpoint: not a string", []any{[]any{0, 16383, []any{7, 7000, idA}}}},
		{"port a word", "port: not an integer", []any{[]any{0, 16383, []any{"127.0.0.1", "p", idA}}}},
		{"port too big", "not a port", []any{[]any{0, 16383, slotsNode("127.0.0.1", 99999, idA)}}},
		{"bad ID", "not 40 characters", []any{[]any{0, 16383, slotsNode("127.0.0.1", 7000, "abc")}}},
		{"metadata not a map", "metadata", []any{[]any{0, 16383, []any{"127.0.0.1", 7000, idA, []any{"ip"}}}}},
		{"metadata host not printable", "not printable", []any{[]any{0, 16383, slotsNode("?", 7000, idA, "ip", "1.2.3.4\r\n")}}},
		{"a replica that is another's primary", "listed twice", []any{[]any{0, 99, a, b}, []any{100, 16383, b}}},
		{"slot served twice", "served twice", []any{[]any{0, 100, a}, []any{100, 16383, b}}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := parseRaw(FromSlots, enc(tt.reply))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parsed as %+v, %v; want an error containing %q", topo, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "CLUSTER SLOTS: ") {
				t.Errorf("error %q does not say which command's reply", err)
			}
		})
	}
}

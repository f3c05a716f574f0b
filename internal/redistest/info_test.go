package redistest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The testdata files are INFO replication and CLIENT LIST output of redis-server 7.0.15
// with one replica attached, as redis-cli prints them (\n line ends).
func TestParseInfo(t *testing.T) {
	tests := []struct {
		file string
		crlf bool // convert to the \r\n line ends of the wire
		want map[string]string
		size int
	}{
		{
			file: "info_primary.txt",
			want: map[string]string{
				"role":               "master",
				"connected_slaves":   "1",
				"slave0":             "ip=127.0.0.1,port=16400,state=online,offset=77,lag=0",
				"master_replid":      "dad49ea1d944831b2dde69c0cefd7f0160224879",
				"master_repl_offset": "77",
				"second_repl_offset": "-1",
			},
			size: 12,
		},
		{
			file: "info_replica.txt",
			crlf: true,
			want: map[string]string{
				"role":               "slave",
				"master_host":        "127.0.0.1",
				"master_port":        "16399",
				"master_link_status": "up",
				"master_repl_offset": "77",
				"slave_repl_offset":  "77",
			},
			size: 21,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s := readTestdata(t, tt.file)
			if tt.crlf {
				s = strings.ReplaceAll(s, "\n", "\r\n")
			}
			got := ParseInfo(s)
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if len(got) != tt.size {
				t.Errorf("got %d fields, want %d: %v", len(got), tt.size, got)
			}
			if _, ok := got["# Replication"]; ok {
				t.Errorf("section header parsed as a field")
			}
		})
	}
}

func TestParseClientList(t *testing.T) {
	got := ParseClientList(readTestdata(t, "client_list.txt"))
	if len(got) != 2 {
		t.Fatalf("got %d clients, want 2: %v", len(got), got)
	}
	tests := []struct {
		name   string
		client int
		field  string
		want   string
	}{
		{"replica flags", 0, "flags", "S"},
		{"replica cmd", 0, "cmd", "replconf"},
		{"empty name", 0, "name", ""},
		{"subcommand", 1, "cmd", "client|list"},
		{"addr", 1, "addr", "127.0.0.1:40732"},
		{"last field", 1, "resp", "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := got[tt.client][tt.field]
			if !ok || v != tt.want {
				t.Errorf("client %d %s = %q (present %v), want %q", tt.client, tt.field, v, ok, tt.want)
			}
		})
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"empty", "", 3, ""},
		{"fewer lines", "a\nb\n", 3, "a\nb"},
		{"exact", "a\nb\nc", 3, "a\nb\nc"},
		{"more lines", "a\nb\nc\nd\n", 2, "c\nd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tail(tt.in, tt.n); got != tt.want {
				t.Errorf("tail(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

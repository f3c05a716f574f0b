package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Info runs INFO section ("" for the default sections) and returns its key:value
// fields. It fails the test on any error.
func (c *Client) Info(t testing.TB, section string) map[string]string {
	t.Helper()
	info, err := c.info(section)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return info
}

// InfoInt returns the integer field key of INFO section. It fails the test if the field
// is missing or not an integer.
func (c *Client) InfoInt(t testing.TB, section, key string) int64 {
	t.Helper()
	info := c.Info(t, section)
	v, ok := info[key]
	if !ok {
		t.Fatalf("redistest: %s: INFO %s has no field %q", c.addr, section, key)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("redistest: %s: INFO %s field %s=%q is not an integer", c.addr, section, key, v)
	}
	return n
}

// Digest returns the DEBUG DIGEST of the dataset, 40 hex digits ("000...0" when it is
// empty). The server needs enable-debug-command, which [StartServer] sets.
func (c *Client) Digest(t testing.TB) string {
	t.Helper()
	d, err := c.digest()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	return d
}

// ClientList returns one map per line of CLIENT LIST, keyed by field name ("id",
// "addr", "flags", "cmd", ...). It fails the test on any error.
func (c *Client) ClientList(t testing.TB) []map[string]string {
	t.Helper()
	v, err := c.Do("CLIENT", "LIST")
	if err != nil {
		t.Fatalf("redistest: %s: CLIENT LIST: %v", c.addr, err)
	}
	return ParseClientList(v.String())
}

func (c *Client) info(section string) (map[string]string, error) {
	args := []any{"INFO"}
	if section != "" {
		args = append(args, section)
	}
	v, err := c.Do(args...)
	if err != nil {
		return nil, fmt.Errorf("%s: INFO %s: %w", c.addr, section, err)
	}
	return ParseInfo(v.String()), nil
}

func (c *Client) digest() (string, error) {
	v, err := c.Do("DEBUG", "DIGEST")
	if err != nil {
		return "", fmt.Errorf("%s: DEBUG DIGEST: %w", c.addr, err)
	}
	return v.String(), nil
}

// ParseInfo parses INFO output (of [Client.Info], or of the proxy's in-process Info): "key:value" lines, split at the first colon, skipping
// "# Section" headers and blank lines. Lines without a colon are ignored.
func ParseInfo(s string) map[string]string {
	info := make(map[string]string)
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			info[k] = v
		}
	}
	return info
}

// ParseClientList parses CLIENT LIST output: one client per line, space-separated
// "k=v" fields. Values never contain spaces (CLIENT SETNAME rejects them).
func ParseClientList(s string) []map[string]string {
	var clients []map[string]string
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			continue
		}
		fields := make(map[string]string)
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		clients = append(clients, fields)
	}
	return clients
}

package main

import (
	"errors"
	"testing"
)

// TestFollowerWindow: INFO's repl_log_window where the proxy shows it;
// else repl-backlog-size, at least the memory window's 16 MiB and the
// log's 64 MiB, as the proxy computes it.
func TestFollowerWindow(t *testing.T) {
	backlog := func(v string) func() (string, error) { return func() (string, error) { return v, nil } }
	never := func() (string, error) { t.Error("CONFIG GET asked while INFO shows the window"); return "", nil }
	for _, tt := range []struct {
		name    string
		info    map[string]string
		backlog func() (string, error)
		want    int64
	}{
		{"INFO", map[string]string{"repl_log_window": "100663296"}, never, 96 << 20},
		{"default backlog", map[string]string{}, backlog("1048576"), 64 << 20},
		{"large backlog", map[string]string{"repl_log_size": "1"}, backlog("268435456"), 256 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := followerWindowOf(tt.info, tt.backlog)
			if err != nil || got != tt.want {
				t.Errorf("window %d, %v; want %d", got, err, tt.want)
			}
		})
	}
	for _, bad := range []struct {
		info    map[string]string
		backlog func() (string, error)
	}{
		{map[string]string{"repl_log_window": "64mb"}, never},
		{map[string]string{}, backlog("")},
		{map[string]string{}, func() (string, error) { return "", errors.New("no CONFIG") }},
	} {
		if _, err := followerWindowOf(bad.info, bad.backlog); err == nil {
			t.Errorf("INFO %v: no error", bad.info)
		}
	}
}

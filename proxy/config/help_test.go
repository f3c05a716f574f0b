package config

import (
	"strings"
	"testing"
)

// TestWriteDirectives: --help's list names every directive of the table,
// each line reads back (Load) as the default, and the startup-only ones are
// marked.
func TestWriteDirectives(t *testing.T) {
	var b strings.Builder
	if err := WriteDirectives(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	var conf strings.Builder
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		line, startup := strings.CutSuffix(strings.TrimSpace(line), "(startup only)")
		line = strings.TrimSpace(line)
		name, value, _ := strings.Cut(line, " ")
		seen[name] = true
		if startup == Mutable(name) {
			t.Errorf("%q: marked startup only %v, but Mutable is %v", line, startup, Mutable(name))
		}
		if value != "(none)" {
			conf.WriteString(line + "\n")
		}
	}
	for _, name := range Names() {
		if !seen[name] {
			t.Errorf("directive %s missing from the help", name)
		}
	}
	c := DefaultConfig()
	if err := c.Load("help", conf.String()); err != nil {
		t.Fatalf("the help's defaults do not load: %v", err)
	}
	for _, name := range Names() {
		got, _ := c.Get(name)
		want, _ := DefaultConfig().Get(name)
		if got != want {
			t.Errorf("%s: the help's default reads back as %q, want %q", name, got, want)
		}
	}
}

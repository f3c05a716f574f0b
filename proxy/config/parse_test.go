package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// exampleConf is the documented example at the repository root.
const exampleConf = "../../testdata/replproxy.conf"

func TestSplitArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
		err  error
	}{
		{"empty", "", nil, nil},
		{"blanks", " \t\v\f\r\n", nil, nil},
		{"words", "a b  c", []string{"a", "b", "c"}, nil},
		{"tabs", "a\tb", []string{"a", "b"}, nil},
		{"leading and trailing blanks", "  a b  ", []string{"a", "b"}, nil},
		{"vertical tab inside a word", "a\vb", []string{"a\vb"}, nil},
		{"double quotes", `"a b" c`, []string{"a b", "c"}, nil},
		{"single quotes", `'a b' c`, []string{"a b", "c"}, nil},
		{"empty double", `""`, []string{""}, nil},
		{"empty both", `"" ''`, []string{"", ""}, nil},
		{"escapes", `"\n\r\t\b\a\\\"\q"`, []string{"\n\r\t\b\a\\\"q"}, nil},
		{"hex escape", `"\x41\x6a\x6A\x00z"`, []string{"Ajj\x00z"}, nil},
		{"bad hex escape", `"\x4g"`, []string{"x4g"}, nil},
		{"short hex escape", `"\x4"`, []string{"x4"}, nil},
		{"single quote escape", `'a\'b'`, []string{"a'b"}, nil},
		{"single quote keeps backslashes", `'a\nb\c'`, []string{`a\nb\c`}, nil},
		{"double inside single", `'say "hi"'`, []string{`say "hi"`}, nil},
		{"single inside double", `"it's"`, []string{"it's"}, nil},
		{"quote inside word", `a"b c"`, []string{"ab c"}, nil},
		{"quote inside word then blank", `10m"b" x`, []string{"10mb", "x"}, nil},
		{"closing quote then tab", "\"a\"\tb", []string{"a", "b"}, nil},
		{"closing quote then vertical tab", "\"a\"\vb", []string{"a", "b"}, nil},
		{"unquoted backslash", `a\b`, []string{`a\b`}, nil},
		{"trailing backslash", `abc\`, []string{`abc\`}, nil},
		{"NUL ends the line", "a b\x00c d", []string{"a", "b"}, nil},

		{"unterminated double", `"abc`, nil, ErrUnbalancedQuotes},
		{"unterminated single", `'abc`, nil, ErrUnbalancedQuotes},
		{"backslash before closing single", `'a\\'`, nil, ErrUnbalancedQuotes},
		{"escaped closing double", `"abc\"`, nil, ErrUnbalancedQuotes},
		{"backslash at end in double", `"abc\`, nil, ErrUnbalancedQuotes},
		{"text after closing double", `"a"b`, nil, ErrUnbalancedQuotes},
		{"text after closing single", `'a'b`, nil, ErrUnbalancedQuotes},
		{"quote after closing quote", `"a""b"`, nil, ErrUnbalancedQuotes},
		{"word then text after quote", `a"b c"d`, nil, ErrUnbalancedQuotes},
		{"NUL inside quotes", "\"ab\x00c\"", nil, ErrUnbalancedQuotes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitArgs(tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("splitArgs(%q) error = %v, want %v", tc.in, err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("splitArgs(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want func(c *Config)
	}{
		{"empty", "", func(*Config) {}},
		{"comments and blanks", "# comment\n\n   # indented comment\n\t\n\v\nport 7000\n", func(c *Config) { c.Port = 7000 }},
		{"CRLF", "port 7000\r\nmaxclients 5\r\n", func(c *Config) { c.Port, c.MaxClients = 7000, 5 }},
		{"no final newline", "port 7000", func(c *Config) { c.Port = 7000 }},
		{"leading blanks", "   \tport 7000", func(c *Config) { c.Port = 7000 }},
		{"case-insensitive name", "PORT 7000\nMaxMemory 1GB", func(c *Config) { c.Port, c.MaxMemory = 7000, 1<<30 }},
		{"last wins", "port 7000\nport 7001", func(c *Config) { c.Port = 7001 }},
		{"alias", "slaveof 10.0.0.1 6380", func(c *Config) { c.MasterHost, c.MasterPort = "10.0.0.1", 6380 }},
		{"replicaof no one", "replicaof 10.0.0.1 6380\nreplicaof no one", func(*Config) {}},
		{"quoted password", `requirepass "p@ss word\x21"`, func(c *Config) { c.RequirePass = "p@ss word!" }},
		{"single-quoted password", `masterauth 'it\'s'`, func(c *Config) { c.MasterAuth = "it's" }},
		{"bind resplit", `bind "127.0.0.1 -::1"`, func(c *Config) { c.Bind = []string{"127.0.0.1", "-::1"} }},
		{"bind words", `bind 10.0.0.1 * -::*`, func(c *Config) { c.Bind = []string{"10.0.0.1", "*", "-::*"} }},
		{"output limits merge", "client-output-buffer-limit replica 1mb 2mb 3\nclient-output-buffer-limit pubsub 4 5 6", func(c *Config) {
			c.ClientOutputBufferLimit.Replica = OutputBufferLimit{1 << 20, 2 << 20, 3 * time.Second}
			c.ClientOutputBufferLimit.PubSub = OutputBufferLimit{4, 5, 6 * time.Second}
		}},
		{"output limits one line", `client-output-buffer-limit normal 1 2 3 slave 4 5 6`, func(c *Config) {
			c.ClientOutputBufferLimit.Normal = OutputBufferLimit{1, 2, 3 * time.Second}
			c.ClientOutputBufferLimit.Replica = OutputBufferLimit{4, 5, 6 * time.Second}
		}},
		{"output limits quoted", `client-output-buffer-limit "replica 256mb 64mb 60"`, func(*Config) {}},
		{"backlog clamped", "repl-backlog-size 100", func(c *Config) { c.ReplBacklogSize = MinReplBacklogSize }},
		{"snapshot-from", "snapshot-from 10.0.0.2 6379\nsnapshot-from-fallback no", func(c *Config) {
			c.SnapshotFromHost, c.SnapshotFromPort, c.SnapshotFromFallback = "10.0.0.2", 6379, false
		}},
		{"snapshot-from quoted", `snapshot-from "::1 6380"`, func(c *Config) { c.SnapshotFromHost, c.SnapshotFromPort = "::1", 6380 }},
		{"snapshot-from back to primary", "snapshot-from 10.0.0.2 6379\nsnapshot-from Primary", func(*Config) {}},
		{"snapshot-from empty", `snapshot-from ""`, func(*Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := DefaultConfig()
			tc.want(want)
			got := DefaultConfig()
			if err := got.Load("test.conf", tc.text); err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Load(%q):\n got %+v\nwant %+v", tc.text, got, want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		text      string
		line      int
		directive string
		err       error
		msg       string // the whole Error() text, when not ""
	}{
		{"unknown directive", "port 7000\n# x\nfoo bar\n", 3, "foo", ErrUnknownDirective,
			"config: test.conf:3: foo: unknown directive"},
		{"redis-only directive", "appendonly yes", 1, "appendonly", ErrUnknownDirective, ""},
		{"trailing comment", "port 7000 # the port", 1, "port", ErrArgCount,
			"config: test.conf:1: port: wrong number of arguments: got 4, want 1"},
		{"missing argument", "\n\nmaxmemory", 3, "maxmemory", ErrArgCount, ""},
		{"bad value", "maxmemory 12q", 1, "maxmemory", ErrInvalidValue,
			`config: test.conf:1: maxmemory: invalid value "12q": argument must be a memory value`},
		{"unbalanced quotes", "port 7000\nrequirepass \"abc\n", 2, "", ErrUnbalancedQuotes,
			"config: test.conf:2: unbalanced quotes"},
		{"text after quote", `maxmemory "10"mb`, 1, "", ErrUnbalancedQuotes, ""},
		{"unbalanced resplit", `bind "'127.0.0.1"`, 1, "bind", ErrUnbalancedQuotes, ""},
		{"include", "include /etc/other.conf", 1, "include", ErrUnsupported, ""},
		{"NUL byte", "port 7000\nport 1\x002", 2, "", ErrInvalidValue, ""},
		{"uppercase name reported lower", "MAXCLIENTS 0", 1, "maxclients", ErrInvalidValue, ""},
		{"weird name quoted", "f\x01o x", 1, "f\x01o", ErrUnknownDirective,
			`config: test.conf:1: "f\x01o": unknown directive`},
		{"secret not echoed", "masterauth a b", 1, "masterauth", ErrArgCount,
			"config: test.conf:1: masterauth: wrong number of arguments: got 2, want 1"},
		{"snapshot-from port zero", "snapshot-from 10.0.0.2 0", 1, "snapshot-from", ErrInvalidValue,
			`config: test.conf:1: snapshot-from: invalid snapshot-from port: invalid value "0": argument must be between 1 and 65535 inclusive`},
		{"snapshot-from host without port", "snapshot-from 10.0.0.2", 1, "snapshot-from", ErrArgCount,
			"config: test.conf:1: snapshot-from: wrong number of arguments: got 1, want 2 (<host> <port>) or 1 (primary)"},
		{"snapshot-from primary with more", "snapshot-from primary 6379 x", 1, "snapshot-from", ErrArgCount, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Load("test.conf", tc.text)
			ce := checkError(t, err, tc.err)
			if ce.File != "test.conf" || ce.Line != tc.line || ce.Directive != tc.directive {
				t.Fatalf("error at %s:%d directive %q, want test.conf:%d %q (%v)",
					ce.File, ce.Line, ce.Directive, tc.line, tc.directive, err)
			}
			if tc.msg != "" && err.Error() != tc.msg {
				t.Fatalf("Error() = %q\n          want %q", err.Error(), tc.msg)
			}
			if !reflect.DeepEqual(c, DefaultConfig()) {
				t.Fatalf("failed Load changed the config: %+v", c)
			}
		})
	}
}

// checkError asserts err is an *Error wrapping want, and returns it.
func checkError(t testing.TB, err, want error) *Error {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error %v does not wrap %v", err, want)
	}
	return ce
}

// writeConf writes text to a file in a fresh temporary directory.
func writeConf(t testing.TB, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replproxy.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestParse(t *testing.T) {
	file := writeConf(t, "port 7000\nmaxclients 50\nmasteruser proxy\nmasterauth secret\n")
	for _, tc := range []struct {
		name string
		args []string
		want func(c *Config)
	}{
		{"no arguments", nil, func(*Config) {}},
		{"file", []string{file}, func(c *Config) {
			c.Port, c.MaxClients, c.MasterUser, c.MasterAuth = 7000, 50, "proxy", "secret"
		}},
		{"file then override", []string{file, "--port", "7001"}, func(c *Config) {
			c.Port, c.MaxClients, c.MasterUser, c.MasterAuth = 7001, 50, "proxy", "secret"
		}},
		{"replicaof two words", []string{"--replicaof", "127.0.0.1", "6379"}, func(c *Config) {
			c.MasterHost, c.MasterPort = "127.0.0.1", 6379
		}},
		{"replicaof then more", []string{"--replicaof", "127.0.0.1", "6379", "--port", "7000"}, func(c *Config) {
			c.MasterHost, c.MasterPort, c.Port = "127.0.0.1", 6379, 7000
		}},
		{"slaveof one argument", []string{"--slaveof", "10.1.2.3 6380"}, func(c *Config) {
			c.MasterHost, c.MasterPort = "10.1.2.3", 6380
		}},
		{"name and value in one argument", []string{"--port 7002"}, func(c *Config) { c.Port = 7002 }},
		{"name and some values in one argument", []string{"--client-output-buffer-limit replica", "1", "2", "3"}, func(c *Config) {
			c.ClientOutputBufferLimit.Replica = OutputBufferLimit{1, 2, 3 * time.Second}
		}},
		{"output limits one value", []string{"--client-output-buffer-limit", "replica 1mb 2mb 3"}, func(c *Config) {
			c.ClientOutputBufferLimit.Replica = OutputBufferLimit{1 << 20, 2 << 20, 3 * time.Second}
		}},
		{"value starting with --", []string{"--requirepass", "--x", "--port", "7003"}, func(c *Config) {
			c.RequirePass, c.Port = "--x", 7003
		}},
		{"value with spaces", []string{"--requirepass", "a b"}, func(c *Config) { c.RequirePass = "a b" }},
		{"value starting with -", []string{"--bind", "127.0.0.1", "-::1"}, func(c *Config) {
			c.Bind = []string{"127.0.0.1", "-::1"}
		}},
		{"uppercase name", []string{"--PORT", "7004"}, func(c *Config) { c.Port = 7004 }},
		{"command line fixes file", []string{writeConf(t, "masteruser u\n"), "--masterauth", "p"}, func(c *Config) {
			c.MasterUser, c.MasterAuth = "u", "p"
		}},
		{"example file", []string{exampleConf}, func(*Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := DefaultConfig()
			tc.want(want)
			got, err := Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Parse(%q):\n got %+v\nwant %+v", tc.args, got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.conf")
	bad := writeConf(t, "port 7000\n\nmaxmemory lots\n")
	for _, tc := range []struct {
		name      string
		args      []string
		file      string
		line      int
		directive string
		err       error
	}{
		{"missing file", []string{missing}, missing, 0, "", fs.ErrNotExist},
		{"directory", []string{t.TempDir()}, "", 0, "", nil},
		{"bad line", []string{bad}, bad, 3, "maxmemory", ErrInvalidValue},
		{"bad line before good args", []string{bad, "--port", "1"}, bad, 3, "maxmemory", ErrInvalidValue},
		{"stray argument", []string{exampleConf, "other.conf"}, "", 0, "", ErrUnsupported},
		{"- in the middle is a value", []string{"--port", "1", "-", "--maxclients", "2"}, "", 0, "port", ErrArgCount},
		{"bare --", []string{"--", "x"}, "", 0, "", ErrUnsupported},
		{"unbalanced name", []string{`--port "7000`}, "", 0, "", ErrUnbalancedQuotes},
		{"missing value", []string{"--port"}, "", 0, "port", ErrArgCount},
		{"too many values", []string{"--port", "1", "2"}, "", 0, "port", ErrArgCount},
		{"unknown", []string{"--foo", "bar"}, "", 0, "foo", ErrUnknownDirective},
		{"bad value", []string{"--port", "http"}, "", 0, "port", ErrInvalidValue},
		{"include", []string{"--include", "x.conf"}, "", 0, "include", ErrUnsupported},
		{"validate", []string{"--masteruser", "u"}, "", 0, "masteruser", ErrInvalidValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(tc.args)
			if c != nil {
				t.Fatalf("Parse(%q) returned a config with error %v", tc.args, err)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse(%q) error %v (%T) is not a *config.Error", tc.args, err, err)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("error %v does not wrap %v", err, tc.err)
			}
			if tc.file != "" && ce.File != tc.file {
				t.Fatalf("error file %q, want %q", ce.File, tc.file)
			}
			if ce.Line != tc.line || ce.Directive != tc.directive {
				t.Fatalf("error line %d directive %q, want %d %q (%v)", ce.Line, ce.Directive, tc.line, tc.directive, err)
			}
		})
	}
}

func TestParseErrorText(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.conf")
	_, err := Parse([]string{missing})
	if want := "config: " + missing + ": no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	_, err = Parse([]string{"--requirepass", "s3cret", "stray"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "stray") {
		t.Fatalf("error %v echoes an argument", err)
	}
	if want := "config: requirepass: wrong number of arguments: got 2, want 1"; err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestExampleConf checks that testdata/replproxy.conf sets every directive,
// each to its default, so that it documents them all.
func TestExampleConf(t *testing.T) {
	data, err := os.ReadFile(exampleConf)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		words, err := splitArgs(line)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if len(words) > 0 {
			set[words[0]] = true
		}
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			if !set[name] {
				t.Fatalf("%s does not set %s", exampleConf, name)
			}
			if !strings.Contains(string(data), "\n# ") {
				t.Fatalf("%s has no comments", exampleConf)
			}
		})
	}
	c, err := Parse([]string{exampleConf})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, DefaultConfig()) {
		t.Fatalf("%s is not the defaults:\n got %+v\nwant %+v", exampleConf, c, DefaultConfig())
	}
}

// repr quotes s the way Redis's sdscatrepr does (and redis-server when it
// turns command-line arguments into config lines).
func repr(s string) string {
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		case '\a':
			b = append(b, `\a`...)
		case '\b':
			b = append(b, `\b`...)
		default:
			if c >= 0x20 && c < 0x7f {
				b = append(b, c)
			} else {
				b = append(b, '\\', 'x', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			}
		}
	}
	return string(append(b, '"'))
}

// checkRoundTrip asserts that CONFIG GET output fed to CONFIG SET rebuilds c.
func checkRoundTrip(t testing.TB, c *Config) {
	t.Helper()
	n := DefaultConfig()
	for _, name := range Names() {
		v, ok := c.Get(name)
		if !ok {
			t.Fatalf("Get(%q) unknown", name)
		}
		if err := n.Set(name, v); err != nil {
			t.Fatalf("Set(%q, Get = %q): %v", name, v, err)
		}
	}
	// User lines are no Get/Set directive (CONFIG GET and SET know none,
	// as in Redis): they round trip through Rewrite, checked after this.
	n.Users = c.Users
	if !reflect.DeepEqual(n, c) {
		t.Fatalf("Get/Set round trip:\n got %+v\nwant %+v", n, c)
	}
}

var fuzzSeeds = []string{
	"",
	"port 7000\n",
	"# comment\r\nbind 127.0.0.1 -::1\r\n",
	"replicaof 10.0.0.1 6379\nmasteruser u\nmasterauth \"p\\x41ss\"\n",
	"client-output-buffer-limit normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60\n",
	"client-output-buffer-limit \"slave 1 2 3\"\n",
	"maxmemory 1gb\nmaxmemory-policy evict-snapshots\nrepl-backlog-size 100\n",
	"loglevel DEBUG\nlog-format json\nlogfile '/var/log/r p.log'\ndir /tmp\n",
	"requirepass 'it\\'s'\nmaxclients 1\nrepl-timeout 1\n",
	"maxmemory \"10\"mb\n",
	"foo bar\n",
	"port 1 # c\n",
	"masteruser x\n",
	"bind-source-addr 10.0.0.5\nbind-source-addr \"\"\n",
	"snapshot-from 10.0.0.2 6379\nsnapshot-from-fallback no\n",
	"snapshot-from \"::1 6380\"\nsnapshot-from PRIMARY\n",
}

func FuzzParseConfig(f *testing.F) {
	if data, err := os.ReadFile(exampleConf); err == nil {
		f.Add(string(data))
	}
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		c := DefaultConfig()
		err := c.Load("fuzz.conf", text)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.File != "fuzz.conf" || ce.Line < 1 || ce.Line > strings.Count(text, "\n")+1 {
				t.Fatalf("bad error %#v", err)
			}
			if !reflect.DeepEqual(c, DefaultConfig()) {
				t.Fatalf("failed Load changed the config")
			}
			_ = err.Error()
		}

		// Each line that splits must survive quoting with sdscatrepr.
		for _, line := range strings.Split(text, "\n") {
			words, err := splitArgs(line)
			if err != nil {
				continue
			}
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = repr(w)
			}
			again, err := splitArgs(strings.Join(quoted, " "))
			if err != nil || !slices.Equal(again, words) {
				t.Fatalf("repr round trip of %q: %q, %v", words, again, err)
			}
		}
		if err != nil {
			return
		}

		// Lines are independent: loading the text in two parts split at a
		// line boundary gives the same result.
		if i := strings.IndexByte(text[len(text)/2:], '\n'); i >= 0 {
			cut := len(text)/2 + i + 1
			two := DefaultConfig()
			if err := two.Load("a", text[:cut]); err != nil {
				t.Fatalf("first part: %v", err)
			}
			if err := two.Load("b", text[cut:]); err != nil {
				t.Fatalf("second part: %v", err)
			}
			if !reflect.DeepEqual(two, c) {
				t.Fatalf("split load differs:\n got %+v\nwant %+v", two, c)
			}
		}

		if err := c.Validate(); err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Directive == "" {
				t.Fatalf("bad Validate error %#v", err)
			}
			return
		}
		checkRoundTrip(t, c)

		// CONFIG REWRITE over the text it came from gives it back.
		rw := c.Rewrite(text)
		again := DefaultConfig()
		if err := again.Load("rw.conf", rw); err != nil {
			t.Fatalf("Load(Rewrite): %v\n%s", err, rw)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("Load(Rewrite):\n got %+v\nwant %+v", again, c)
		}
	})
}

// TestParseStdin: "-" first or last reads the configuration from standard
// input, as redis-server does, applied after the file and before the
// command-line directives; errors in it are named "stdin:<line>".
func TestParseStdin(t *testing.T) {
	file := writeConf(t, "port 7000\nmaxclients 50\n")
	const stdin = "maxclients 60\nrepl-timeout 7\n"
	for _, tc := range []struct {
		name string
		args []string
		want func(c *Config)
	}{
		{"stdin alone", []string{"-"}, func(c *Config) { c.MaxClients, c.ReplTimeout = 60, 7*time.Second }},
		{"stdin then directives", []string{"-", "--repl-timeout", "8"}, func(c *Config) { c.MaxClients, c.ReplTimeout = 60, 8*time.Second }},
		{"file, stdin last", []string{file, "-"}, func(c *Config) { c.Port, c.MaxClients, c.ReplTimeout = 7000, 60, 7*time.Second }},
		{"file, directives, stdin last", []string{file, "--maxclients", "70", "-"}, func(c *Config) {
			c.Port, c.MaxClients, c.ReplTimeout = 7000, 70, 7*time.Second
		}},
		{"directives, stdin last", []string{"--port", "7001", "-"}, func(c *Config) {
			c.Port, c.MaxClients, c.ReplTimeout = 7001, 60, 7*time.Second
		}},
		{"- in the middle is a value", []string{"--requirepass", "-", "--port", "7002"}, func(c *Config) {
			c.RequirePass, c.Port = "-", 7002
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := DefaultConfig()
			tc.want(want)
			got, err := ParseStdin(tc.args, strings.NewReader(stdin))
			if err != nil {
				t.Fatalf("ParseStdin(%q): %v", tc.args, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("ParseStdin(%q):\n got %+v\nwant %+v", tc.args, got, want)
			}
		})
	}
	// A last "-" is stdin even after a directive that needs a value, as in
	// redis-server, which then finds the directive without its value.
	if _, err := ParseStdin([]string{"--requirepass", "-"}, strings.NewReader(stdin)); !errors.Is(err, ErrArgCount) {
		t.Errorf("--requirepass - answered %v, want %v", err, ErrArgCount)
	}
	_, err := ParseStdin([]string{"-"}, strings.NewReader("port 1\nrepl-timeout soon\n"))
	var e *Error
	if !errors.As(err, &e) || e.File != StdinName || e.Line != 2 || e.Directive != "repl-timeout" {
		t.Errorf("a bad line on stdin: %v, want stdin:2 repl-timeout", err)
	}
}

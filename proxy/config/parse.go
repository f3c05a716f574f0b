package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Parse builds a Config from a command line shaped like redis-server's,
// without the program name (os.Args[1:]):
//
//	[path/to/replproxy.conf] [--directive value ...] [-]
//
// A first argument that does not start with '-' is a config file, read and
// applied over [DefaultConfig] with [Config.Load]. An argument "-" first or
// last reads more configuration from standard input, as redis-server does
// (`echo 'port 6380' | replproxy -`), applied after the file (see
// [ParseStdin]). Each "--name" then starts a directive that takes the
// following arguments up to the next one starting with "--". As in
// redis-server 7.0.1+, the argument right after a bare "--name" is always a
// value, even if it starts with "--" (so `--requirepass --x` works), and
// "--name value" in a single argument is split into words. Command-line
// directives apply after the file and standard input, so they win. The
// result is validated with [Config.Validate].
//
// Errors are [*Error]: from the file they carry File and Line (File
// "stdin" for standard input); from the command line both are empty.
func Parse(args []string) (*Config, error) { return ParseStdin(args, os.Stdin) }

// ParseStdin is [Parse] with stdin as what "-" reads.
func ParseStdin(args []string, stdin io.Reader) (*Config, error) {
	c := DefaultConfig()
	first := 1
	fromStdin := false
	switch {
	case len(args) > 0 && args[0] == "-":
		// redis-server: "-" as the first argument (there is then no file).
		fromStdin = true
		args = args[1:]
		first = 2
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		path := args[0]
		args = args[1:]
		first = 2
		data, err := os.ReadFile(path)
		if err != nil {
			// The *PathError would repeat the path that Error already prints.
			if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, &Error{File: path, Err: err}
		}
		if err := c.Load(path, string(data)); err != nil {
			return nil, err
		}
	}
	if n := len(args); n > 0 && args[n-1] == "-" {
		// And as the last one, even after a directive that takes a value,
		// as redis-server checks for it before anything else.
		fromStdin = true
		args = args[:n-1]
	}
	if fromStdin {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, &Error{File: StdinName, Err: err}
		}
		if err := c.Load(StdinName, string(data)); err != nil {
			return nil, err
		}
	}
	if err := c.applyArgs(args, first); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// StdinName is the file name errors give the configuration read from
// standard input.
const StdinName = "stdin"

// applyArgs applies "--name value ..." arguments in order; first is the
// 1-based position of args[0] on the command line, for errors. On error, c
// may hold the directives before the bad one.
func (c *Config) applyArgs(args []string, first int) error {
	var (
		name       string
		values     []string
		started    bool // name holds a directive to apply
		valueFirst bool // the next argument is a value even if it starts with "--"
	)
	flush := func() error {
		if !started {
			return nil
		}
		return c.Set(name, values...)
	}
	// Errors name arguments by position, never by content: it may be a secret.
	for i, a := range args {
		if strings.HasPrefix(a, "--") && !valueFirst {
			if err := flush(); err != nil {
				return err
			}
			words, err := splitArgs(a[2:])
			if err != nil {
				return &Error{Err: fmt.Errorf("argument %d: %w", first+i, err)}
			}
			if len(words) == 0 {
				return &Error{Err: fmt.Errorf("argument %d: %w: empty directive name", first+i, ErrUnsupported)}
			}
			name, values, started = words[0], words[1:], true
			valueFirst = len(words) == 1
			continue
		}
		if !started {
			return &Error{Err: fmt.Errorf("argument %d: %w: expected the config file first, then --directive value", first+i, ErrUnsupported)}
		}
		values = append(values, a)
		valueFirst = false
	}
	return flush()
}

// Load applies the directives in text, in redis.conf syntax, over c, in
// order, as redis-server's loadServerConfigFromString does. file names the
// source in errors. Load is all or nothing: on error c is unchanged. It does
// not call [Config.Validate], so several texts may be layered first.
//
// Lines are split on '\n' and trimmed of " \t\r\n"; empty lines and lines
// whose first non-blank byte is '#' are skipped (a '#' later in a line is not
// a comment). The rest is split into words as Redis's sdssplitargs does
// (see the package doc for quoting); the first word is the directive name,
// matched case-insensitively. A NUL byte is an error (redis-server would
// silently cut the line there).
func (c *Config) Load(file, text string) error {
	n := c.Clone()
	line := 0
	for rest, more := text, true; more; {
		var raw string
		raw, rest, more = strings.Cut(rest, "\n")
		line++
		if strings.IndexByte(raw, 0) >= 0 {
			return &Error{File: file, Line: line, Err: fmt.Errorf("%w: NUL byte in line", ErrInvalidValue)}
		}
		raw = strings.Trim(raw, " \t\r\n")
		if raw == "" || raw[0] == '#' {
			continue
		}
		words, err := splitArgs(raw)
		if err != nil {
			return &Error{File: file, Line: line, Err: err}
		}
		if len(words) == 0 {
			continue // only blanks such as \v or \f
		}
		name := wire.Lower(words[0])
		if err := n.set(name, words[1:]); err != nil {
			return &Error{File: file, Line: line, Directive: name, Err: err}
		}
	}
	*c = *n
	return nil
}

// splitArgs splits a redis.conf line into words exactly as Redis's
// sdssplitargs does (wire.SplitArgs, which inline commands use too). An
// unterminated quote or a bad closing quote is [ErrUnbalancedQuotes]; an
// empty or all-blank line gives no words.
func splitArgs(line string) ([]string, error) {
	args, ok := wire.SplitArgs([]byte(line))
	if !ok {
		return nil, ErrUnbalancedQuotes
	}
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = string(a)
	}
	return words, nil
}

package config

import (
	"errors"
	"strconv"
	"strings"
)

// The sentinels below are never returned bare: every error this package
// returns is an [*Error] that wraps one of them (or an I/O error), the way
// strconv wraps strconv.ErrRange in a *strconv.NumError. So they carry no
// "config:" prefix of their own; [Error.Error] adds it once. Classify with
// errors.Is.
var (
	// ErrUnknownDirective means the directive name is not in the table (Redis: "Bad directive").
	ErrUnknownDirective = errors.New("unknown directive")
	// ErrArgCount means the directive got the wrong number of arguments.
	ErrArgCount = errors.New("wrong number of arguments")
	// ErrUnbalancedQuotes means a line (or a re-split argument) has an unterminated quote,
	// or a closing quote not followed by a space or the end of the line.
	ErrUnbalancedQuotes = errors.New("unbalanced quotes")
	// ErrInvalidValue means an argument does not parse or is out of range.
	ErrInvalidValue = errors.New("invalid value")
	// ErrUnsupported means a redis.conf construct replproxy deliberately does not
	// implement (include), or a bad command-line shape.
	ErrUnsupported = errors.New("not supported")
)

// Error is the error type of this package: where a configuration problem is,
// and what it is. It is modelled on net.OpError.
type Error struct {
	// File is the configuration file, or "" when the problem came from the
	// command line, from [Config.Set] or from [Config.Validate].
	File string
	// Line is the 1-based line in File, or 0 when not from a file.
	Line int
	// Directive is the lower-cased directive name as written (an alias stays an
	// alias), or "" when the line could not be split into words.
	Directive string
	// Err is what went wrong; it wraps one of the ErrX sentinels or an I/O error.
	Err error
}

// Error formats e as "config: FILE:LINE: DIRECTIVE: ERR", leaving out the
// parts that are empty. It never prints the whole line, so secrets such as
// masterauth values do not reach logs.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	case e.File != "":
		b.WriteString(e.File)
		b.WriteString(": ")
	case e.Line > 0:
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	if e.Directive != "" {
		b.WriteString(printableName(e.Directive))
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("<nil>")
	}
	return b.String()
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// printableName returns name as is when it looks like a directive name, and
// quoted otherwise (a name from a broken file may hold any bytes).
func printableName(name string) string {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			return strconv.Quote(name)
		}
	}
	return name
}

// A ValueError is a value a directive does not take: it wraps
// [ErrInvalidValue], and its Reason is redis-server's words for the
// refusal ("argument couldn't be parsed into an integer"), which CONFIG
// SET replies with as Redis does.
type ValueError struct {
	Value  string // the value refused
	Reason string
}

func (e *ValueError) Error() string {
	return ErrInvalidValue.Error() + " " + strconv.Quote(e.Value) + ": " + e.Reason
}

// Unwrap returns [ErrInvalidValue].
func (e *ValueError) Unwrap() error { return ErrInvalidValue }

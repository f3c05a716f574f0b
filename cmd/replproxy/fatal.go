package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/wire"
)

// A start that fails is reported on standard error, where a supervisor
// (systemd's journal, a container runtime) collects it, in the format the
// configuration asks for: under log-format json an operator's pipeline must
// be able to parse the one line that says why the proxy is not running.

// fatal reports err, the reason the process stops before serving, on
// stderr: as one JSON log line under log-format json, else as text.
func fatal(stderr io.Writer, format config.LogFormat, msg string, err error) {
	if format == config.LogJSON {
		hclog.New(&hclog.LoggerOptions{Name: "replproxy", Output: stderr, JSONFormat: true}).Error(msg, "error", err)
		return
	}
	fmt.Fprintf(stderr, "replproxy: %v\n", err)
}

// fatalConfig reports a configuration that did not parse, in the log format
// it asks for (logFormatOf), as redis-server's "FATAL CONFIG ERROR" in text.
func fatalConfig(stderr io.Writer, args []string, err error) {
	if logFormatOf(args) == config.LogJSON {
		fatal(stderr, config.LogJSON, "fatal config error", err)
		return
	}
	fmt.Fprintf(stderr, "\n*** FATAL CONFIG ERROR ***\n%v\n", err)
}

// logFormatOf is the log-format a command line asks for even when it does
// not parse: the last log-format in the config file (the first argument,
// when it does not start with '-') or, after it, on the command line. It
// reads that one directive leniently (any case, quotes dropped), so that an
// error elsewhere still gets the format the operator chose; text if none.
func logFormatOf(args []string) config.LogFormat {
	format := config.LogText
	pick := func(v string) {
		if wire.EqualFold(strings.Trim(v, `"'`), string(config.LogJSON)) {
			format = config.LogJSON
		} else {
			format = config.LogText
		}
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if data, err := os.ReadFile(args[0]); err == nil {
			for line := range strings.Lines(string(data)) {
				if f := strings.Fields(line); len(f) == 2 && wire.EqualFold(f[0], "log-format") {
					pick(f[1])
				}
			}
		}
		args = args[1:]
	}
	for i, a := range args {
		if f := strings.Fields(a); len(f) == 2 && wire.EqualFold(f[0], "--log-format") {
			pick(f[1]) // "--log-format json" as one argument, as Parse splits it
		} else if wire.EqualFold(a, "--log-format") && i+1 < len(args) {
			pick(args[i+1])
		}
	}
	return format
}

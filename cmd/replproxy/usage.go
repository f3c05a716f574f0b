package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/replproxy/replproxy/proxy"
	"github.com/replproxy/replproxy/proxy/config"
)

// usageText is the top of --help, in the shape of redis-server's usage.
const usageText = `Usage: replproxy [/path/to/replproxy.conf] [--directive value ...] [-]
       replproxy - (read the configuration from stdin)
       replproxy -v or --version
       replproxy -h or --help

A config file has redis.conf's syntax; each --directive value on the command
line is one of its lines, applied after the file and stdin. CONFIG GET and
CONFIG SET take the same names.

Examples:
       replproxy --port 6380 --replicaof 10.0.0.5 6379
       replproxy /etc/replproxy.conf --loglevel verbose
       echo 'replicaof 10.0.0.5 6379' | replproxy - --port 6380

Directives and their defaults:
`

// usage answers -h/--help and -v/--version, alone on the command line, on
// out (stdout, so that $(replproxy --version) works), and reports whether
// it did and the exit code.
func usage(args []string, out io.Writer) (code int, done bool) {
	if len(args) != 1 {
		return 0, false
	}
	switch args[0] {
	case "-h", "--help":
		io.WriteString(out, usageText)
		if err := config.WriteDirectives(out); err != nil {
			return 1, true
		}
		return 0, true
	case "-v", "--version":
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintln(out, versionLine(info))
		return 0, true
	}
	return 0, false
}

// versionLine is replproxy's version in redis-server -v's form:
// `replproxy v=0.1.0 sha=<8 hex digits>:<1 if modified> go=<version>
// bits=64`. The sha is the commit the binary was built from, as go build
// records it in a git checkout; without one it is 00000000:0, as Redis
// prints when built outside git.
func versionLine(info *debug.BuildInfo) string {
	sha, dirty := "00000000", "0"
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if len(s.Value) >= 8 {
					sha = s.Value[:8]
				}
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "1"
				}
			}
		}
	}
	return "replproxy v=" + proxy.Version + " sha=" + sha + ":" + dirty +
		" go=" + runtime.Version() + " bits=" + strconv.Itoa(strconv.IntSize)
}

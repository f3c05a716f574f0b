package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/replproxy/replproxy/proxy/config"
)

// runMain runs the real main (the test binary acting as replproxy) with
// args and stdin, and returns its stdout, stderr and exit code.
func runMain(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "REPLPROXY_RUN_MAIN=1")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestVersion: --version and -v print one line to stdout, in redis-server
// -v's form, so that $(replproxy --version) captures it; nothing on stderr.
func TestVersion(t *testing.T) {
	want := regexp.MustCompile(`^replproxy v=\S+ sha=[0-9a-f]{8}:[01] go=go\S+ bits=(32|64)\n$`)
	for _, arg := range []string{"--version", "-v"} {
		out, errOut, code := runMain(t, "", arg)
		if code != 0 || !want.MatchString(out) || errOut != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 0 and one line matching %s on stdout", arg, code, out, errOut, want)
		}
	}
}

// TestVersionLine: the sha is the commit go build recorded, cut to 8
// digits, with :1 when the tree was modified.
func TestVersionLine(t *testing.T) {
	info := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "2622aa7e0123456789abcdef0123456789abcdef"},
		{Key: "vcs.modified", Value: "true"},
	}}
	if got := versionLine(info); !strings.Contains(got, " sha=2622aa7e:1 ") {
		t.Errorf("versionLine = %q, want sha=2622aa7e:1", got)
	}
	if got := versionLine(nil); !strings.Contains(got, " sha=00000000:0 ") {
		t.Errorf("versionLine(nil) = %q, want sha=00000000:0", got)
	}
}

// TestHelp: --help prints the usage, an example and every directive of
// the table with its default, on stdout.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		out, _, code := runMain(t, "", arg)
		if code != 0 || !strings.HasPrefix(out, "Usage: replproxy ") || !strings.Contains(out, "Examples:\n") {
			t.Fatalf("%s: exit %d, output %q", arg, code, out)
		}
		for _, name := range config.Names() {
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` \S`).MatchString(out) {
				t.Errorf("%s does not list directive %s with its default", arg, name)
			}
		}
		for _, line := range []string{"  port 6379\n", "  repl-backlog-size 1mb\n", "  replicaof (none)\n"} {
			if !strings.Contains(out, line) {
				t.Errorf("%s lacks %q", arg, line)
			}
		}
	}
}

// TestConfigFromStdin: "-" reads the configuration from stdin, as
// redis-server does: a bad line there fails the start naming stdin and the
// line.
func TestConfigFromStdin(t *testing.T) {
	_, errOut, code := runMain(t, "port 0\nrepl-timeout soon\n", "-")
	if code == 0 || !strings.Contains(errOut, "stdin:2") || !strings.Contains(errOut, "repl-timeout") {
		t.Errorf("a bad line on stdin: exit %d, stderr %q; want a failure naming stdin:2 and repl-timeout", code, errOut)
	}
}

package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// SkipEnv is the environment variable that, set to "skip", makes [Require] skip every
// test that needs Redis, as go test -short does, whether or not Redis is installed and
// whatever CI says. Nothing else sets it, so under CI=true without -short a missing
// Redis still fails the test.
const SkipEnv = "REDISTEST"

// Require checks that redis-server and redis-cli are on PATH and returns their paths.
// When one is missing it skips the test, or fails it when the environment variable CI
// is true (as GitHub Actions, GitLab CI and most others set it): CI must never skip.
// Under go test -short, or with [SkipEnv]=skip, it skips the test without looking:
// `go test -short ./...` runs the tests that need no Redis, even under CI=true.
func Require(t testing.TB) (server, cli string) {
	t.Helper()
	paths := requireBinaries(t, "redis-server", "redis-cli")
	return paths[0], paths[1]
}

// RequireTool is [Require] for another program (redis-check-rdb, redis-benchmark):
// it returns its path, or skips the test, or fails it under CI=true.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	return requireBinaries(t, name)[0]
}

// requireBinaries is [Require] for any list of programs. With none it only
// skips under -short or SkipEnv=skip, for a test that runs a program it was
// given by path ([StartServerBinary]).
func requireBinaries(t testing.TB, names ...string) []string {
	t.Helper()
	d := findBinaries(testing.Short(), os.Getenv, exec.LookPath, names...)
	switch {
	case d.skipAll != "":
		t.Skipf("redistest: skipping: %s (the tests that need no Redis only)", d.skipAll)
	case d.missing == nil:
		return d.paths
	case d.mustFail:
		t.Fatalf("redistest: %s not found in PATH and CI=%q: integration tests must not be skipped in CI (install redis-server and redis-tools, or run `make redis`)",
			strings.Join(d.missing, ", "), os.Getenv("CI"))
	default:
		t.Skipf("redistest: skipping: %s not found in PATH (install redis-server and redis-tools, or run `make redis`; with CI=true this is a failure)",
			strings.Join(d.missing, ", "))
	}
	return nil // unreachable: Fatalf and Skipf stop the test
}

// binaryDecision is the outcome of [findBinaries].
type binaryDecision struct {
	paths    []string // one per name, "" for a missing one
	missing  []string // names not found; nil when all were found
	mustFail bool     // a missing binary fails the test instead of skipping it
	skipAll  string   // why every such test skips (-short, SkipEnv): nothing was looked up
}

// findBinaries looks each name up with lookPath and decides, from getenv("CI"), whether
// a missing one fails or skips the test; short (go test -short) or getenv(SkipEnv) ==
// "skip" skips it before any look-up. It takes the flag and both functions so that the
// decision can be tested without uninstalling Redis.
func findBinaries(short bool, getenv func(string) string, lookPath func(string) (string, error), names ...string) binaryDecision {
	d := binaryDecision{paths: make([]string, len(names))}
	switch {
	case short:
		d.skipAll = "-short"
		return d
	case strings.TrimSpace(getenv(SkipEnv)) == "skip":
		d.skipAll = SkipEnv + "=skip"
		return d
	}
	for i, name := range names {
		p, err := lookPath(name)
		if err != nil {
			d.missing = append(d.missing, name)
			continue
		}
		d.paths[i] = p
	}
	d.mustFail = d.missing != nil && isCI(getenv)
	return d
}

// isCI reports whether CI is set to a true value ("true", "1", "TRUE", ...).
func isCI(getenv func(string) string) bool {
	ci, err := strconv.ParseBool(strings.TrimSpace(getenv("CI")))
	return err == nil && ci
}

// String describes d for test failure messages.
func (d binaryDecision) String() string {
	return fmt.Sprintf("paths=%q missing=%q mustFail=%v skipAll=%q", d.paths, d.missing, d.mustFail, d.skipAll)
}

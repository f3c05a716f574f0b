package netns

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Require skips the test when pairs cannot be built here, saying why ([Supported]),
// or fails it when the environment variable CI is true: CI must never skip the tests
// that need namespaces.
func Require(t testing.TB) {
	t.Helper()
	err := Supported()
	if err == nil {
		return
	}
	if isCI() {
		t.Fatalf("%v (CI=%q: tests that need network namespaces must not be skipped in CI; run them as root with iproute2)", err, os.Getenv("CI"))
	}
	t.Skipf("skipping: %v (with CI=true this is a failure)", err)
}

// NewPair is [New] for a test: it calls [Require] first, fails the test if the pair
// cannot be built, and closes the pair (killing what runs inside) at t.Cleanup.
func NewPair(t testing.TB, opts Options) *Pair {
	t.Helper()
	Require(t)
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("netns: pair %s (%s) - %s (%s), %+v", p.A.Name, p.AddrA, p.B.Name, p.AddrB, opts)
	return p
}

// isCI reports whether CI is set to a true value ("true", "1", ...).
func isCI() bool {
	ci, err := strconv.ParseBool(strings.TrimSpace(os.Getenv("CI")))
	return err == nil && ci
}

package layering

import (
	"slices"
	"strings"
)

// sharedTestNames name test files for what they hold rather than for a
// source file: helpers the package's tests share, benchmarks, fuzz
// targets, and the race/norace switches.
var sharedTestNames = []string{"helpers", "bench", "fuzz", "race", "norace"}

// integrationSuffix ends the name of a test file that holds integration
// tests: tests of the package's behaviour as assembled with others (real
// Redis, the running server), which it says in its name.
const integrationSuffix = "_integration"

// testFileNamed reports whether a test file (its name without _test.go)
// follows the rule of library packages, given the base names of its
// package's source files (without .go, for every platform): it is named for
// the file it tests, as a source file's base name or that name followed by
// "_" and more (writer_sendfile for writer); or for what it holds, as
// sharedTestNames say, in the same two forms (helpers_fakeprimary); or its
// name ends in integrationSuffix.
func testFileNamed(name string, sources []string) bool {
	if strings.HasSuffix(name, integrationSuffix) {
		return true
	}
	for _, base := range slices.Concat(sources, sharedTestNames) {
		if name == base || strings.HasPrefix(name, base+"_") {
			return true
		}
	}
	return false
}

// Package layering keeps rules of replproxy's code true through its tests:
// the layering of its packages, below, the names of the test files of its
// library packages (names.go), the one rule names from the network are
// matched by (casefold.go), and the documentation's agreement with the code
// (docs.go).
//
// layering_test.go keeps the package layering true, as the Go standard
// library's go/build deps_test.go keeps its own. It reads the imports of
// every package in the module (with go/build, the files this platform
// builds) and fails on an import the table in layering_test.go does not
// allow, and on a package the table does not name, so that a new package
// or a new edge is a decision written down, not an accident.
//
// names_test.go fails on a test file of a library package (any but cmd/
// and bench/) that is named for none of its package's source files, nor
// for what it holds (helpers, bench, fuzz, race, norace), and is no
// integration test that says so in its name (testFileNamed).
//
// casefold_test.go fails on a use of the standard library's Unicode case
// mapping (strings.ToLower, strings.EqualFold, ...: unicodeFolds) in the
// code of proxy/ and cmd/, which read commands, options and directives
// from clients, replicas and the primary: Redis folds those names in the C
// locale, ASCII letters only, and so does proxy/wire (Lower, Upper,
// EqualFold), which they must use. A use that reads no such name is listed
// in allowedFolds, with its reason.
//
// hall_test.go measures proxy/, the assembly, with the type checker: the
// fields of its Server, the pairs of its files that use each other both
// ways and the uses between files that lie on one cycle (hall.go); it fails when
// one rises above its ceiling, and prints them with -v.
//
// docs_test.go fails when docs/architecture.md's package map and the code
// disagree (a package missing or extra, other imports than the table
// allows), when a fuzz target is missing from docs/testing.md's list or the
// Makefile's fuzz target, on a relative link of a Markdown file that
// resolves to no file or heading, and on a file of the repository that
// cites an issue by its number (docs.go lists its rules).
//
// The layering's rules are the table in layering_test.go (allowed), with
// the reason for each edge it leaves out beside the row; the package map of
// docs/architecture.md gives the same rules with each package's job, lowest
// layer first.
//
// internal/redistest and internal/chaos/deploy are the test harnesses
// (testHarnesses): code that runs only under go test and fails the test
// that calls it, which nothing but tests and the other harness imports, so
// that the product never links either.
package layering

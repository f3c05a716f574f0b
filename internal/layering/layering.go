// Package layering keeps three rules of replproxy's code true through its
// tests: the layering of its packages, below, the names of the test files
// of its library packages (names.go), and the one rule names from the
// network are matched by (casefold.go).
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
// The layering's rules, lowest layer first:
//
//   - replid and replbuf import nothing of the module; eviction only
//     replbuf; streamlog only replid and internal/safefile.
//   - proxy/clientlist (CLIENT LIST's lines, CLIENT KILL's filters)
//     only proxy/wire.
//   - proxy/acl (Redis 7.0's ACL users: rules, permission checks, the
//     aclfile, ACL LOG) only proxy/wire.
//   - proxy/listen (the listeners a bind list names) imports nothing of
//     the module.
//   - proxy/tlsconf (the TLS material a configuration names) only
//     proxy/config.
//   - proxy/sysmem (the process's memory as the OS reports it) imports
//     nothing of the module.
//   - proxy/commanddocs (what COMMAND says of the served commands) only
//     proxy/wire.
//   - proxy/wire imports nothing of the module; proxy/config only eviction
//     and proxy/wire; proxy/upstream only replbuf, proxy/wire and replid.
//   - proxy/snapfile (the snapshot files in dir) only replbuf, replid and
//     internal/safefile; proxy/history (the replication history) only
//     replbuf, eviction, streamlog, proxy/snapfile and replid: none of
//     proxy, the replicas, upstream, metrics, config or wire.
//   - proxy/snapshots (the snapshot work: fetches, payloads, spills,
//     persists) only proxy/history, proxy/snapfile and replbuf: it reaches
//     the upstream link and the server through interfaces it declares.
//   - proxy/downstream (a replica, from PSYNC on) only proxy/history,
//     proxy/wire, replbuf, replid and streamlog: none of proxy, upstream,
//     metrics or config. It reads the snapshot file its plan names through
//     history's types, without importing proxy/snapfile.
//   - proxy/report (the server's figures at one moment, rendered as INFO
//     and as metrics.Figures) only the packages of the figures' types
//     (eviction, replbuf, streamlog, proxy/config, proxy/upstream,
//     proxy/downstream, proxy/history, proxy/snapshots), proxy/metrics and
//     proxy/sysmem: proxy builds a report, and the report never reads
//     proxy.
//   - proxy, the assembly, imports the packages above; cmd/replproxy only
//     proxy, proxy/config and proxy/wire.
//   - internal/redistest (the tests' real Redis servers, and the fake
//     primary, relay and TCP pair they share) imports nothing of the
//     module. It and internal/chaos/deploy are the test harnesses: code
//     that runs only under go test and fails the test that calls it, which
//     nothing but tests and the other harness imports.
//   - internal/chaos (the chaos harness's fault table, seeded nemesis,
//     history, checkers and report: no process, no network) imports
//     nothing of the module; internal/chaos/deploy (the live deployment it
//     drives, the load, the faults applied and the observers) imports
//     internal/chaos, internal/netns, internal/redistest and
//     internal/cachedata.
//   - internal/safefile (the file mechanisms: open a regular file as seen,
//     write a new file under a temporary name and rename it into place)
//     imports nothing of the module.
//   - nothing outside cmd/ imports cmd/, and nothing outside bench/ imports
//     bench/, tests included; bench/ (a module of its own) imports of the
//     product only internal/netns and internal/cachedata.
package layering

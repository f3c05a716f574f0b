// Package layering holds no code: its test keeps replproxy's package
// layering true, as the Go standard library's go/build deps_test.go keeps
// its own. The test reads the imports of every package in the module (with
// go/build, the files this platform builds) and fails on an import the
// table in layering_test.go does not allow, and on a package the table
// does not name, so that a new package or a new edge is a decision written
// down, not an accident.
//
// The rules, lowest layer first:
//
//   - replid and replbuf import nothing of the module; eviction only
//     replbuf; streamlog only replid and internal/safefile.
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
//   - proxy/pubsub (the channels, their subscribers and each one's
//     outbox) only proxy/config and proxy/wire: it returns its verdict on
//     a subscriber's output, which proxy turns into downstream's close
//     reason.
//   - proxy, the assembly, imports the packages above; cmd/replproxy only
//     proxy and proxy/config.
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

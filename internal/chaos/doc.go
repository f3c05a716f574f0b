// Package chaos is the pure part of the chaos harness: what a run is made
// of and judged by, with no process, network or file of its own. Its live
// part, internal/chaos/deploy, starts a whole deployment on one machine
// (two regions of internal/netns, a primary, Sentinels, proxies of the real
// binary built with -race, real replicas), runs a steady write load and
// applies the faults this package chooses, and feeds what the nodes report
// to this package's checkers.
//
// This package owns:
//
//   - the fault kinds and what each may cost in full syncs (faults.go:
//     [Kind], [Expected], [Fault.Total], [Compatible]);
//   - the seeded choice of the next fault ([Nemesis]): the same seed and
//     targets give the same faults, whatever the deployment does;
//   - the history of faults, heals, moves and violations ([History]);
//   - the checkers over observations (checkers.go), each a function of
//     what was observed, so that its unit test can feed it a wrong answer
//     and see it caught;
//   - the Markdown report of a run ([WriteReport]).
//
// It starts no goroutine. History, OffsetTracker and MemoryTracker are safe
// for concurrent use (the deployment's sampler and its nemesis share them);
// a Nemesis belongs to the goroutine that calls Next.
package chaos

// Package chaos is the harness of issue 36: a whole deployment on one machine
// (two regions of internal/netns, a primary, Sentinels, proxies of the real
// binary built with -race, real replicas), a steady write load, a nemesis
// driven by a seed, checkers over what the nodes report, and a Markdown
// report of what each fault cost.
//
// The package's own code holds no process or network: the fault kinds and
// their expected costs (faults.go), the seeded choice of the next fault
// (Nemesis), the history of faults, heals and moves (History), the checkers
// over observations (checkers.go) and the report (report.go). Each checker
// is a function of what was observed, so that its unit test can feed it a
// wrong answer and see it caught. The deployment, the load and the loop that
// applies each fault are in the integration test (chaos_integration_test.go),
// since they start real servers through internal/redistest, which only tests
// may import. `make chaos` runs it for DURATION with SEED; `make test` runs
// it for 90 s with a fixed seed.
//
// A fault is applied, held and healed, alone or with a second one inside it
// (applied while it holds, healed before it); then writes pause until every
// replica has the primary's data (checker 1), its cost is checked, the
// proxies' goroutines and descriptors are checked against their baseline,
// and the next fault starts. Concurrency: History, OffsetTracker and
// MemoryTracker are safe for concurrent use (the sampler and the nemesis
// share them); the rest is owned by the nemesis's goroutine.
package chaos

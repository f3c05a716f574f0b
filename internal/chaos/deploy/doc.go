// Package deploy is the live part of the chaos harness: the deployment it
// starts on one machine, the write load, the faults applied and the
// observers that feed internal/chaos's checkers. internal/chaos, which
// imports nothing of the module, holds the pure part: the fault table, the
// seeded nemesis, the history, the checkers and the report.
//
// Its code runs only under go test. Like internal/redistest, on which it
// is built, it takes a testing.TB and fails that test rather than
// returning errors, and nothing but tests imports it (internal/layering
// keeps both true). TestChaos assembles it: [Flags] reads the run's
// [Options], [New] starts the deployment, [Deployment.Run] drives it and
// returns the run, which the test renders with chaos.WriteReport and whose
// violations fail it. `make chaos` runs TestChaos for DURATION with SEED;
// `make test` runs it for 90 s with the default seed.
//
// What each file owns:
//
//   - deployment.go: the deployment ([New]): two regions of
//     internal/netns joined by a 100 Mbit/s WAN; in region A the primary
//     (redis-1) with its replica (redis-2), three Sentinels, proxy A (its
//     dir on a small tmpfs, dialing the primary from an address of its
//     own) and a standby proxy, and three replicas of proxy A (a1..a3); in
//     region B proxy B, replicating proxy A over TLS and zstd, and three
//     replicas of it (b1..b3). Its nodes are known by name and address;
//     the Sentinels are asked which is the primary.
//   - proxy.go: each proxy, cmd/replproxy built with -race, with its own
//     ports, certificate, dir, log and stderr; its command line; its
//     goroutines and descriptors read from /metrics.
//   - load.go: the load: cachedata's commands to whichever server the
//     Sentinels name the primary, a WAIT every tenth chunk, a FLUSHALL
//     every five minutes of it.
//   - nemesis.go: each fault kind applied, held and healed, with the moves
//     an orchestrator would make meanwhile, and what it cost.
//   - observe.go: offsets, replids and memory sampled each second,
//     convergence to the primary's DEBUG DIGEST after each heal, full syncs
//     counted, the proxies' baseline of goroutines and descriptors.
//   - run.go: the run ([Deployment.Run]) and its schedule of faults, drawn
//     from the seed alone.
//   - options.go: the run's settings and their flags.
//
// A fault is applied, held and healed, alone or with a second one inside it
// (applied while it holds, healed before it); then writes pause until every
// replica has the primary's data, its cost is checked, the proxies'
// goroutines and descriptors are checked against their baseline, and the
// next fault starts.
//
// Goroutines and ownership: the goroutine that calls [Deployment.Run] is
// the nemesis, and must be the test's: it alone starts, stops, restarts
// and moves servers and proxies, and fails the test. Run starts two more,
// the load and the sampler, and stops both before it returns by cancelling
// their context and waiting for them; the load starts one per connection
// to drain the primary's replies and waits for it when it leaves that
// connection, and the convergence check takes the replicas' DEBUG DIGESTs
// on goroutines of its own, as many at once as there are cores, and waits
// for them. The load and the sampler read the deployment's nodes and
// maps, which New sets up and nothing writes afterwards, and write only to
// the history and the offset and memory trackers, which are safe for
// concurrent use; the nemesis pauses the load through an atomic flag.
// Every process, namespace and mount the deployment makes is undone by the
// cleanups of the test that called New.
package deploy

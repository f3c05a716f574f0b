// Package deploy is the live part of the chaos harness: the deployment it
// starts on one machine, the write load, the faults applied to it and the
// observers that feed internal/chaos's checkers. Its code runs only under
// go test: like internal/redistest, on which it is built, it takes a
// testing.TB and fails that test rather than returning errors, and nothing
// but tests imports it. `make chaos` runs its TestChaos for DURATION with
// SEED; `make test` runs it for 90 s with a fixed seed.
//
// What it owns:
//
//   - the deployment ([New], deployment.go): two regions of internal/netns
//     joined by a 100 Mbit/s WAN; in region A the primary (redis-1) with
//     its replica (redis-2), three Sentinels, proxy A on a small tmpfs of
//     its own and a standby proxy, and three replicas of proxy A (a1..a3);
//     in region B proxy B, replicating proxy A over TLS and zstd, and three
//     replicas of it (b1..b3). The proxies are cmd/replproxy built with
//     -race (proxy.go), each with its own ports, certificate, dir and log.
//   - the load (load.go): cachedata's commands to whichever server the
//     Sentinels name the primary, with a WAIT every tenth chunk and a
//     FLUSHALL every five minutes of it.
//   - the nemesis's side (nemesis.go): each fault kind applied, held and
//     healed, with the moves an orchestrator would make meanwhile.
//   - the observers (observe.go): offsets, replids and memory sampled each
//     second, convergence to the primary's DEBUG DIGEST after each heal,
//     full syncs counted, the proxies' goroutines and descriptors.
//   - the run ([Deployment.Run], run.go) and its settings ([Options],
//     options.go).
//
// A fault is applied, held and healed, alone or with a second one inside it
// (applied while it holds, healed before it); then writes pause until every
// replica has the primary's data, its cost is checked, the proxies'
// goroutines and descriptors are checked against their baseline, and the
// next fault starts.
//
// Goroutines: [Deployment.Run] is called on the test's goroutine, which is
// the nemesis: it alone starts, stops, restarts and moves servers and
// proxies and fails the test. Run starts two goroutines, the load (which
// also starts one per connection to drain the primary's replies, and waits
// for it) and the sampler; both stop when the context Run derives from its
// own ends, which Run cancels, and Run waits for both before it returns.
// They read the deployment's nodes and maps, which New set up and nothing
// writes afterwards, and write only to the history and the trackers, which
// are safe for concurrent use; the nemesis pauses the load through an
// atomic flag. Every process, namespace and mount the deployment makes is
// undone by the cleanups of the test that called New.
package deploy

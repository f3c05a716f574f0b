// Package redistest runs real redis-server processes for integration tests and talks
// to them (and to the proxy, which speaks RESP too). It also holds what the tests of
// every package share to stand in for a primary or a network, with no Redis: a fake
// primary whose links a test scripts ([StartFakePrimary], [NewFakeLink]), a relay that
// alters or cuts what it forwards ([StartRelay]), and a loopback TCP pair ([TCPPair]).
//
// Rules the package enforces:
//
//   - Servers listen on 127.0.0.1 only, on a port picked free by [FreePort]; the one
//     exception is a server in a network namespace ([StartServerIn], the regions of a
//     WAN test built by internal/netns), which listens on that namespace's address and
//     is dialed from inside it ([DialIn]).
//   - Every process a test starts is stopped by that test through t.Cleanup, also when
//     the test fails or calls t.FailNow. A paused server is resumed before it is stopped.
//     On Linux each server also gets SIGKILL if the test binary dies without running its
//     cleanups (a -timeout panic, a signal), so no server outlives the test binary.
//   - Servers run with --enable-debug-command yes, so [Client.Digest] works.
//   - A cluster ([StartCluster]) is real servers with cluster-enabled yes, each
//     in its own directory, on ports that leave room for the cluster bus
//     [ClusterBusOffset] above them, made one cluster by redis-cli --cluster
//     create; its methods wait until the nodes agree ([Cluster.WaitReady]).
//   - When redis-server or redis-cli is missing, [Require] skips the test, except under
//     CI (env CI=true), where it fails it: CI must never silently skip integration tests.
//     go test -short skips them all on purpose, even under CI=true (`make unit` runs
//     it), as REDISTEST=skip ([SkipEnv]) does.
//   - A process of the test's own that is not redis-server (the proxy's real binary)
//     gets the same guarantees through [StartProcess].
//   - A client from the npm registry (node-redis, [NodeRedis]) is installed once into the
//     user's cache by [NodeModules] and run by [RunNode]; a missing node or npm, or a
//     failed install, skips the test as a missing Redis does, and fails it under CI.
//   - Harness log lines go to t.Log. There is no package-level mutable state.
//
// Every function takes a testing.TB and calls t.Helper(). [Server] and [Client] are not
// safe for concurrent use; call their methods from the goroutine running the test that
// created them, because failures call t.Fatal.
//
// Example:
//
//	primary := redistest.StartServer(t, "--repl-diskless-sync-delay", "0")
//	replica := redistest.StartServer(t)
//	pc := redistest.Dial(t, primary.Addr())
//	rc := redistest.Dial(t, replica.Addr())
//	rc.MustDo(t, "REPLICAOF", "127.0.0.1", primary.Port())
//	pc.MustDo(t, "SET", "k", "v")
//	redistest.WaitSynced(t, pc, rc)
//
// NB: Redis 7.0 defaults to diskless full sync with repl-diskless-sync-delay 5, so a
// first full sync takes five seconds unless a test passes "--repl-diskless-sync-delay",
// "0" or "--repl-diskless-sync", "no" to the primary.
package redistest

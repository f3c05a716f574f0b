package proxy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// Integration tests of the downstream side (DESIGN §5): real redis-server
// replicas of an in-process proxy, itself a replica of a real primary. Data
// equality always means: link up, master_repl_offset equal to the primary's,
// and DEBUG DIGEST equal to the primary's (redistest.WaitSynced).

// dsSyncTimeout is how long a test waits for replicas to catch up; generous
// because -race slows the proxy down several times on two cores.
const dsSyncTimeout = 40 * time.Second

// dsMixedTests are the redis-benchmark tests of the mixed load.
const dsMixedTests = "set,incr,lpush,hset,sadd,zadd"

// dsSetup is the common topology: a primary, a proxy replicating it (with
// extra proxy args), and n replicas of the proxy, all synced.
func dsSetup(t testing.TB, n int, proxyArgs ...string) (primary *redistest.Server, pc *redistest.Client,
	p *testProxy, xc *redistest.Client, servers []*redistest.Server, rcs []*redistest.Client,
) {
	t.Helper()
	primary, pc = startPrimary(t)
	p, xc = startProxyOf(t, primary, proxyArgs...)
	servers, rcs = redistest.StartReplicas(t, n, p.AddrString())
	writeMixed(t, pc, 200)
	dsWaitSynced(t, pc, rcs...)
	return primary, pc, p, xc, servers, rcs
}

// dsWaitSynced waits until every replica's link is up and its offset and
// digest equal the primary's.
func dsWaitSynced(t testing.TB, pc *redistest.Client, rcs ...*redistest.Client) {
	t.Helper()
	redistest.WaitSyncedWithin(t, dsSyncTimeout, pc, rcs...)
}

// dsMasterLink returns the local address (laddr) of a replica's connection
// to its primary (CLIENT LIST TYPE master), or "" when it has none. Unlike
// the client id, which a partial resync keeps (Redis resurrects its cached
// master client), it changes with every new connection.
func dsMasterLink(t testing.TB, rc *redistest.Client) string {
	t.Helper()
	v := rc.MustDo(t, "CLIENT", "LIST", "TYPE", "master")
	for line := range strings.Lines(v.String()) {
		for f := range strings.FieldsSeq(line) {
			if laddr, ok := strings.CutPrefix(f, "laddr="); ok {
				return laddr
			}
		}
	}
	return ""
}

// dsWaitOffsets waits until each replica's master_repl_offset equals the
// primary's (no digest: cheap enough to call after every write).
func dsWaitOffsets(t testing.TB, pc *redistest.Client, rcs ...*redistest.Client) {
	t.Helper()
	want := pc.InfoInt(t, "replication", "master_repl_offset")
	for _, rc := range rcs {
		redistest.WaitFor(t, dsSyncTimeout, "replica offset "+itoa(want), func() bool {
			return rc.InfoInt(t, "replication", "master_repl_offset") == want
		})
	}
}

// dsSampleConnectedSlaves polls addr's INFO replication connected_slaves
// every 20 ms from its own goroutine and connection until stop is called,
// which returns every value seen (or the first error). The test's cleanup
// also stops it, so that a failing test never leaves it running.
func dsSampleConnectedSlaves(t testing.TB, addr string) (stop func() ([]string, error)) {
	t.Helper()
	c := redistest.Dial(t, addr) // used only by the sampler goroutine from here on
	done := make(chan struct{})
	var samples []string
	var err error
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			v, e := c.Do("INFO", "replication")
			if e != nil {
				err = e
				return
			}
			samples = append(samples, redistest.ParseInfo(v.String())["connected_slaves"])
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	halt := func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(halt) // runs before Dial's cleanup closes c
	return func() ([]string, error) {
		halt()
		return samples, err
	}
}

// dsSetBig writes n values of size bytes to the primary, pipelined, cycling
// over keys distinct keys (so the dataset stays bounded).
func dsSetBig(t testing.TB, pc *redistest.Client, prefix string, n, keys, size int) {
	t.Helper()
	val := strings.Repeat("b", size)
	for i := range n {
		if err := pc.Send("SET", fmt.Sprintf("%s:%d", prefix, i%keys), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := pc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := pc.Receive(); err != nil {
			t.Fatal(err)
		}
	}
}

// dsBuffer is an io.Writer safe to read while exec copies a process's output
// into it.
type dsBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *dsBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *dsBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestDownstreamMixedLoad: three replicas of the proxy under a mixed
// redis-benchmark load (six write commands, values of 3 bytes to 100 KiB,
// four databases, random keyspaces), a Lua script with several writes (sent
// as MULTI/EXEC) and a 1 MiB value. When writes stop every replica's digest
// and offset equal the primary's, and the primary saw exactly one replica
// (the proxy) throughout.
func TestDownstreamMixedLoad(t *testing.T) {
	primary, pc, _, xc, _, rcs := dsSetup(t, 3)
	if n := pc.InfoInt(t, "replication", "connected_slaves"); n != 1 {
		t.Fatalf("primary has %d replicas before the load, want 1 (the proxy)", n)
	}
	if n := xc.InfoInt(t, "replication", "connected_slaves"); n != 3 {
		t.Fatalf("proxy has %d replicas, want 3", n)
	}
	stop := dsSampleConnectedSlaves(t, primary.Addr())
	for _, run := range []struct {
		size, requests string
		extra          []string
	}{
		{"3", "2000", []string{"--dbnum", "0", "-r", "1000", "-P", "8"}},
		{"1000", "500", []string{"--dbnum", "1", "-r", "200"}},
		{"102400", "30", []string{"--dbnum", "2", "-r", "10"}},
		{"64", "1000", []string{"--dbnum", "3"}},
	} {
		args := append([]string{"-t", dsMixedTests, "-d", run.size, "-n", run.requests, "-c", "4"}, run.extra...)
		out := redistest.RunBenchmark(t, primary.Addr(), args...)
		t.Logf("redis-benchmark %q:\n%s", args, strings.TrimSpace(out))
	}
	pc.MustDo(t, "SELECT", 2)
	for i := range 3 {
		pc.MustDo(t, "EVAL", `redis.call('SET', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[2], 7)
redis.call('RPUSH', KEYS[3], ARGV[1], ARGV[1])
redis.call('HSET', KEYS[4], 'f', ARGV[1])
redis.call('DEL', KEYS[1])
return 1`, 4, "ds:lua:s", "ds:lua:n", "ds:lua:l", "ds:lua:h", fmt.Sprintf("v%d", i))
	}
	pc.MustDo(t, "SELECT", 0)
	pc.MustDo(t, "SET", "ds:big", strings.Repeat("m", 1<<20))
	pc.MustDo(t, "MULTI")
	pc.MustDo(t, "INCR", "ds:multi")
	pc.MustDo(t, "SET", "ds:multi:v", strings.Repeat("q", 40000))
	pc.MustDo(t, "EXEC")

	samples, err := stop()
	if err != nil {
		t.Fatalf("sampling the primary's connected_slaves: %v", err)
	}
	if len(samples) < 10 {
		t.Fatalf("only %d samples of connected_slaves: the load was not sampled", len(samples))
	}
	for i, s := range samples {
		if s != "1" {
			t.Fatalf("sample %d of %d: primary connected_slaves:%s, want 1", i, len(samples), s)
		}
	}
	t.Logf("primary connected_slaves:1 in all %d samples", len(samples))

	dsWaitSynced(t, pc, rcs...)
	waitOffsetsEqual(t, pc, xc)
	if got := pc.InfoInt(t, "stats", "sync_full"); got != 1 {
		t.Errorf("primary sync_full %d, want 1 (the proxy's only sync)", got)
	}
	if got := xc.InfoInt(t, "proxy", "snapshot_fetches"); got != 0 {
		t.Errorf("proxy fetched %d snapshots; its own sufficed", got)
	}
}

// TestDownstreamReplicaPartialResync: CLIENT KILL TYPE master on a replica of
// the proxy; the replica comes back by partial resync from the proxy's
// backlog (sync_partial_ok +1, sync_full unchanged) and stays equal.
func TestDownstreamReplicaPartialResync(t *testing.T) {
	_, pc, _, xc, _, rcs := dsSetup(t, 2)
	full := xc.InfoInt(t, "stats", "sync_full")
	partial := xc.InfoInt(t, "stats", "sync_partial_ok")
	oldID := dsMasterLink(t, rcs[0])

	if n := rcs[0].MustDo(t, "CLIENT", "KILL", "TYPE", "master").Integer(); n != 1 {
		t.Fatalf("CLIENT KILL TYPE master killed %d connections, want 1", n)
	}
	writeMixed(t, pc, 300)
	redistest.WaitFor(t, 15*time.Second, "the replica's partial resync", func() bool {
		return xc.InfoInt(t, "stats", "sync_partial_ok") == partial+1
	})
	writeMixed(t, pc, 100)
	dsWaitSynced(t, pc, rcs...)
	if id := dsMasterLink(t, rcs[0]); id == oldID {
		t.Fatalf("replica's link to the proxy was not re-established (local address %s)", id)
	}
	if got := xc.InfoInt(t, "stats", "sync_full"); got != full {
		t.Errorf("proxy sync_full went from %d to %d", full, got)
	}
	if got := xc.InfoInt(t, "stats", "sync_partial_ok"); got != partial+1 {
		t.Errorf("proxy sync_partial_ok went from %d to %d, want +1", partial, got)
	}
	if got := rcs[0].InfoInt(t, "replication", "master_port"); got != int64(xc.InfoInt(t, "server", "tcp_port")) {
		t.Errorf("replica follows port %d, not the proxy", got)
	}
}

// TestDownstreamSurvivesUpstreamKill: CLIENT KILL TYPE replica on the
// primary drops the proxy's link; it resumes by partial resync while its
// replicas stay connected to it (same connections, no resync of any kind)
// and stay equal.
func TestDownstreamSurvivesUpstreamKill(t *testing.T) {
	_, pc, _, xc, _, rcs := dsSetup(t, 3)
	ids := make([]string, len(rcs))
	for i, rc := range rcs {
		ids[i] = dsMasterLink(t, rc)
	}
	proxyFull := xc.InfoInt(t, "stats", "sync_full")
	proxyPartial := xc.InfoInt(t, "stats", "sync_partial_ok")
	primaryFull := pc.InfoInt(t, "stats", "sync_full")
	primaryPartial := pc.InfoInt(t, "stats", "sync_partial_ok")

	if n := pc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica").Integer(); n != 1 {
		t.Fatalf("CLIENT KILL TYPE replica killed %d connections, want 1", n)
	}
	writeMixed(t, pc, 300)
	redistest.WaitFor(t, 15*time.Second, "the proxy's partial resync", func() bool {
		return pc.InfoInt(t, "stats", "sync_partial_ok") == primaryPartial+1
	})
	waitLinkUp(t, xc)
	writeMixed(t, pc, 100)
	dsWaitSynced(t, pc, rcs...)

	for i, rc := range rcs {
		if id := dsMasterLink(t, rc); id != ids[i] {
			t.Errorf("replica %d reconnected to the proxy (link from %s, was %s)", i, id, ids[i])
		}
	}
	if got := xc.InfoInt(t, "stats", "sync_full"); got != proxyFull {
		t.Errorf("proxy sync_full went from %d to %d", proxyFull, got)
	}
	if got := xc.InfoInt(t, "stats", "sync_partial_ok"); got != proxyPartial {
		t.Errorf("proxy sync_partial_ok went from %d to %d", proxyPartial, got)
	}
	if got := pc.InfoInt(t, "stats", "sync_full"); got != primaryFull {
		t.Errorf("primary sync_full went from %d to %d", primaryFull, got)
	}
}

// TestDownstreamFetchSharedByReplicas: with a 16 KiB backlog and megabytes
// written since the proxy's own sync, its snapshot is no longer servable;
// eight replicas attaching at once share one side fetch (the primary's
// sync_full grows by at most one) and all end equal.
func TestDownstreamFetchSharedByReplicas(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 10000, "ds:pop", 64)
	// Without the stream log: with it, the snapshot on disk would be
	// served with the stream from the log, and nothing fetched.
	p, xc := startProxyOf(t, primary, "--repl-backlog-size", "16kb", "--repl-log-size", "0")
	snapOff := xc.InfoInt(t, "proxy", "snapshot_offset")
	dsSetBig(t, pc, "ds:big", 40, 8, 100<<10) // 4 MB after the snapshot
	waitOffsetsEqual(t, pc, xc)
	if first := xc.InfoInt(t, "replication", "repl_backlog_first_byte_offset"); first <= snapOff+1 {
		t.Fatalf("backlog starts at %d and still covers the snapshot's offset %d: the test would not fetch", first, snapOff)
	}

	const n = 8
	servers := make([]*redistest.Server, n)
	rcs := make([]*redistest.Client, n)
	for i := range n {
		servers[i] = redistest.StartServer(t)
		rcs[i] = redistest.Dial(t, servers[i].Addr())
	}
	primaryFull := pc.InfoInt(t, "stats", "sync_full")
	fetches := xc.InfoInt(t, "proxy", "snapshot_fetches")
	proxyFull := xc.InfoInt(t, "stats", "sync_full")
	port := strconv.Itoa(p.Port())
	for _, rc := range rcs { // as close to at once as one goroutine gets
		if err := rc.Send("REPLICAOF", "127.0.0.1", port); err != nil {
			t.Fatal(err)
		}
		if err := rc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for _, rc := range rcs {
		if _, err := rc.Receive(); err != nil {
			t.Fatal(err)
		}
	}
	dsWaitSynced(t, pc, rcs...)

	if got := pc.InfoInt(t, "stats", "sync_full"); got > primaryFull+1 {
		t.Errorf("primary sync_full went from %d to %d: more than the proxy's one fetch", primaryFull, got)
	}
	if got := xc.InfoInt(t, "proxy", "snapshot_fetches"); got != fetches+1 {
		t.Errorf("proxy snapshot_fetches went from %d to %d, want +1", fetches, got)
	}
	if got := xc.InfoInt(t, "stats", "sync_full"); got != proxyFull+n {
		t.Errorf("proxy sync_full went from %d to %d, want +%d", proxyFull, got, n)
	}
	if got := xc.InfoInt(t, "replication", "connected_slaves"); got != n {
		t.Errorf("proxy has %d replicas, want %d", got, n)
	}
	writeMixed(t, pc, 200)
	dsWaitSynced(t, pc, rcs...)
}

// TestDownstreamRepointToPrimary: a replica of the proxy re-pointed straight
// at the primary continues by partial resync, since it holds the primary's
// replid and offsets.
func TestDownstreamRepointToPrimary(t *testing.T) {
	primary, pc, _, _, _, rcs := dsSetup(t, 1)
	rc := rcs[0]
	full := pc.InfoInt(t, "stats", "sync_full")
	partial := pc.InfoInt(t, "stats", "sync_partial_ok")

	rc.MustDo(t, "REPLICAOF", "127.0.0.1", primary.Port())
	redistest.WaitFor(t, 15*time.Second, "partial resync with the primary", func() bool {
		return pc.InfoInt(t, "stats", "sync_partial_ok") == partial+1
	})
	writeMixed(t, pc, 300)
	dsWaitSynced(t, pc, rc)
	if got := pc.InfoInt(t, "stats", "sync_full"); got != full {
		t.Errorf("primary sync_full went from %d to %d: the replica did not continue", full, got)
	}
	if got := rc.InfoInt(t, "replication", "master_port"); got != int64(primary.Port()) {
		t.Errorf("replica follows port %d, want the primary's %d", got, primary.Port())
	}
	if n := pc.InfoInt(t, "replication", "connected_slaves"); n != 2 {
		t.Errorf("primary has %d replicas, want 2 (the proxy and the re-pointed replica)", n)
	}
}

// TestDownstreamRedisCLI: redis-cli --replica shows the live stream, and
// redis-cli --rdb saves the proxy's snapshot as a file redis-check-rdb
// accepts.
func TestDownstreamRedisCLI(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 1000, "ds:pop", 32)
	// The snapshot stays in memory only without the stream log
	// (package snapshots, persist.go).
	p, xc := startProxyOf(t, primary, "--repl-log-size", "0")
	writeMixed(t, pc, 100)
	waitOffsetsEqual(t, pc, xc)
	_, cli := redistest.Require(t)
	port := strconv.Itoa(p.Port())

	t.Run("replica", func(t *testing.T) {
		// redis-cli --replica asks for REPLCONF rdb-filter-only "": an RDB
		// of nothing, which the proxy writes itself, at no fork.
		forks := pc.InfoInt(t, "stats", "total_forks")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var out dsBuffer
		cmd := exec.CommandContext(ctx, cli, "-h", "127.0.0.1", "-p", port, "--replica")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			cancel()
			cmd.Wait() // killed by the cancel: its exit status says nothing
		}()
		redistest.WaitFor(t, 15*time.Second, "redis-cli --replica to finish its sync", func() bool {
			return strings.Contains(out.String(), "SYNC done")
		})
		const key, value = "ds:cli:key", "ds-cli-value-3f9a1c"
		pc.MustDo(t, "SET", key, value)
		redistest.WaitFor(t, 10*time.Second, "the SET in redis-cli --replica's output", func() bool {
			s := out.String()
			return strings.Contains(s, key) && strings.Contains(s, value)
		})
		if !strings.Contains(strings.ToLower(out.String()), `"set","`+key+`","`+value+`"`) {
			t.Errorf("redis-cli --replica output has the key and value but not as a SET command:\n%s", out.String())
		}
		if got := pc.InfoInt(t, "stats", "total_forks"); got != forks {
			t.Errorf("primary total_forks %d→%d for redis-cli --replica through the proxy, want no fork", forks, got)
		}
		if n := xc.InfoInt(t, "proxy", "snapshot_fetches_filtered"); n != 0 {
			t.Errorf("snapshot_fetches_filtered %d, want 0: the empty RDB is the proxy's own", n)
		}
	})

	t.Run("rdb", func(t *testing.T) {
		checker := redistest.RequireTool(t, "redis-check-rdb")
		file := filepath.Join(t.TempDir(), "ds.rdb")
		out := redistest.RedisCLI(t, "-h", "127.0.0.1", "-p", port, "--rdb", file)
		if !strings.Contains(out, "Transfer finished with success") {
			t.Fatalf("redis-cli --rdb:\n%s", out)
		}
		rdb, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if sn := p.Snapshot(); sn == nil || !bytes.Equal(rdb, readSnapshot(t, sn)) {
			t.Errorf("the %d-byte file is not the proxy's snapshot", len(rdb))
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, checker, file)
		cmd.WaitDelay = time.Second
		check, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-check-rdb %s: %v\n%s", file, err, check)
		}
		if !strings.Contains(string(check), "RDB looks OK") {
			t.Errorf("redis-check-rdb output:\n%s", check)
		}
	})
}

// TestDownstreamChain: primary → proxy → proxy → replica. The replica ends
// equal to the primary and keeps its replication ID.
func TestDownstreamChain(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", 2000, "ds:pop", 32)
	p1 := startProxy(t, replicaOf(primary)...)
	x1 := redistest.Dial(t, p1.AddrString())
	waitLinkUp(t, x1)
	p2 := startProxy(t, "--replicaof", "127.0.0.1", strconv.Itoa(p1.Port()))
	x2 := redistest.Dial(t, p2.AddrString())
	waitLinkUp(t, x2)
	_, rcs := redistest.StartReplicas(t, 1, p2.AddrString())
	rc := rcs[0]

	writeMixed(t, pc, 500)
	dsSetBig(t, pc, "ds:big", 4, 4, 300<<10)
	pc.MustDo(t, "EVAL", "redis.call('SET', KEYS[1], 'x'); redis.call('INCR', KEYS[2]); return 1", 2, "ds:s", "ds:n")
	dsWaitSynced(t, pc, rc)
	want := pc.Info(t, "replication")["master_replid"]
	for name, c := range map[string]*redistest.Client{"first proxy": x1, "second proxy": x2, "replica": rc} {
		if got := c.Info(t, "replication")["master_replid"]; got != want {
			t.Errorf("%s master_replid %s, primary %s", name, got, want)
		}
	}
	if got := x1.InfoInt(t, "replication", "connected_slaves"); got != 1 {
		t.Errorf("first proxy has %d replicas, want 1 (the second proxy)", got)
	}
}

// TestDownstreamSlowReplicaDropped: a replica that stops reading (SIGSTOP)
// is disconnected once what it pins passes the 1 MiB hard limit, while the
// others keep streaming, untouched, with equal data; resumed, it reconnects
// and catches up.
func TestDownstreamSlowReplicaDropped(t *testing.T) {
	_, pc, p, xc, servers, rcs := dsSetup(t, 3,
		"--repl-backlog-size", "1mb", "--client-output-buffer-limit", "replica", "1mb", "0", "0")
	dropped := xc.InfoInt(t, "proxy", "replicas_dropped")
	full := xc.InfoInt(t, "stats", "sync_full")
	partial := xc.InfoInt(t, "stats", "sync_partial_ok")
	ids := []string{"", dsMasterLink(t, rcs[1]), dsMasterLink(t, rcs[2])}

	servers[0].Pause()
	// Loopback socket buffers absorb several MB before the proxy's cursor
	// starts pinning. Write 512 KiB at a time and let the healthy replicas
	// catch up after each, so that only the paused one ever pins anything
	// near the 1 MiB limit; stop once it is dropped (at most 64 MB).
	written := 0
	for ; xc.InfoInt(t, "proxy", "replicas_dropped") == dropped; written++ {
		if written == 128 {
			t.Fatalf("paused replica not dropped after %d MB; proxy replicas: %s", written/2, xc.Info(t, "replication")["slave0"])
		}
		dsSetBig(t, pc, "ds:big", 1, 16, 512<<10)
		dsWaitOffsets(t, pc, rcs[1:]...)
	}
	t.Logf("paused replica dropped after %d writes of 512 KiB", written)
	redistest.WaitFor(t, 10*time.Second, "the proxy to list two replicas", func() bool {
		return xc.InfoInt(t, "replication", "connected_slaves") == 2
	})
	if got := xc.InfoInt(t, "proxy", "replicas_dropped"); got != dropped+1 {
		t.Errorf("replicas_dropped went from %d to %d, want +1", dropped, got)
	}
	if !p.Log.Contains("client-output-buffer-limit replica") {
		t.Error("the proxy did not log the output-buffer limit as the reason")
	}
	writeMixed(t, pc, 200)
	dsWaitSynced(t, pc, rcs[1:]...)
	for i := 1; i < 3; i++ {
		if id := dsMasterLink(t, rcs[i]); id != ids[i] {
			t.Errorf("replica %d reconnected (link from %s, was %s)", i, id, ids[i])
		}
	}
	if got := xc.InfoInt(t, "stats", "sync_full"); got != full {
		t.Errorf("proxy sync_full went from %d to %d while the others streamed", full, got)
	}
	if got := xc.InfoInt(t, "stats", "sync_partial_ok"); got != partial {
		t.Errorf("proxy sync_partial_ok went from %d to %d while the others streamed", partial, got)
	}

	servers[0].Resume()
	dsWaitSynced(t, pc, rcs...)
	if got := xc.InfoInt(t, "replication", "connected_slaves"); got != 3 {
		t.Errorf("proxy has %d replicas after the resume, want 3", got)
	}
}

// TestDownstreamPartialWhileUpstreamDown: with the primary gone, a replica
// that reconnects to the proxy still resumes by partial resync from the
// proxy's backlog; a full sync is refused with -NOMASTERLINK meanwhile.
func TestDownstreamPartialWhileUpstreamDown(t *testing.T) {
	primary, pc, _, xc, _, rcs := dsSetup(t, 1)
	digest := pc.Digest(t)
	primary.Stop()
	redistest.WaitFor(t, 10*time.Second, "proxy link down", func() bool {
		return xc.Info(t, "replication")["master_link_status"] == "down"
	})
	partial := xc.InfoInt(t, "stats", "sync_partial_ok")
	rcs[0].MustDo(t, "CLIENT", "KILL", "TYPE", "master")
	redistest.WaitFor(t, 10*time.Second, "partial resync served with the upstream link down", func() bool {
		return xc.InfoInt(t, "stats", "sync_partial_ok") == partial+1 &&
			rcs[0].Info(t, "replication")["master_link_status"] == "up"
	})
	if got := rcs[0].Digest(t); got != digest {
		t.Fatalf("replica digest %s after the partial resync, primary had %s", got, digest)
	}
	// A replica that needs a full sync cannot get one without the primary.
	conn := redistest.Dial(t, xc.Addr())
	if _, err := conn.Do("PSYNC", "?", "-1"); err == nil || !strings.HasPrefix(err.Error(), "NOMASTERLINK") {
		t.Fatalf("PSYNC ? -1 with the link down answered %v", err)
	}
}

// TestDownstreamNewGeneration: when the proxy itself has to full-sync (the
// primary restarted with a new replication ID), its replicas are dropped and
// full-sync again from the new stream, ending with the new primary's data.
func TestDownstreamNewGeneration(t *testing.T) {
	primary, _, _, xc, _, rcs := dsSetup(t, 2)
	full := xc.InfoInt(t, "stats", "sync_full")
	primary.Restart()
	pc := redistest.Dial(t, primary.Addr())
	writeMixed(t, pc, 300)
	redistest.WaitFor(t, 15*time.Second, "replicas resynced from the new generation", func() bool {
		return xc.InfoInt(t, "stats", "sync_full") >= full+2
	})
	writeMixed(t, pc, 100)
	dsWaitSynced(t, pc, rcs...)
	for _, rc := range rcs {
		if got, want := rc.Info(t, "replication")["master_replid"], pc.Info(t, "replication")["master_replid"]; got != want {
			t.Fatalf("replica replid %s, new primary %s", got, want)
		}
	}
}

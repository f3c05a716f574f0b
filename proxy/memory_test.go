package proxy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// memStartReplica starts a real replica of the proxy and waits until it is in sync.
func memStartReplica(t testing.TB, p *testProxy, pc *redistest.Client) (*redistest.Server, *redistest.Client) {
	t.Helper()
	rs, rcs := redistest.StartReplicas(t, 1, p.AddrString())
	redistest.WaitSynced(t, pc, rcs[0])
	return rs[0], rcs[0]
}

// memInfo reads INFO memory figures as integers.
func memInfo(t testing.TB, c *redistest.Client) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for k, v := range c.Info(t, "memory") {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// memReplicaQbuf is the query buffer of the proxy's replica clients (CLIENT
// LIST flags=S, qbuf + qbuf-free), which Redis's test leaves out of the delta.
func memReplicaQbuf(t testing.TB, c *redistest.Client) int64 {
	t.Helper()
	var n int64
	for _, cl := range c.ClientList(t) {
		if strings.Contains(cl["flags"], "S") {
			q, _ := strconv.ParseInt(cl["qbuf"], 10, 64)
			f, _ := strconv.ParseInt(cl["qbuf-free"], 10, 64)
			n += q + f
		}
	}
	return n
}

// TestReplicaBuffersCountedCorrectly ports Redis's test_slave_buffers
// (tests/unit/maxmemory.tcl) to the proxy: a real replica of the proxy is
// frozen with SIGSTOP and the writes go to the primary, so every propagated
// byte piles up in the proxy as that replica's buffer. The dataset-like
// memory (counted for eviction) must not move; the replica's buffer must be
// reported in mem_clients_slaves and never cause eviction; killing the
// replica releases it without moving counted memory either.
func TestReplicaBuffersCountedCorrectly(t *testing.T) {
	cases := []struct {
		name     string
		cmds     int
		payload  int
		limitMem bool
		pipeline int
	}{
		{"slave buffer are counted correctly", 1000000, 10, false, 100},
		{"replica buffer don't induce eviction", 100000, 100, true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && tc.cmds > 100000 {
				t.Skip("1M commands")
			}
			memSlaveBuffers(t, tc.cmds, tc.payload, tc.limitMem, tc.pipeline)
		})
	}
}

func memSlaveBuffers(t *testing.T, cmdCount, payloadLen int, limitMemory bool, pipeline int) {
	primary, pc := startPrimary(t)
	// About 10 MB of data, as in Redis's test: 100 keys of ~100 KB.
	for j := range 100 {
		pc.MustDo(t, "SETRANGE", fmt.Sprintf("key:%d", j), 100000, "asdf")
	}
	// A backlog already full at the baseline (Redis's test uses 10240; our
	// minimum is 16 KiB), and limits that never disconnect the replica.
	// Redis's figures are memory's: with the stream log on, a replica out of
	// the memory window moves to disk instead (TestLogReplicaFallsBackToDisk).
	p := startProxy(t, append(replicaOf(primary), "--repl-log-size", "0", "--repl-backlog-size", "16kb",
		"--client-output-buffer-limit", "replica", "1gb", "1gb", "300",
		"--maxmemory-policy", "evict-snapshots", "--repl-timeout", "1200")...)
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	replica, _ := memStartReplica(t, p, pc)
	pc.MustDo(t, "SET", "fill", strings.Repeat("x", 64<<10)) // fills the backlog past its size
	off := itoa(waitOffsetsEqual(t, pc, xc))
	// The baseline is taken once the replica's ACK of that offset has reached
	// the proxy, so that no ACK is in flight.
	redistest.WaitFor(t, 10*time.Second, "the replica's ACK of offset "+off, func() bool {
		return strings.Contains(xc.Info(t, "replication")["slave0"]+",", ",offset="+off+",")
	})

	orig := memInfo(t, xc)
	origNoRepl := orig["used_memory"] - orig["mem_not_counted_for_evict"]
	if limitMemory {
		limit := origNoRepl + 32<<10
		xc.MustDo(t, "CONFIG", "SET", "maxmemory", limit)
	}
	replica.Pause()
	defer replica.Resume()

	redistest.RunBenchmark(t, primary.Addr(), "-c", "1", "-n", strconv.Itoa(cmdCount),
		"-P", strconv.Itoa(pipeline), "SETRANGE", "key:0", "0", strings.Repeat("A", payloadLen))
	waitOffsetsEqual(t, pc, xc)

	now := memInfo(t, xc)
	qbuf := memReplicaQbuf(t, xc)
	origQbuf := int64(16384) // the replica's reader buffer was there at the baseline too
	usedNoRepl := now["used_memory"] - now["mem_not_counted_for_evict"] - qbuf
	delta := (usedNoRepl - now["mem_clients_normal"]) - (origNoRepl - origQbuf - orig["mem_clients_normal"])
	deltaMax := int64(cmdCount / 2)
	t.Logf("mem_clients_slaves %d, counted delta %d (bound %d), not counted %d",
		now["mem_clients_slaves"], delta, deltaMax, now["mem_not_counted_for_evict"])
	if n := pc.MustDo(t, "DBSIZE").Integer(); n != 101 {
		t.Fatalf("primary dbsize %d, want the 100 keys and the filler", n)
	}
	if ev := xc.InfoInt(t, "stats", "evicted_snapshots"); ev != 0 {
		t.Fatalf("replica buffers induced eviction: evicted_snapshots %d", ev)
	}
	if now["mem_clients_slaves"] <= 2<<20 {
		t.Fatalf("mem_clients_slaves %d: the replica's buffer did not grow past 2 MiB", now["mem_clients_slaves"])
	}
	if delta < -deltaMax || delta > deltaMax {
		t.Fatalf("counted memory moved by %d bytes while replica buffers grew (bound %d)", delta, deltaMax)
	}

	// Killing the replica releases its buffer; counted memory stays.
	xc.MustDo(t, "CLIENT", "KILL", "TYPE", "slave")
	redistest.WaitFor(t, 5*time.Second, "replica killed", func() bool {
		return xc.InfoInt(t, "replication", "connected_slaves") == 0
	})
	killed := memInfo(t, xc)
	killedNoRepl := killed["used_memory"] - killed["mem_not_counted_for_evict"] - memReplicaQbuf(t, xc)
	if killed["mem_clients_slaves"] != 0 {
		t.Fatalf("mem_clients_slaves %d after the replica was killed", killed["mem_clients_slaves"])
	}
	if d := killedNoRepl - killed["mem_clients_normal"] - (usedNoRepl - now["mem_clients_normal"]); d < -deltaMax || d > deltaMax {
		t.Fatalf("releasing the replica's buffer moved counted memory by %d (bound %d)", d, deltaMax)
	}
	if ev := xc.InfoInt(t, "stats", "evicted_snapshots"); ev != 0 {
		t.Fatalf("evicted_snapshots %d after the kill", ev)
	}
}

// TestUsedMemoryMatchesHeap: with 256 MiB of stream retained by a frozen
// replica, the proxy's used_memory agrees with the Go heap after a GC. The
// bound is 1% of the heap plus 1 MiB; the proxy runs in this process, so the
// heap also holds the test's own (small) structures.
func TestUsedMemoryMatchesHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("retains 256 MiB")
	}
	primary, pc := startPrimary(t, "--client-output-buffer-limit", "replica", "0", "0", "0")
	// The stream is held in memory by a frozen replica: no stream log, which
	// would move it to disk.
	p := newTestProxy(t, proxySetup{quiet: true, args: append(replicaOf(primary), "--repl-log-size", "0",
		"--client-output-buffer-limit", "replica", "0", "0", "0")})
	xc := redistest.Dial(t, p.AddrString())
	waitLinkUp(t, xc)
	replica, _ := memStartReplica(t, p, pc)
	replica.Pause()
	defer replica.Resume()
	// A little more than 256 MiB: the frozen replica's socket buffers take
	// the first few MiB before anything piles up in the proxy. Written on a
	// connection of its own, so that no buffer of the test outlives it.
	memWriteBig(t, primary.Addr(), 280, 1<<20)
	waitOffsetsEqual(t, pc, xc)
	if u := p.hist.Stream().Usage(); u.Total < 256<<20 {
		t.Fatalf("only %d bytes of stream retained", u.Total)
	}

	check := func(what string, wantAtLeast int64) {
		t.Helper()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap := int64(ms.HeapAlloc)
		used := p.mem.report().UsedMemory
		bound := heap/100 + 1<<20
		t.Logf("%s: used_memory %d, Go heap %d, difference %d (bound %d)", what, used, heap, used-heap, bound)
		if used < wantAtLeast {
			t.Fatalf("%s: used_memory %d, expected at least %d", what, used, wantAtLeast)
		}
		if d := used - heap; d < -bound || d > bound {
			t.Fatalf("%s: used_memory %d and Go heap %d differ by %d, bound %d", what, used, heap, d, bound)
		}
	}
	check("256 MiB retained", 256<<20)

	xc.MustDo(t, "CLIENT", "KILL", "TYPE", "replica")
	redistest.WaitFor(t, 5*time.Second, "backlog trimmed", func() bool {
		return p.hist.Stream().Usage().Total < 4<<20
	})
	check("released", 0)
}

// memWriteBig SETs n values of size bytes on a connection of its own.
func memWriteBig(t testing.TB, addr string, n, size int) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	value := strings.Repeat("v", size)
	reply := make([]byte, 64)
	for i := range n {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write(wire.AppendCommand(nil, "SET", fmt.Sprintf("big:%d", i%8), value)); err != nil {
			t.Fatal(err)
		}
		if k, err := conn.Read(reply); err != nil || string(reply[:k]) != "+OK\r\n" {
			t.Fatalf("SET: %q %v", reply[:k], err)
		}
	}
}

// TestMaxMemoryEvictsSnapshots: maxmemory below the snapshot's size, without
// the stream log. With a
// writable dir the snapshot is spilled and the next full sync is sent from
// the file (no new fork on the primary); without one it is dropped and the
// next full sync fetches a new one; under noeviction nothing is evicted and
// the proxy keeps serving. Every new replica ends with the primary's data.
func TestMaxMemoryEvictsSnapshots(t *testing.T) {
	cases := []struct {
		name     string
		policy   string
		dir      func(t *testing.T) string
		evicted  bool
		onDisk   bool
		newFetch bool
	}{
		{"spilled to dir", "evict-snapshots", func(t *testing.T) string { return t.TempDir() }, true, true, false},
		{"dropped without a usable dir", "evict-snapshots", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "not-a-dir")
			os.WriteFile(f, nil, 0o644)
			return f
		}, true, false, true},
		{"noeviction keeps it", "noeviction", func(t *testing.T) string { return t.TempDir() }, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary, pc := startPrimary(t)
			pc.MustDo(t, "DEBUG", "POPULATE", 100000, "key", 200)
			dir := tc.dir(t)
			// No stream log: with it, every snapshot goes to dir at once,
			// not by eviction (package snapshots, persist.go).
			p, xc := startProxyOf(t, primary, "--maxmemory", "1mb", "--maxmemory-policy", tc.policy, "--dir", dir, "--repl-log-size", "0")
			// The snapshot may be gone already: its size is what the
			// primary sent, less the 40-byte EOF mark of a diskless sync.
			snapSize := xc.InfoInt(t, "proxy", "upstream_rdb_bytes") - 40
			if snapSize < 1<<20 {
				t.Fatalf("snapshot of %d bytes is not above maxmemory: the test tests nothing", snapSize)
			}
			if tc.evicted {
				redistest.WaitFor(t, 10*time.Second, "snapshot evicted and its memory released", func() bool {
					return xc.InfoInt(t, "stats", "evicted_snapshots") >= 1 && memInfo(t, xc)["mem_snapshots"] == 0
				})
				mi := memInfo(t, xc)
				if got := mi["mem_snapshots_on_disk"]; (got == snapSize) != tc.onDisk {
					t.Fatalf("mem_snapshots_on_disk %d (snapshot %d bytes), want on disk: %v", got, snapSize, tc.onDisk)
				}
				if xc.InfoInt(t, "stats", "evicted_bytes") < snapSize {
					t.Fatal("evicted_bytes smaller than the snapshot")
				}
			} else {
				redistest.WaitFor(t, 5*time.Second, "over maxmemory reported", func() bool {
					return memInfo(t, xc)["mem_over_maxmemory"] == 1
				})
				if ev := xc.InfoInt(t, "stats", "evicted_snapshots"); ev != 0 {
					t.Fatalf("noeviction evicted %d snapshots", ev)
				}
			}
			writeMixed(t, pc, 300)
			fullBefore := pc.InfoInt(t, "stats", "sync_full")
			_, rc := memStartReplica(t, p, pc)
			writeMixed(t, pc, 100)
			redistest.WaitSynced(t, pc, rc)
			fetched := pc.InfoInt(t, "stats", "sync_full") - fullBefore
			if (fetched > 0) != tc.newFetch {
				t.Fatalf("primary's sync_full grew by %d; a new fetch expected: %v", fetched, tc.newFetch)
			}
		})
	}
}

// TestOutputBufferLimits: a frozen replica crossing the hard limit is dropped
// at once; one staying above the soft limit longer than its seconds is
// dropped then; the other replicas never notice; and the stream shrinks back
// to the backlog size afterwards.
func TestOutputBufferLimits(t *testing.T) {
	cases := []struct {
		name  string
		limit []string
	}{
		{"hard", []string{"replica", "8mb", "0", "0"}},
		{"soft", []string{"replica", "0", "4mb", "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			primary, pc := startPrimary(t)
			// Memory limits: without the stream log (with it, the limit is
			// on lag: TestLogLagLimit).
			p := startProxy(t, append(append(replicaOf(primary), "--repl-log-size", "0", "--repl-backlog-size", "1mb",
				"--client-output-buffer-limit"), tc.limit...)...)
			xc := redistest.Dial(t, p.AddrString())
			waitLinkUp(t, xc)
			slow, _ := memStartReplica(t, p, pc)
			_, fast1 := memStartReplica(t, p, pc)
			_, fast2 := memStartReplica(t, p, pc)
			full, partial := xc.InfoInt(t, "stats", "sync_full"), xc.InfoInt(t, "stats", "sync_partial_ok")
			dropped := xc.InfoInt(t, "proxy", "replicas_dropped")

			slow.Pause()
			value := strings.Repeat("z", 256<<10)
			// 40 MiB, past both limits even after the frozen replica's socket
			// buffers, written at a pace the live replicas keep up with (they
			// must stay far from the limits: "the others never notice").
			// The soft limit's grace period runs from the moment the frozen
			// replica's buffer first exceeds it, somewhere inside this loop:
			// note the first time CLIENT LIST shows it over (the live replicas
			// stay far below, so the largest omem is the frozen one's).
			var overSoft time.Time
			for i := range 160 {
				pc.MustDo(t, "SET", fmt.Sprintf("z:%d", i%10), value)
				if i%8 == 7 {
					redistest.WaitSynced(t, pc, fast1, fast2)
				}
				if overSoft.IsZero() && maxReplicaOmem(t, xc) > 4<<20 {
					overSoft = time.Now()
				}
			}
			redistest.WaitFor(t, 10*time.Second, "frozen replica dropped", func() bool {
				return xc.InfoInt(t, "proxy", "replicas_dropped") == dropped+1
			})
			if tc.name == "soft" {
				// overSoft is seen after the crossing, so the time from it
				// to the drop may fall short of 2 s by one poll; one second
				// still tells a timed drop from an immediate one.
				if overSoft.IsZero() {
					t.Fatal("the frozen replica's buffer was never seen over the soft limit")
				}
				if d := time.Since(overSoft); d < time.Second {
					t.Fatalf("dropped %v after crossing the soft limit, before its 2 seconds", d)
				}
			}
			redistest.WaitFor(t, 5*time.Second, "the two other replicas left connected", func() bool {
				return xc.InfoInt(t, "replication", "connected_slaves") == 2
			})
			writeMixed(t, pc, 200)
			redistest.WaitSynced(t, pc, fast1, fast2)
			if f, pa := xc.InfoInt(t, "stats", "sync_full"), xc.InfoInt(t, "stats", "sync_partial_ok"); f != full || pa != partial {
				t.Fatalf("the other replicas resynced: sync_full %d→%d, sync_partial_ok %d→%d", full, f, partial, pa)
			}
			// The stream shrinks back to the backlog once nothing pins it.
			redistest.WaitFor(t, 5*time.Second, "backlog back to its size", func() bool {
				hist := xc.InfoInt(t, "replication", "repl_backlog_histlen")
				total := memInfo(t, xc)["mem_total_replication_buffers"]
				return hist <= 1<<20+2*replbuf.BlockSize && total <= (1<<20/replbuf.BlockSize+3)*replbuf.BlockFootprint
			})
			slow.Resume()
		})
	}
}

// maxReplicaOmem is the largest output buffer among the proxy's replicas, as
// CLIENT LIST shows it.
func maxReplicaOmem(t testing.TB, xc *redistest.Client) int64 {
	t.Helper()
	var most int64
	for _, c := range xc.ClientList(t) {
		if !strings.Contains(c["flags"], "S") {
			continue
		}
		if n, err := strconv.ParseInt(c["omem"], 10, 64); err == nil && n > most {
			most = n
		}
	}
	return most
}

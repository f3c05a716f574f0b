package proxy

import (
	"bytes"
	"fmt"
	"math/big"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/rdbcheck"
)

// A fetched snapshot that may pass the memory limit goes to dir as it
// arrives, as the main link's payload does (package snapshots, payload.go).

// startFetchDiskProxy runs a proxy of h (quiet: no log kept, whose buffers
// would grow the heap a test measures) with the stream log off and maxmemory under evict-snapshots: its own snapshot
// soon leaves the 16 KiB backlog, so a full sync needs a fetch, and a
// fetched payload past maxmemory goes to dir.
func startFetchDiskProxy(t *testing.T, h *fakePrimary, quiet bool) *testProxy {
	t.Helper()
	p := newTestProxy(t, proxySetup{quiet: quiet, args: append(h.replicaOf(), "--repl-timeout", "1", "--repl-backlog-size", "16kb",
		"--repl-log-size", "0", "--maxmemory", "4mb", "--maxmemory-policy", "evict-snapshots")})
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool { return p.up.State() == upstream.StateConnected })
	waitSnapshotUnservable(t, p)
	return p
}

// startFetchDiskLogProxy runs a quiet proxy of h with the stream log on (the
// default), whose own snapshot, on disk once persisted, is then forgotten:
// the log would go on serving it, and the test needs a full sync that
// fetches.
func startFetchDiskLogProxy(t *testing.T, h *fakePrimary) *testProxy {
	t.Helper()
	p := newTestProxy(t, proxySetup{quiet: true, args: append(h.replicaOf(), "--repl-timeout", "1", "--repl-backlog-size", "16kb")})
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool { return p.up.State() == upstream.StateConnected })
	waitSnapshotOnDisk(t, redistest.Dial(t, p.AddrString()))
	p.hist.Retire(p.hist.Newest(), true)
	return p
}

// fetchWaiting reports whether p's fetch in flight has n waiting replicas.
func fetchWaiting(p *testProxy, n int) bool {
	f, waiters := p.hist.InFlight()
	return f != nil && waiters == n
}

// payloadCRC reads a sync payload, either form, after the keepalive
// newlines, without keeping it: its size and CRC64.
func (r *rawReplica) payloadCRC() (size int64, crc uint64, err error) {
	header, err := r.reply()
	if err != nil {
		return 0, 0, fmt.Errorf("payload header: %w", err)
	}
	n, mark, err := upstream.ParsePayloadHeader(header)
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 64<<10)
	if mark == nil {
		var sum crc64Writer
		for size < n {
			r.conn.SetReadDeadline(time.Now().Add(fakeIOTimeout))
			k, err := r.br.Read(buf[:min(int64(len(buf)), n-size)])
			sum.Write(buf[:k])
			size += int64(k)
			if err != nil {
				return size, sum.crc, err
			}
		}
		return size, sum.crc, nil
	}
	// EOF-marked: the last len(mark) bytes read are held back until more
	// come, and must be the mark at the end.
	held := 0
	for {
		r.conn.SetReadDeadline(time.Now().Add(fakeIOTimeout))
		k, err := r.br.Read(buf[held:])
		held += k
		if held >= len(mark) && bytes.Equal(buf[held-len(mark):held], mark) {
			crc = rdbcheck.CRC64(crc, buf[:held-len(mark)])
			return size + int64(held-len(mark)), crc, nil
		}
		if keep := min(held, len(mark)); held > keep {
			crc = rdbcheck.CRC64(crc, buf[:held-keep])
			size += int64(held - keep)
			copy(buf, buf[held-keep:held])
			held = keep
		}
		if err != nil {
			return size, crc, err
		}
	}
}

// TestFetchedPayloadToDisk: a snapshot fetch answered with a 64 MiB
// EOF-marked payload, for two waiting replicas (one with capa eof, one
// without), goes to dir as it arrives, with the stream log on once past
// 1 MiB, without it once it would pass maxmemory: mem_snapshots stays
// within that, counted, and the heap does not grow with it; both replicas,
// sharing the one fetch, then get exactly the bytes the primary sent.
func TestFetchedPayloadToDisk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		start   func(t *testing.T, h *fakePrimary) *testProxy
		maxSnap int64 // the most mem_snapshots may reach
	}{
		{"maxmemory", func(t *testing.T, h *fakePrimary) *testProxy { return startFetchDiskProxy(t, h, true) }, 4 << 20},
		{"stream log", startFetchDiskLogProxy, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) { testFetchedPayloadToDisk(t, tc.start, tc.maxSnap) })
	}
}

func testFetchedPayloadToDisk(t *testing.T, start func(t *testing.T, h *fakePrimary) *testProxy, maxSnap int64) {
	const size = 64 << 20
	const bound = 16 << 20 // the heap may grow by this much at most: a quarter of the payload
	chunk := payloadChunk(t, 64<<10)
	mark := payloadChunk(t, 40)
	for i := range mark { // the mark is printable, as Redis makes it
		mark[i] = 'a' + mark[i]%26
	}
	send := make(chan struct{})
	var p *testProxy
	var mu sync.Mutex // guards the figures below, sampled by the side script
	var base, peakHeap, peakSnap int64
	var sentCRC uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		snap, _ := p.hist.SnapshotBytes()
		mu.Lock()
		peakHeap = max(peakHeap, int64(ms.HeapInuse)-base)
		peakSnap = max(peakSnap, snap)
		mu.Unlock()
	}
	h := startFakePrimary(t, fakeGoodMain(hostileBurst), func(hc *fakeLink) error {
		select {
		case <-send:
		case <-hc.primary.done:
			return nil
		}
		if err := hc.write(hc.fullResync() + "$EOF:" + string(mark) + "\r\n"); err != nil {
			return err
		}
		rdb := newRDBPieces(size, chunk)
		for p, next := rdb.next(), 4<<20; p != nil; p = rdb.next() {
			if err := hc.writeRaw(p); err != nil {
				return err
			}
			if rdb.sent >= next {
				sample()
				next += 4 << 20
			}
		}
		mu.Lock()
		sentCRC = rdb.CRC()
		mu.Unlock()
		if err := hc.writeRaw(mark); err != nil {
			return err
		}
		hc.awaitHangup()
		return nil
	})
	p = start(t, h)
	xc := redistest.Dial(t, p.AddrString())
	replicas := []*rawReplica{dialRawReplica(t, p, true), dialRawReplica(t, p, false)}
	for _, r := range replicas {
		if err := r.send("PSYNC", "?", "-1"); err != nil {
			t.Fatal(err)
		}
	}
	redistest.WaitFor(t, 10*time.Second, "two replicas waiting for the fetch", func() bool { return fetchWaiting(p, 2) })
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base = int64(ms.HeapInuse)
	type result struct {
		size int64
		crc  uint64
		err  error
	}
	results := make([]result, len(replicas))
	var wg sync.WaitGroup
	for i, r := range replicas {
		wg.Go(func() {
			line, err := r.reply()
			if err != nil || !strings.HasPrefix(line, "+FULLRESYNC "+h.replID+" ") {
				results[i].err = fmt.Errorf("PSYNC ? -1 answered %q, %v", line, err)
				return
			}
			results[i].size, results[i].crc, results[i].err = r.payloadCRC()
		})
	}
	close(send)
	wg.Wait()
	mu.Lock()
	t.Logf("%d MiB fetched payload: heap grew by %d KiB at most, mem_snapshots at most %d KiB", size>>20, peakHeap>>10, peakSnap>>10)
	if peakSnap > maxSnap || peakSnap == 0 {
		t.Errorf("mem_snapshots reached %d bytes while a %d-byte fetched payload arrived; want it counted, within the limit (0 < it <= %d)", peakSnap, size, maxSnap)
	}
	if peakHeap > bound {
		t.Errorf("the heap grew by %d MiB while a %d MiB fetched payload arrived; want at most %d MiB", peakHeap>>20, size>>20, bound>>20)
	}
	want := sentCRC
	mu.Unlock()
	for i, res := range results {
		if res.err != nil || res.size != size || res.crc != want {
			t.Errorf("replica %d (capa eof %v): %d bytes, CRC64 %016x, %v; want %d bytes, %016x", i, i == 0, res.size, res.crc, res.err, size, want)
		}
	}
	if n := h.sides.Load(); n != 1 {
		t.Errorf("%d fetches for two waiting replicas, want one", n)
	}
	if got := xc.InfoInt(t, "persistence", "repl_snapshot_on_disk"); got != 1 {
		t.Errorf("repl_snapshot_on_disk:%d after the fetch, want 1 (served from dir)", got)
	}
}

// TestFetchDeclaredLargerThanDisk: a fetch answered "$<len>" with more than
// dir's free space is refused before any of it is read, logged, counted as
// a failed fetch and tried again while the replica waits; the replica then
// gets the next fetch's snapshot.
func TestFetchDeclaredLargerThanDisk(t *testing.T) {
	var p *testProxy
	chunk := payloadChunk(t, 64<<10)
	h := startFakePrimary(t, fakeGoodMain(hostileBurst), func(hc *fakeLink) error {
		if hc.n > 1 {
			return hc.goodFetch()
		}
		free, err := snapfile.FreeSpace(p.config().Dir)
		if err != nil {
			return err
		}
		declared := new(big.Int).Add(big.NewInt(free), big.NewInt(1<<30)).String()
		if err := hc.write(hc.fullResync() + "$" + declared + "\r\n"); err != nil {
			return err
		}
		for range 16 { // 1 MiB the proxy must not read; a write may fail once it hung up
			if hc.writeRaw(chunk) != nil {
				break
			}
		}
		hc.awaitHangup()
		return nil
	})
	p = startFetchDiskProxy(t, h, false)
	xc := redistest.Dial(t, p.AddrString())
	r := dialRawReplica(t, p, true)
	if err := r.fullSync(h, "?", "-1"); err != nil {
		t.Fatal(err)
	}
	info := xc.Info(t, "proxy")
	t.Logf("side links %d; snapshot_fetch_failures %s, snapshot_fetch_bytes %s (the good RDB: %d)",
		h.sides.Load(), info["snapshot_fetch_failures"], info["snapshot_fetch_bytes"], len(h.rdb))
	if got := info["snapshot_fetch_bytes"]; got != strconv.Itoa(len(h.rdb)) {
		t.Errorf("snapshot_fetch_bytes %s, want %d: the proxy read a payload it cannot store", got, len(h.rdb))
	}
	if got := info["snapshot_fetch_failures"]; got != "1" {
		t.Errorf("snapshot_fetch_failures:%s, want 1", got)
	}
	if n := h.sides.Load(); n != 2 {
		t.Errorf("%d side links, want 2 (the refused fetch and its retry)", n)
	}
	if !p.Log.Contains("larger than the free space of dir") {
		t.Errorf("no log line says why the fetch was refused")
	}
}

// TestFetchedEOFPayloadToDiskRedis: with real Redis 7.0 and its default
// diskless sync, a snapshot fetched for two replicas (an EOF-marked RDB of
// megabytes, past the 1 MiB a payload keeps in memory with the stream log
// on) goes to dir as it arrives; the replicas, sent it from there, end with
// the primary's data (WaitSynced compares DEBUG DIGEST), for one fork.
func TestFetchedEOFPayloadToDiskRedis(t *testing.T) {
	primary, pc := startPrimary(t)
	pc.MustDo(t, "DEBUG", "POPULATE", "100000", "key", "64")
	p, xc := startProxyOf(t, primary, "--repl-log-size", "4mb")
	waitSnapshotOnDisk(t, xc)
	snapshotOff := xc.InfoInt(t, "persistence", "repl_snapshot_offset")
	// Past the log: the proxy's own snapshot can no longer be served.
	writeValues(t, pc, "old", 80, 100<<10)
	waitLogged(t, pc, xc)
	if first := xc.InfoInt(t, "persistence", "repl_log_first_offset"); first <= snapshotOff+1 {
		t.Fatalf("the log still covers the snapshot at %d (it starts at %d)", snapshotOff, first)
	}
	forks := forksOf(t, pc)
	_, rcs := redistest.StartReplicas(t, 2, xc.Addr())
	redistest.WaitSynced(t, pc, rcs...)
	info := xc.Info(t, "everything")
	t.Logf("primary total_forks +%d; proxy snapshot_fetches %s, snapshot_fetch_bytes %s", forksOf(t, pc)-forks,
		info["snapshot_fetches"], info["snapshot_fetch_bytes"])
	if got := forksOf(t, pc); got != forks+1 {
		t.Errorf("primary total_forks %d→%d, want one fork (the one fetch)", forks, got)
	}
	if !p.Log.Contains("going to dir as it arrives: link=fetch") {
		t.Errorf("the fetched payload did not go to dir as it arrived")
	}
	if n := p.Log.Count("from-disk=true"); n != 2 {
		t.Errorf("%d replicas sent the snapshot from dir, want 2", n)
	}
}

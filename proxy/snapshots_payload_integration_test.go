package proxy

import (
	"crypto/rand"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/snapfile"
)

// payloadChunk is one piece of a large payload a fake primary sends: random
// bytes (so that no EOF mark can appear in them by chance, and no
// compression could hide them), written again and again from one buffer so
// that the test's own heap does not grow with the payload.
func payloadChunk(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// startPayloadProxy runs a proxy whose main link the test plays by hand
// (fakeHandOver), and returns it with the link, past its PSYNC. quiet
// keeps no log, whose buffers would grow the heap a test measures.
func startPayloadProxy(t *testing.T, quiet bool, args ...string) (*testProxy, *fakePrimary, *fakeLink) {
	t.Helper()
	h := startFakePrimary(t, fakeHandOver, nil)
	p := newTestProxy(t, proxySetup{quiet: quiet, args: append(append(h.replicaOf(), "--repl-timeout", "10"), args...)})
	return p, h, h.next(t)
}

// TestArrivingPayloadCounted: a full sync's payload is in the memory
// accounts while it arrives (mem_snapshots, used_memory), not only once it
// is whole. Stream log off and no maxmemory: it is held in memory.
func TestArrivingPayloadCounted(t *testing.T) {
	const size, half = 16 << 20, 8 << 20
	p, _, hc := startPayloadProxy(t, false, "--repl-log-size", "0")
	xc := redistest.Dial(t, p.AddrString())
	before := xc.InfoInt(t, "memory", "used_memory")
	rdb := newRDBPieces(size, payloadChunk(t, 64<<10))
	hc.mustWrite(t, hc.fullResync()+"$"+strconv.Itoa(size)+"\r\n")
	for rdb.sent < half {
		if err := hc.writeRaw(rdb.next()); err != nil {
			t.Fatal(err)
		}
	}
	redistest.WaitFor(t, 10*time.Second, "half the payload received", func() bool {
		return xc.InfoInt(t, "proxy", "upstream_rdb_bytes") >= half
	})
	mem := xc.Info(t, "memory")
	snap, _ := strconv.ParseInt(mem["mem_snapshots"], 10, 64)
	used, _ := strconv.ParseInt(mem["used_memory"], 10, 64)
	t.Logf("with %d MiB of %d received: mem_snapshots %d, used_memory %d (before %d)", half>>20, size>>20, snap, used, before)
	if snap < half || used-before < half {
		t.Fatalf("arriving payload not counted: mem_snapshots %d, used_memory grew by %d, with %d bytes received", snap, used-before, half)
	}
	// The rest, with the RDB's CRC64 trailer: the sync completes.
	for p := rdb.next(); p != nil; p = rdb.next() {
		if err := hc.writeRaw(p); err != nil {
			t.Fatal(err)
		}
	}
	redistest.WaitFor(t, 10*time.Second, "snapshot complete", func() bool {
		return xc.Info(t, "proxy")["snapshot_state"] == "complete"
	})
	if got := xc.InfoInt(t, "memory", "mem_snapshots"); got < size {
		t.Errorf("mem_snapshots %d once complete, want at least %d", got, size)
	}
}

// TestArrivingPayloadToDisk: with the stream log on (the default), an
// EOF-marked payload of 64 MiB goes to dir as it arrives: memory holds a
// small window of it (mem_snapshots, and the Go heap, which does not grow
// with it), and once whole it is the snapshot on disk, byte for byte, with
// metadata a restart adopts.
func TestArrivingPayloadToDisk(t *testing.T) {
	const size = 64 << 20
	const bound = 16 << 20 // the heap may grow by this much at most: a quarter of the payload
	p, _, hc := startPayloadProxy(t, true)
	xc := redistest.Dial(t, p.AddrString())
	rdb := newRDBPieces(size, payloadChunk(t, 64<<10))
	mark := payloadChunk(t, 40)
	for i := range mark { // the mark is printable, as Redis makes it
		mark[i] = 'a' + mark[i]%26
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapInuse)
	var peakHeap, peakSnap int64
	sample := func() {
		runtime.ReadMemStats(&ms)
		peakHeap = max(peakHeap, int64(ms.HeapInuse)-base)
		peakSnap = max(peakSnap, xc.InfoInt(t, "memory", "mem_snapshots"))
	}
	hc.mustWrite(t, hc.fullResync()+"$EOF:"+string(mark)+"\r\n")
	for p, next := rdb.next(), 8<<20; p != nil; p = rdb.next() {
		if err := hc.writeRaw(p); err != nil {
			t.Fatal(err)
		}
		if rdb.sent >= next {
			sample()
			next += 8 << 20
		}
	}
	crc := rdb.CRC()
	if err := hc.writeRaw(mark); err != nil {
		t.Fatal(err)
	}
	redistest.WaitFor(t, 30*time.Second, "the snapshot on disk", func() bool {
		sample()
		return xc.Info(t, "persistence")["repl_snapshot_on_disk"] == "1"
	})
	t.Logf("%d MiB payload: heap grew by %d KiB at most, mem_snapshots at most %d KiB", size>>20, peakHeap>>10, peakSnap>>10)
	if peakSnap > 2<<20 || peakSnap == 0 {
		t.Errorf("mem_snapshots reached %d bytes while a %d-byte payload arrived; want a window, counted (0 < it <= 2 MiB)", peakSnap, size)
	}
	if peakHeap > bound {
		t.Errorf("the heap grew by %d MiB while a %d MiB payload arrived; want at most %d MiB", peakHeap>>20, size>>20, bound>>20)
	}
	if got := xc.InfoInt(t, "persistence", "repl_snapshot_size"); got != size {
		t.Errorf("repl_snapshot_size %d, want %d", got, size)
	}
	dir := p.config().Dir
	sp, err := snapfile.Load(dir) // what a restart adopts: metadata, size and CRC64
	if err != nil {
		t.Fatalf("snapshot on disk not adoptable: %v", err)
	}
	if sp.Size != size || sp.ReplID != linkReplID || sp.Offset != linkOffset {
		t.Errorf("snapshot on disk: %d bytes at %s:%d, want %d at %s:%d", sp.Size, sp.ReplID, sp.Offset, size, linkReplID, linkOffset)
	}
	f, err := os.Open(filepath.Join(dir, snapfile.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sum crc64Writer
	if _, err := io.Copy(&sum, f); err != nil {
		t.Fatal(err)
	}
	if sum.crc != crc {
		t.Errorf("the file's CRC64 %016x, want the payload's %016x", sum.crc, crc)
	}
	// Memory keeps nothing of it once installed.
	redistest.WaitFor(t, 5*time.Second, "mem_snapshots back to 0", func() bool {
		return xc.InfoInt(t, "memory", "mem_snapshots") == 0
	})
}

// TestDeclaredPayloadLargerThanDisk: a "$<len>" payload larger than dir's
// free space is refused before any of it is read, logged, and the link
// retries (with the stream log on, the payload would go to dir).
func TestDeclaredPayloadLargerThanDisk(t *testing.T) {
	p, h, hc := startPayloadProxy(t, false)
	free, err := snapfile.FreeSpace(p.config().Dir)
	if err != nil {
		t.Fatal(err)
	}
	declared := new(big.Int).Add(big.NewInt(free), big.NewInt(1<<30)).String()
	chunk := payloadChunk(t, 64<<10)
	hc.mustWrite(t, hc.fullResync()+"$"+declared+"\r\n")
	for range 16 { // 1 MiB the proxy must not read; a write may fail once it hung up
		if hc.writeRaw(chunk) != nil {
			break
		}
	}
	hc.waitHangUp(t)
	xc := redistest.Dial(t, p.AddrString())
	if got := xc.InfoInt(t, "proxy", "upstream_rdb_bytes"); got != 0 {
		t.Errorf("upstream_rdb_bytes %d: the proxy read a payload it cannot store", got)
	}
	h.next(t) // the link retries, after logging why it failed
	if !p.Log.Contains("larger than the free space of dir") {
		t.Errorf("no log line says why the payload was refused")
	}
	if got := xc.InfoInt(t, "memory", "mem_snapshots"); got != 0 {
		t.Errorf("mem_snapshots %d after the refusal, want 0", got)
	}
}

// TestDeclaredPayloadLargerThanMemory: with the stream log off, a payload
// that would stay in memory and cannot fit there is refused: one whose
// declared size is larger than the machine's memory before any of it is
// read, an EOF-marked one once it grows past it; each is logged, and the
// link retries. The first case is a hostile primary on a compressed link:
// 1 TiB declared, then 2,000 chunks of 128 KiB of zeros (about 76 KB on
// the wire, 262 MB once decompressed), against the machine's real memory;
// the others fake a machine of 64 and 16 MiB.
func TestDeclaredPayloadLargerThanMemory(t *testing.T) {
	for _, tc := range []struct {
		name     string
		machine  int64 // the machine's memory, faked; 0: the real one
		args     []string
		send     func(t *testing.T, hc *fakeLink)
		maxBytes int64  // the most of the payload the proxy may read
		log      string // what its log line says
	}{
		{"compressed 1 TiB", 0, []string{"--repl-link-compression", "zstd"}, func(t *testing.T, hc *fakeLink) {
			hc.mustWrite(t, hc.fullResync())
			hc.conn.SetWriteDeadline(time.Now().Add(fakeIOTimeout))
			z := linkzstd.NewWriter(hc.conn)
			defer z.Close()
			if _, err := io.WriteString(z, "$1099511627776\r\n"); err != nil {
				t.Fatal(err)
			}
			zeros := make([]byte, linkzstd.MaxChunkRaw)
			for range 2000 { // a write may fail once the proxy hung up
				if _, err := z.Write(zeros); err != nil {
					break
				}
			}
		}, 0, "larger than memory may hold: 1099511627776 bytes declared, the machine's memory"},
		{"declared over the machine's memory", 64 << 20, nil, func(t *testing.T, hc *fakeLink) {
			chunk := payloadChunk(t, 64<<10)
			hc.mustWrite(t, hc.fullResync()+"$"+strconv.Itoa(100<<20)+"\r\n")
			for range 16 { // 1 MiB the proxy must not read
				if hc.writeRaw(chunk) != nil {
					break
				}
			}
		}, 0, "larger than memory may hold: 104857600 bytes declared, the machine's memory 67108864"},
		{"EOF-marked past the machine's memory", 16 << 20, nil, func(t *testing.T, hc *fakeLink) {
			rdb := newRDBPieces(24<<20, payloadChunk(t, 64<<10))
			hc.mustWrite(t, hc.fullResync()+"$EOF:"+linkEOFMark+"\r\n")
			for p := rdb.next(); p != nil; p = rdb.next() {
				if hc.writeRaw(p) != nil {
					break
				}
			}
		}, 16<<20 + 64<<10, "larger than memory may hold: more than the machine's memory 16777216"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startFakePrimary(t, fakeHandOver, nil)
			ps := proxySetup{args: append(h.replicaOf(), append([]string{"--repl-timeout", "10", "--repl-log-size", "0"}, tc.args...)...)}
			if tc.machine > 0 {
				ps.opts.machineMemory = func() int64 { return tc.machine }
			}
			p := newTestProxy(t, ps)
			hc := h.next(t)
			tc.send(t, hc)
			hc.waitHangUp(t)
			xc := redistest.Dial(t, p.AddrString())
			if got := xc.InfoInt(t, "proxy", "upstream_rdb_bytes"); got > tc.maxBytes {
				t.Errorf("upstream_rdb_bytes %d: the proxy read more than %d of a payload memory cannot hold", got, tc.maxBytes)
			}
			h.next(t) // the link retries, after logging why it failed
			if !p.Log.Contains(tc.log) {
				t.Errorf("no log line says %q", tc.log)
			}
			if got := xc.InfoInt(t, "memory", "mem_snapshots"); got != 0 {
				t.Errorf("mem_snapshots %d after the refusal, want 0", got)
			}
		})
	}
}

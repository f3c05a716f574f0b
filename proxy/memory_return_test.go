package proxy

import (
	"errors"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/sysmem"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// liveHeap is the heap the last collection found live: unlike HeapAlloc,
// it holds nothing allocated since, so it shows what a collection freed.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// runtimeRetained is what the Go runtime holds from the OS: everything it
// mapped less the heap pages it has released.
func runtimeRetained() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}

// TestReleasedMemoryReturnedToOS: once a large snapshot is released, the
// memory the process keeps (RSS; under -race what the runtime keeps) comes
// back within 10 s to used_memory + 32 MiB, without waiting for the
// runtime's two-minute forced collection.
func TestReleasedMemoryReturnedToOS(t *testing.T) {
	const held = 128 << 20
	p := newTestProxy(t, proxySetup{quiet: true})
	// A replaced snapshot, still arriving, so the monitor keeps it: 128 MiB
	// of blocks.
	sn := replbuf.NewSnapshot(replid.New(), 0, p.pool, time.Now())
	if err := sn.Append(redistest.RDBHead(held)); err != nil { // an RDB whose one value is held bytes long
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for range held / len(chunk) {
		if err := sn.Append(chunk); err != nil {
			t.Fatal(err)
		}
	}
	p.hist.Retire(sn, false)
	redistest.WaitFor(t, 10*time.Second, "the monitor to see the snapshot", func() bool {
		return p.mem.returner.High() >= held
	})
	t.Logf("holding: used_memory %d MiB, retained %d MiB", p.mem.report().UsedMemory>>20, retainedMemory()>>20)

	sn.Fail(errors.New("test: released")) // the monitor now releases it
	start := time.Now()
	var used, retained int64
	defer func() {
		if t.Failed() {
			t.Logf("last look: used_memory %d MiB, retained %d MiB", used>>20, retained>>20)
		}
	}()
	redistest.WaitFor(t, 10*time.Second, "memory returned to used_memory + 32 MiB", func() bool {
		used, retained = p.mem.report().UsedMemory, retainedMemory()
		return used < held && retained <= used+sysmem.ReturnMemoryDrop
	})
	t.Logf("released: used_memory %d MiB, retained %d MiB after %v", used>>20, retained>>20, time.Since(start).Round(time.Millisecond))

	// INFO memory shows RSS as Redis does.
	info := redistest.Dial(t, p.AddrString()).Info(t, "memory")
	rss, _ := strconv.ParseInt(info["used_memory_rss"], 10, 64)
	usedMemory, _ := strconv.ParseInt(info["used_memory"], 10, 64)
	ratio, err := strconv.ParseFloat(info["mem_fragmentation_ratio"], 64)
	if rss <= 0 || usedMemory <= 0 || err != nil || info["used_memory_rss_human"] == "" {
		t.Fatalf("INFO memory: used_memory_rss %q, used_memory_rss_human %q, mem_fragmentation_ratio %q",
			info["used_memory_rss"], info["used_memory_rss_human"], info["mem_fragmentation_ratio"])
	}
	if want := float64(rss) / float64(usedMemory); ratio < want*0.8 || ratio > want*1.25 {
		t.Fatalf("mem_fragmentation_ratio %.2f, want about used_memory_rss/used_memory = %.2f", ratio, want)
	}
}

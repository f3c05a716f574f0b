package proxy

import (
	"strconv"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// TestPSyncAheadWaits: a replica a little ahead of the proxy on the
// primary's replid (moved here from the primary, or from a peer proxy a
// moment ahead of this one) is told +CONTINUE and, once the stream reaches
// its offset, gets the bytes after it: no full sync, where Redis would give
// one. Further ahead than maxAhead is another history: a full sync.
func TestPSyncAheadWaits(t *testing.T) {
	more := make(chan string)
	h := startFakePrimary(t, func(hc *fakeLink) error {
		if err := hc.fullSync(); err != nil {
			return err
		}
		for s := range more {
			if err := hc.write(s); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	t.Cleanup(func() { close(more) })
	p := startProxy(t, append(h.replicaOf(), "--repl-timeout", "60")...)
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool { return p.up.State() == upstream.StateConnected })
	end := p.hist.Stream().Offset()

	const first, second = "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\n2\r\n"
	r := dialRawReplica(t, p, true)
	ahead := strconv.FormatInt(end+1+int64(len(first)), 10) // it holds first already
	if line, err := r.psync(linkReplID, ahead); err != nil || line != "+CONTINUE "+linkReplID {
		t.Fatalf("PSYNC %s %s, one command ahead of the proxy: %q %v; want +CONTINUE", linkReplID, ahead, line, err)
	}
	r.keep()
	more <- first + second
	r.waitReceived(t, second)

	far := strconv.FormatInt(end+1+int64(len(first)+len(second))+64<<20+1, 10)
	if err := dialRawReplica(t, p, true).fullSync(h, linkReplID, far); err != nil {
		t.Fatalf("further ahead than maxAhead: %v", err)
	}
	xc := redistest.Dial(t, p.AddrString())
	if got := xc.InfoInt(t, "stats", "sync_partial_ok"); got != 1 {
		t.Errorf("sync_partial_ok:%d, want 1", got)
	}
	if got := xc.InfoInt(t, "stats", "sync_full"); got != 1 {
		t.Errorf("sync_full:%d, want 1 (the replica too far ahead)", got)
	}
}

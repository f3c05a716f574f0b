package proxy

import (
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/listen"
)

// TestListenerSetSwapAndClose: the set, made with no server, serves every
// listener once Run's serve is given, serves those a swap puts in place and
// hands back those it displaced; once closed, it closes its listeners,
// serves nothing and hands a later swap's listeners back unused.
func TestListenerSetSwapAndClose(t *testing.T) {
	log := hclog.NewNullLogger()
	open := func() []listen.Listener {
		t.Helper()
		lns, _, err := listen.Open([]string{"127.0.0.1"}, 0, 0, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		return lns
	}
	first, second := open(), open()
	ls := newListenerSet(first, nil, log)
	if ls.plainAddr() != first[0].Ln.Addr() || ls.secureAddr() != nil {
		t.Fatalf("addresses %v, %v; want %v, none", ls.plainAddr(), ls.secureAddr(), first[0].Ln.Addr())
	}
	var mu sync.Mutex
	var served []net.Listener
	ls.serveAll(func(ln net.Listener, _ bool) {
		mu.Lock()
		served = append(served, ln)
		mu.Unlock()
	})
	displaced, ok := ls.swap(second)
	if !ok || len(displaced) != 1 || displaced[0].Ln != first[0].Ln {
		t.Fatalf("swap: %v, %v; want the first listener displaced", displaced, ok)
	}
	listen.CloseAll(displaced)
	if len(served) != 2 || served[0] != first[0].Ln || served[1] != second[0].Ln {
		t.Fatalf("served %v; want the first listener, then the second", served)
	}
	if ls.plainAddr() != second[0].Ln.Addr() {
		t.Fatalf("address after the swap %v, want %v", ls.plainAddr(), second[0].Ln.Addr())
	}
	ls.close()
	if _, err := second[0].Ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed set's listener: %v", err)
	}
	third := open()
	defer listen.CloseAll(third)
	if back, ok := ls.swap(third); ok || len(back) != 1 || back[0].Ln != third[0].Ln {
		t.Fatalf("swap after close: %v, %v; want the new listener back, unused", back, ok)
	}
	if len(served) != 2 || len(ls.inUse()) != 1 || ls.inUse()[0].Ln != second[0].Ln {
		t.Fatalf("after close: served %d, in use %v", len(served), ls.inUse())
	}
}

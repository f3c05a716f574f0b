package proxy

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
)

// fakeSupervisor records what the server tells it, in order.
type fakeSupervisor struct {
	mu     sync.Mutex
	events []string
}

func (f *fakeSupervisor) add(e string) {
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
}

func (f *fakeSupervisor) Ready(status string)  { f.add("ready: " + status) }
func (f *fakeSupervisor) Status(status string) { f.add("status: " + status) }
func (f *fakeSupervisor) Stopping()            { f.add("stopping") }

func (f *fakeSupervisor) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.events...)
}

// TestSupervisorLifecycle: Ready first, once the proxy answers; then the
// readiness as a status; Stopping once, on a graceful stop, and nothing
// after Run returned but what the stop itself sent.
func TestSupervisorLifecycle(t *testing.T) {
	sup := &fakeSupervisor{}
	p := newTestProxy(t, proxySetup{opts: Options{Supervisor: sup}})
	redistest.WaitFor(t, 5*time.Second, "Ready", func() bool { return len(sup.list()) > 0 })
	if ev := sup.list()[0]; ev != "ready: Ready to accept connections" {
		t.Fatalf("first event %q", ev)
	}
	c := p.dial(t)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("PING\r\n"))
	buf := make([]byte, 7)
	if n, _ := c.Read(buf); string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("PING after Ready: %q", buf[:n])
	}
	want := "status: Not ready: no upstream (replicaof no one); no sync with the primary has completed"
	redistest.WaitFor(t, 5*time.Second, "the readiness as a status", func() bool {
		return sup.list()[len(sup.list())-1] == want
	})
	p.Shutdown()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	stops := 0
	for _, ev := range sup.list()[1:] {
		switch {
		case ev == "stopping":
			stops++
		case !strings.HasPrefix(ev, "status: "):
			t.Errorf("event %q after Ready", ev)
		}
	}
	if stops != 1 {
		t.Errorf("%d Stopping in %q", stops, sup.list())
	}
}

// TestSupervisionStatus: supervision, made with no server, tells nothing
// before Ready, then a status only when its line changes, and Stopping
// once; with no supervisor it tells nothing at all.
func TestSupervisionStatus(t *testing.T) {
	sup := &fakeSupervisor{}
	ok, why, st := false, "no sync with the primary has completed", upstream.StateNone
	v := newSupervision(sup, func() (bool, string) { return ok, why }, func() upstream.State { return st })
	v.notifyStatus() // before Ready
	v.notifyReady()
	v.notifyStatus()
	v.notifyStatus() // unchanged
	ok, why, st = true, "upstream link up", upstream.StateConnected
	v.notifyStatus()
	v.notifyStopping()
	v.notifyStopping()
	want := []string{"ready: Ready to accept connections", "status: Not ready: no sync with the primary has completed",
		"status: Ready: upstream link up", "stopping"}
	if got := sup.list(); !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
	none := newSupervision(nil, func() (bool, string) { return true, "" }, func() upstream.State { return st })
	none.notifyReady()
	none.notifyStatus()
	none.notifyStopping()
}

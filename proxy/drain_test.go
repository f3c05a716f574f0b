package proxy

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// runDone returns the channel Run closes when it returns.
func (p *testProxy) runDone(t testing.TB) <-chan struct{} {
	t.Helper()
	done := p.life.running()
	if done == nil {
		t.Fatal("the proxy is not running")
	}
	return done
}

// drainSetup runs a primary, the proxy with shutdown-timeout, and one real
// replica of the proxy, in sync; then freezes the replica and writes 4 MiB,
// which the proxy receives and cannot send. It returns the primary's offset.
func drainSetup(t *testing.T, timeout string) (*testProxy, *redistest.Server, *redistest.Client, int64) {
	t.Helper()
	primary, pc := startPrimary(t)
	p, xc := startProxyOf(t, primary, "--shutdown-timeout", timeout)
	reps, rcs := redistest.StartReplicas(t, 1, p.AddrString())
	redistest.WaitSynced(t, pc, rcs...)
	reps[0].Pause()
	t.Cleanup(func() {
		if reps[0].Pid() != 0 {
			reps[0].Resume()
		}
	})
	pc.MustDo(t, "SET", "big", strings.Repeat("x", 4<<20))
	return p, reps[0], rcs[0], waitOffsetsEqual(t, pc, xc)
}

// TestShutdownDrainsReplicas: a replica that is behind when the graceful stop
// starts receives the whole stream, up to the primary's offset, before Run
// returns; the proxy stops accepting at once.
func TestShutdownDrainsReplicas(t *testing.T) {
	p, rep, rc, want := drainSetup(t, "30")
	done := p.runDone(t)
	p.Shutdown()
	redistest.WaitFor(t, 5*time.Second, "the listener closed", func() bool {
		c, err := net.DialTimeout("tcp", p.AddrString(), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	// A negative check: nothing happens when the drain decides to wait, so
	// the test gives it 30 of its polls (drainPoll) to return too early,
	// once the upstream link is gone and only the frozen replica holds it.
	redistest.WaitFor(t, 10*time.Second, "the upstream link ended", func() bool {
		return p.up.Status().DownSince != 0 // it was up until the stop
	})
	select {
	case <-done:
		t.Fatal("Run returned while the replica was behind")
	case <-time.After(30 * drainPoll):
	}
	rep.Resume()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run still running 15s after the replica resumed")
	}
	if got := rc.InfoInt(t, "replication", "master_repl_offset"); got != want {
		t.Errorf("the replica's offset after the stop is %d, want the primary's %d", got, want)
	}
	if !p.Log.Contains("every replica has the whole stream") {
		t.Error("the drain's end was not logged")
	}
}

// TestShutdownTimeout: a replica that stays behind holds the stop for
// shutdown-timeout, no longer; ending Run's context (a second signal) cuts
// the wait short.
func TestShutdownTimeout(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		p, _, _, _ := drainSetup(t, "1")
		done := p.runDone(t)
		start := time.Now()
		p.Shutdown()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run still running 10s after Shutdown with shutdown-timeout 1")
		}
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("Run returned after %v, before shutdown-timeout", d)
		}
		if !p.Log.Contains("shutdown-timeout reached") {
			t.Error("the timeout was not logged")
		}
	})
	t.Run("second signal", func(t *testing.T) {
		p, _, _, _ := drainSetup(t, "60")
		p.Shutdown()
		redistest.WaitFor(t, 10*time.Second, "the drain started", func() bool {
			return p.Log.Contains("shutting down: no new clients")
		})
		start := time.Now()
		if err := p.stop(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ending Run's context during the drain took %v", d)
		}
	})
}

// TestLifecycleOnItsOwn: the lifecycle, made with no server, runs the
// closers of what New made on a Close before Run, and refuses Run after
// it; Run starts once, and Close ends it and waits until it has returned.
// Shutdown's request is seen at once, however often it is made.
func TestLifecycleOnItsOwn(t *testing.T) {
	closed := 0
	var made undoStack
	made.push(func() { closed++ })
	never := newLifecycle(made, nil, nil, nil, nil, nil, nil)
	never.shutdown()
	never.shutdown()
	if !never.draining() {
		t.Fatal("no drain after Shutdown")
	}
	never.close()
	if closed != 1 {
		t.Fatalf("Close before Run ran the closers %d times, want 1", closed)
	}
	if never.begin(func() {}) {
		t.Fatal("Run began after Close")
	}

	l := newLifecycle(nil, nil, nil, nil, nil, nil, nil)
	if l.draining() || l.running() != nil {
		t.Fatal("a new lifecycle drains or runs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !l.begin(cancel) || l.begin(cancel) {
		t.Fatal("Run must begin once")
	}
	go func() {
		<-ctx.Done()
		l.ended()
	}()
	l.close()
	select {
	case <-l.running():
	default:
		t.Fatal("Close returned before Run did")
	}
}

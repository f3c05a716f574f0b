package snapshots

import (
	"context"
	"errors"
	"testing"

	"github.com/replproxy/replproxy/proxy/history"
)

// TestWorkBeforeRunAndAfterClose: a fetch planned before Run starts with it;
// one planned after Close is refused at once (history.ErrShuttingDown), the
// history told it never started; Close is idempotent and a closed Keeper
// does not run.
func TestWorkBeforeRunAndAfterClose(t *testing.T) {
	src := &fakeSource{connected: true}
	k := newTestKeeper(t, src)
	src.attempt = func(_ int, start func() error) error { return start() }
	plan, err := k.PlanFull()
	if err != nil || plan.Fetch == nil {
		t.Fatalf("PlanFull before Run: %v, fetch %v", err, plan.Fetch)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	<-plan.Fetch.Ready()
	if plan.Fetch.Err() != nil || plan.Fetch.Snapshot() == nil {
		t.Fatalf("the queued fetch: %v", plan.Fetch.Err())
	}
	waitFor(t, func() bool { return k.Counts().Fetches == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	k.Close()
	k.Close()
	if err := k.Run(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Close: %v, want %v", err, ErrClosed)
	}

	// A fetch planned after Close (in a history without a snapshot).
	k = newTestKeeper(t, src)
	k.Close()
	if _, err := k.PlanFull(); !errors.Is(err, history.ErrShuttingDown) {
		t.Fatalf("PlanFull after Close: %v, want %v", err, history.ErrShuttingDown)
	}
}

// TestCloseUndoesQueuedWork: work asked for before a Run that never comes
// is undone at Close: the fetch's waiters are refused.
func TestCloseUndoesQueuedWork(t *testing.T) {
	src := &fakeSource{connected: true}
	k := newTestKeeper(t, src)
	plan, err := k.PlanFull()
	if err != nil || plan.Fetch == nil {
		t.Fatalf("PlanFull: %v, fetch %v", err, plan.Fetch)
	}
	k.Close()
	<-plan.Fetch.Ready()
	if !errors.Is(plan.Fetch.Err(), history.ErrShuttingDown) {
		t.Fatalf("the queued fetch ended with %v, want %v", plan.Fetch.Err(), history.ErrShuttingDown)
	}
	if src.attempts != 0 {
		t.Fatalf("%d attempts by a Keeper that never ran", src.attempts)
	}
}

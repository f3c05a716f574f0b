package redistest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeTB records what the code under test logs and reports, and collects its cleanups
// so that a test can run them and inspect the result. Everything else (TempDir,
// Helper, Context) goes to the real test.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	logs     []string // guarded by mu
	failed   bool     // guarded by mu
	skipped  bool     // guarded by mu
	cleanups []func() // guarded by mu
}

// newFakeTB returns a fakeTB whose leftover cleanups also run when t ends, so that no
// server outlives t even if t fails early.
func newFakeTB(t *testing.T) *fakeTB {
	f := &fakeTB{TB: t}
	t.Cleanup(f.runCleanups)
	return f
}

// run calls fn(f) on its own goroutine, so that Fatal and Skip (runtime.Goexit) end
// only fn, and waits for it.
func (f *fakeTB) run(fn func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
}

func (f *fakeTB) log(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, s)
}

func (f *fakeTB) Log(args ...any)                 { f.log(fmt.Sprintln(args...)) }
func (f *fakeTB) Logf(format string, args ...any) { f.log(fmt.Sprintf(format, args...)) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.Logf(format, args...)
	f.mu.Lock()
	f.failed = true
	f.mu.Unlock()
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.Logf(format, args...)
	f.mu.Lock()
	f.skipped = true
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}
func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// runCleanups runs the collected cleanups, last first, each at most once.
func (f *fakeTB) runCleanups() {
	for {
		f.mu.Lock()
		n := len(f.cleanups)
		if n == 0 {
			f.mu.Unlock()
			return
		}
		fn := f.cleanups[n-1]
		f.cleanups = f.cleanups[:n-1]
		f.mu.Unlock()
		fn()
	}
}

func (f *fakeTB) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.logs, "\n")
}

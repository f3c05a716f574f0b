package upstream

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/replproxy/replproxy/replbuf"
)

// targetHost is a testHost whose primary the test names and changes.
type targetHost struct {
	*testHost
	mu   sync.Mutex
	addr string
}

func (h *targetHost) Target() Target {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Target{Addr: h.addr}
}

func (h *targetHost) retarget(addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addr = addr
}

// TestFetchLoop: a fetch's attempts that fail before the snapshot is handed
// out are retried (each counted) while it is wanted, from the same primary,
// and the loop lasts; a failure after the hand-out is returned, not retried;
// otherwise the loop gives up with a *FetchStopError saying why.
func TestFetchLoop(t *testing.T) {
	errAttempt := errors.New("attempt failed")
	cases := []struct {
		name     string
		fails    int  // attempts that fail before the hand-out, then one succeeds
		late     bool // the first attempt fails after the hand-out
		unwanted bool
		retarget bool // the primary changes during the first attempt
		cancel   bool // the loop's context ends during the first attempt
		attempts int
		stop     string // the FetchStopError's reason; "" for none
		err      error
	}{
		{name: "retried until it succeeds", fails: 2, attempts: 3},
		{name: "failed after the hand-out", late: true, attempts: 1, err: errAttempt},
		{name: "nobody waits", fails: 1, unwanted: true, attempts: 1, stop: "no replica waits"},
		{name: "replicaof changed", fails: 1, retarget: true, attempts: 1, stop: "replicaof changed"},
		{name: "server stopping", fails: 1, cancel: true, attempts: 1, stop: "server stopping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &targetHost{testHost: &testHost{st: replbuf.NewStream(0, &replbuf.Config{})}, addr: "127.0.0.1:6379"}
			t.Cleanup(func() { h.st.Close(nil) })
			l := New(h, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			attempts, failed := 0, 0
			err := l.FetchLoop(ctx, FetchJob{
				Attempt: func(context.Context) (bool, error) {
					attempts++
					if tc.retarget {
						h.retarget("127.0.0.1:6380")
					}
					if tc.cancel {
						cancel()
					}
					if tc.late {
						return true, errAttempt
					}
					if attempts <= tc.fails {
						return false, errAttempt
					}
					return true, nil
				},
				Wanted: func() bool { return !tc.unwanted },
				Failed: func() { failed++ },
			})
			if attempts != tc.attempts {
				t.Errorf("%d attempts, want %d", attempts, tc.attempts)
			}
			if want := min(tc.fails, tc.attempts) + btoi(tc.late); failed != want {
				t.Errorf("%d failures counted, want %d", failed, want)
			}
			var stop *FetchStopError
			switch {
			case tc.stop != "":
				if !errors.As(err, &stop) || stop.Reason != tc.stop || !errors.Is(err, errAttempt) {
					t.Fatalf("FetchLoop = %v, want a stop (%s) wrapping the last attempt's error", err, tc.stop)
				}
			case err != tc.err:
				t.Fatalf("FetchLoop = %v, want %v", err, tc.err)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/snapshots"
)

// TestRunStopsOnActorError: when one of Run's goroutines fails, the server
// stops: Run returns that goroutine's error without its context ending,
// the error is logged, and every other goroutine of the server has stopped
// by then (the listeners are closed, none is left running).
func TestRunStopsOnActorError(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// fail makes one of Run's goroutines fail as soon as it starts.
		fail func(*Server)
		want error
	}{
		{
			name: "snapshot keeper",
			// A Keeper closed before its Run refuses to run.
			fail: func(s *Server) { s.snaps.Close() },
			want: snapshots.ErrClosed,
		},
		{
			name: "monitoring server",
			args: []string{"--metrics-port", strconv.Itoa(redistest.FreePort(t))},
			// A listener closed under it ends its Serve with an error.
			fail: func(s *Server) { s.monitoring.Close() },
			want: net.ErrClosed,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leaks := goleak.IgnoreCurrent()
			p := newTestProxy(t, proxySetup{idle: true, args: tc.args})
			addr := p.AddrString()
			tc.fail(p.Server)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				cancel()
				<-done
				t.Fatalf("Run still running 10s after its %s failed", tc.name)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run returned %v, want %v", err, tc.want)
			}
			if !p.Log.Contains(tc.name) || !p.Log.Contains(tc.want.Error()) {
				t.Errorf("the %s's error is not in the log:\n%s", tc.name, p.Log)
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Error("still listening after Run returned")
			}
			goleak.VerifyNone(t, leaks)
		})
	}
}

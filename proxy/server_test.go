package proxy

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/streamlog"
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

// TestNewFailureClosesWhatItOpened: a New that fails after opening the
// listeners closes every one it opened: their ports are free again.
func TestNewFailureClosesWhatItOpened(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold takes what makes New fail: the metrics port, or dir.
		hold func(t *testing.T, metricsPort int, dir string)
		want error
	}{
		{
			name: "monitoring port taken",
			hold: func(t *testing.T, metricsPort int, _ string) {
				ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
			},
			want: syscall.EADDRINUSE,
		},
		{
			name: "dir locked",
			hold: func(t *testing.T, _ int, dir string) {
				l, err := streamlog.LockDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			},
			want: streamlog.ErrDirLocked,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, metricsPort, dir := freePort(t), freePort(t), t.TempDir()
			tc.hold(t, metricsPort, dir)
			cfg, err := config.Parse([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
				"--metrics-port", strconv.Itoa(metricsPort), "--dir", dir})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := New(cfg, Options{Logger: hclog.NewNullLogger()})
			if !errors.Is(err, tc.want) {
				if srv != nil {
					srv.Close()
				}
				t.Fatalf("New: %v, want %v", err, tc.want)
			}
			ports := []int{port}
			if tc.want != syscall.EADDRINUSE {
				ports = append(ports, metricsPort)
			}
			for _, p := range ports {
				ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
				if err != nil {
					t.Fatalf("port %d after New failed: %v", p, err)
				}
				ln.Close()
			}
		})
	}
}

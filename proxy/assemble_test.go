package proxy

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/streamlog"
)

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

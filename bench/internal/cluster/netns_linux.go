//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// NamespaceDialer dials from inside the named network namespace (one that
// `ip netns add` made, under /run/netns): the harness runs in its own
// namespace and reaches the servers of another only through a socket
// created there. The calling goroutine's thread enters the namespace for
// the socket(2) and connect(2) of one dial and goes back; a socket stays in
// the namespace it was created in, so the connection works from any thread
// afterwards.
func NamespaceDialer(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, err := os.Open(filepath.Join("/run/netns", name))
		if err != nil {
			return nil, fmt.Errorf("cluster: namespace %s: %w", name, err)
		}
		defer target.Close()
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("cluster: own namespace: %w", err)
		}
		defer home.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("cluster: enter namespace %s: %w", name, err)
		}
		conn, dialErr := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// NB: the thread stays locked to this goroutine, so that no
			// other goroutine runs on a thread in the wrong namespace.
			if conn != nil {
				conn.Close()
			}
			return nil, fmt.Errorf("cluster: leave namespace %s: %w", name, err)
		}
		runtime.UnlockOSThread()
		return conn, dialErr
	}
}

//go:build !(linux && (amd64 || arm64))

package netns

import (
	"context"
	"errors"
	"net"
)

// errNotLinux is what the namespace operations return where setns is not wired
// (off Linux, or on a Linux architecture whose syscall number is not listed).
var errNotLinux = errors.New("netns: joining a network namespace needs Linux on amd64 or arm64")

// Dial fails here (see errNotLinux).
func (n Namespace) Dial(network, address string) (net.Conn, error) { return nil, errNotLinux }

// DialContext fails here (see errNotLinux).
func (n Namespace) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return nil, errNotLinux
}

// Listen fails here (see errNotLinux).
func (n Namespace) Listen(network, address string) (net.Listener, error) { return nil, errNotLinux }

// disableIPv6 fails here (see errNotLinux).
func (n Namespace) disableIPv6() error { return errNotLinux }

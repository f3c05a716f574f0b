//go:build !linux

package cluster

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

var sigterm = os.Interrupt

func sysProcAttr() *syscall.SysProcAttr { return nil }

// NamespaceDialer needs Linux's network namespaces.
func NamespaceDialer(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("cluster: network namespaces need Linux")
	}
}

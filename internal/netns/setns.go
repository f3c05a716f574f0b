//go:build linux && (amd64 || arm64)

package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

// Dial connects to address from inside n, as net.Dial does.
func (n Namespace) Dial(network, address string) (net.Conn, error) {
	return n.DialContext(context.Background(), network, address)
}

// DialContext connects to address from inside n, as net.Dialer.DialContext does
// (the signature lets it stand in for a dialer's).
func (n Namespace) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	var conn net.Conn
	err := n.do(func() error {
		var d net.Dialer
		var err error
		conn, err = d.DialContext(ctx, network, address)
		return err
	})
	return conn, err
}

// Listen listens on address inside n, as net.Listen does.
func (n Namespace) Listen(network, address string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() error {
		var err error
		l, err = net.Listen(network, address)
		return err
	})
	return l, err
}

// do runs f on an OS thread that has joined n, and then returns the thread to
// the namespace it came from. A socket takes the namespace of the thread that
// creates it and keeps it, so what f creates stays in n.
//
// NB: if the thread cannot return, the goroutine ends still locked to it, so the
// runtime retires the thread (or, for the main thread, parks it) instead of giving
// it, still in n, to another goroutine. No child process may be started from f:
// Pdeathsig would kill it with the thread.
func (n Namespace) do(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: open own namespace: %w", err)
			return
		}
		defer home.Close()
		target, err := os.Open(filepath.Join(runDir, n.Name))
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: open %s: %w", n.Name, err)
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: join %s: %w", n.Name, err)
			return
		}
		ferr := f()
		if err := setns(home); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", n.Name, err))
			return // still locked: see the NB above
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// setns moves the calling thread into the network namespace of fd.
func setns(fd *os.File) error {
	if _, _, errno := syscall.RawSyscall(sysSetns, fd.Fd(), syscall.CLONE_NEWNET, 0); errno != 0 {
		return errno
	}
	return nil
}

// disableIPv6 turns IPv6 off for the interfaces created in n from now on (and for
// all of them): the sysctl files under /proc/sys/net are those of the namespace of
// the thread that opens them. A kernel without IPv6 has nothing to turn off.
func (n Namespace) disableIPv6() error {
	return n.do(func() error {
		for _, name := range []string{"default", "all"} {
			path := "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6"
			err := os.WriteFile(path, []byte("1"), 0)
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("netns: disable ipv6 in %s: %w", n.Name, err)
			}
		}
		return nil
	})
}

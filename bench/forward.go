package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
)

// The forwarder is the floor of a relay's delay and CPU: a process that
// copies the bytes of every connection to it to a connection it makes
// upstream, and back, and does nothing else. On Linux it is one thread's
// event loop of raw system calls (forward_linux.go): per packet one
// epoll_wait, one read and one write, the least an event-driven relay
// such as redis-server makes, with no language runtime's poller or
// scheduler between them. A replica attached to the primary through it
// pays one more hop on loopback and one more process's wake-up per
// packet, which any relay pays; what a relay adds beyond the forwarder is
// its own work. The harness runs itself as the forwarder (forwardFlag
// first).

// forwardFlag, as the first argument, makes the harness a forwarder.
const forwardFlag = "-forward-relay"

// forwardMain runs the forwarder with args (after forwardFlag) until it is
// killed: each "-forward listen=upstream" is a listener whose connections
// go to upstream.
func forwardMain(args []string) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	var pairs []string
	fs.Func("forward", "listen=upstream: host:port to listen on, and to forward each connection to", func(v string) error {
		pairs = append(pairs, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(pairs) == 0 {
		return errors.New("forward: no -forward listen=upstream")
	}
	var routes []forwardRoute
	for _, pair := range pairs {
		listen, upstream, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("forward: %q is not listen=upstream", pair)
		}
		routes = append(routes, forwardRoute{listen, upstream})
	}
	return forwardServe(routes)
}

// A forwardRoute is one listener and the upstream its connections go to.
type forwardRoute struct{ listen, upstream string }

// forwardCopy serves routes with a goroutine pair per connection
// (io.Copy each way): the forwarder where forward_linux.go's event loop is
// not built.
func forwardCopy(routes []forwardRoute) error {
	errs := make(chan error, len(routes))
	for _, r := range routes {
		listen, upstream := r.listen, r.upstream
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					errs <- fmt.Errorf("forward: %w", err)
					return
				}
				go forwardConn(c, upstream)
			}
		}()
	}
	return <-errs
}

func forwardConn(c net.Conn, upstream string) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(c, u)
		c.Close()
		close(done)
	}()
	io.Copy(u, c)
	u.Close()
	<-done
}

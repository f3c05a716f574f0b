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
// event loop of raw system calls (forward_cgo.go): per packet one
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
	goLoop := fs.Bool("go", false, "copy with a Go read and write loop, a goroutine each way, instead of the event loop")
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
	if *goLoop {
		return forwardCopy(routes, readWrite)
	}
	return forwardServe(routes)
}

// forwardGoKind is how the report names the forwarder under -floor go: the
// floor of a relay written in Go, whose reads and writes go through the Go
// runtime's poller and scheduler, as the proxy's do.
const forwardGoKind = "a Go program's read and write loop, a goroutine each way (`net.Conn` Read, then Write of what it read; no splice), through the Go runtime's poller and scheduler as the proxy's reads and writes are"

// readWrite copies src to dst by reads into one buffer and writes of what
// each read gave, until either fails: a Go relay's least work per packet.
func readWrite(dst, src net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// spliced copies src to dst with io.Copy, which the kernel splices
// between two TCP sockets.
func spliced(dst, src net.Conn) { io.Copy(dst, src) }

// A forwardRoute is one listener and the upstream its connections go to.
type forwardRoute struct{ listen, upstream string }

// forwardCopy serves routes with a goroutine pair per connection, each
// copying one way with cp: spliced, the forwarder where forward_cgo.go's
// event loop is not built; readWrite, the Go floor (-floor go).
func forwardCopy(routes []forwardRoute, cp func(dst, src net.Conn)) error {
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
				go forwardConn(c, upstream, cp)
			}
		}()
	}
	return <-errs
}

func forwardConn(c net.Conn, upstream string, cp func(dst, src net.Conn)) {
	defer c.Close()
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "forward:", err)
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		cp(c, u)
		c.Close()
		close(done)
	}()
	cp(u, c)
	u.Close()
	<-done
}

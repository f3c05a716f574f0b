package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

// The forwarder is the floor of a relay's delay: a process that copies the
// bytes of every connection to it to a connection it makes upstream, and
// back, and does nothing else (Go's io.Copy between TCP sockets splices
// them in the kernel). A replica attached to the primary through it pays
// one more hop on loopback and one more process's wake-up per packet,
// which any relay pays; what a relay adds beyond the forwarder is its own
// work. The harness runs itself as the forwarder (forwardFlag first).

// forwardFlag, as the first argument, makes the harness a forwarder.
const forwardFlag = "-forward-relay"

// forwardMain runs the forwarder with args (after forwardFlag) until it is
// killed.
func forwardMain(args []string) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	listen := fs.String("listen", "", "host:port to listen on")
	upstream := fs.String("upstream", "", "host:port to forward each connection to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *listen == "" || *upstream == "" {
		return errors.New("forward: -listen and -upstream are required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		go forwardConn(c, *upstream)
	}
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

package main

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// TestForwardServe sends bytes both ways through each forwarder (the event
// loop, the Go floor's read and write loop, io.Copy's splice) to an echo
// server, and sees the forwarder close a pair when one end closes.
func TestForwardServe(t *testing.T) {
	for _, f := range []struct {
		name  string
		serve func([]forwardRoute) error
	}{
		{"event-loop", forwardServe},
		{"go-read-write", func(r []forwardRoute) error { return forwardCopy(r, readWrite) }},
		{"spliced", func(r []forwardRoute) error { return forwardCopy(r, spliced) }},
	} {
		t.Run(f.name, func(t *testing.T) { testForward(t, f.serve) })
	}
}

func testForward(t *testing.T, serve func([]forwardRoute) error) {
	echo, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	// A free port for the forwarder: taken and given back.
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	// The loop never returns but on a failed listener; its goroutine ends
	// with the test binary.
	failed := make(chan error, 1)
	go func() { failed <- serve([]forwardRoute{{addr, echo.Addr().String()}}) }()

	var c net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err = net.Dial("tcp4", addr); err == nil {
			break
		}
		select {
		case err := <-failed:
			t.Fatalf("forwarder: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial the forwarder: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: many reads and writes
	go c.Write(want)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes that came back differ from those sent")
	}
	// The echo server's end closes: the forwarder closes the client's.
	echo.Close()
	c.(*net.TCPConn).CloseWrite()
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("after the upstream closed: read %d, %v; want EOF", n, err)
	}
}

package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// TestRawReadConn: a TCP connection read by raw reads gives what its peer
// wrote, a read deadline's timeout, and the end when the peer closes;
// writes and the descriptor are the socket's. A pipe is left as it is.
func TestRawReadConn(t *testing.T) {
	peer, conn := redistest.TCPPair(t)
	c := RawReadConn(conn)
	if c == net.Conn(conn) {
		t.Fatal("a TCP connection was not wrapped")
	}
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	c.SetReadDeadline(time.Time{})
	if _, err := c.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 4)
	if _, err := io.ReadFull(peer, back); err != nil || string(back) != "back" {
		t.Fatalf("peer read %q, %v", back, err)
	}
	if sc, ok := c.(syscall.Conn); !ok {
		t.Error("no SyscallConn")
	} else if _, err := sc.SyscallConn(); err != nil {
		t.Error(err)
	}
	peer.Close()
	if n, err := c.Read(got); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if RawReadConn(a) != a {
		t.Error("a pipe was wrapped")
	}
}

package upstream

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/wire"
)

// TestFlushingSourceFlushesBeforeWaiting: bytes published while the
// primary's socket has more to read are held; the host is told of them
// once a read finds the socket empty, before it waits, or at once past
// flushBudget; the read deadline and EOF still end reads.
func TestFlushingSourceFlushesBeforeWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	primary, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var told atomic.Int64
	s := newFlushingSource(wire.NewCommandReader(conn, wire.Limits{}), conn, func() { told.Add(1) })
	if s == nil {
		t.Fatal("no flushing source on a TCP socket")
	}
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if newFlushingSource(nil, p, nil) != nil {
		t.Fatal("a pipe got a flushing source")
	}
	if _, err := primary.Write(make([]byte, 3000)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	// The first reads find bytes: what they publish is held.
	for got := 0; got < 3000; {
		n, err := s.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got += n
		s.published(int64(n))
	}
	if told.Load() != 0 {
		t.Fatalf("told %d times while the socket had more", told.Load())
	}
	// The next read finds the socket empty: it tells the host, then waits.
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(buf)
		done <- err
	}()
	redistest.WaitFor(t, 10*time.Second, "the host told before the read waits", func() bool { return told.Load() == 1 })
	primary.Write([]byte("x"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Past the budget the host is told at once.
	s.published(flushBudget)
	if told.Load() != 2 {
		t.Fatalf("told %d times after flushBudget held, want 2", told.Load())
	}
	// The read deadline still applies, as a timeout.
	conn.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	var ne net.Error
	if _, err := s.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	conn.SetReadDeadline(time.Time{})
	primary.Close()
	if _, err := s.Read(buf); err != io.EOF {
		t.Fatalf("read after the primary closed: %v, want EOF", err)
	}
}

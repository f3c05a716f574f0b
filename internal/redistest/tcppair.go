package redistest

import (
	"net"
	"testing"
)

// TCPPair returns the two ends of a loopback TCP connection: the one that
// dialed and the one accepted. Both are closed when the test ends.
func TCPPair(t testing.TB) (dialed, accepted *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		c   *net.TCPConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := ln.AcceptTCP()
		ch <- result{c, err}
	}()
	dialed, err = net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dialed.Close() })
	acc := <-ch
	if acc.err != nil {
		t.Fatal(acc.err)
	}
	t.Cleanup(func() { acc.c.Close() })
	return dialed, acc.c
}

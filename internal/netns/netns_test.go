package netns

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// transferTimeout bounds every wait of these tests on data crossing the WAN.
const transferTimeout = 30 * time.Second

// connect returns both ends of a TCP connection from A to a listener on B.
func connect(t *testing.T, p *Pair) (a, b net.Conn) {
	t.Helper()
	l, err := p.B.Listen("tcp", net.JoinHostPort(p.AddrB, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	a, err = p.A.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b = <-accepted
	if b == nil {
		t.FailNow()
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

// TestPairShape checks the namespaces, addresses and qdiscs of two pairs built at
// once, and that Close deletes them.
func TestPairShape(t *testing.T) {
	p1 := NewPair(t, Options{RateBitsPerSec: 10e6})
	p2 := NewPair(t, Options{})
	if p1.A.Name == p2.A.Name || p1.B.Name == p2.B.Name || p1.AddrA == p2.AddrA {
		t.Fatalf("pairs share names or addresses: %+v %+v", p1, p2)
	}
	out, err := output("ip", "-n", p1.B.Name, "-o", "addr", "show", "dev", vethB)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, p1.AddrB+"/30") {
		t.Errorf("%s in %s: %q, want %s/30", vethB, p1.B.Name, out, p1.AddrB)
	}
	for _, end := range []struct{ ns, dev string }{{p1.A.Name, vethA}, {p1.B.Name, vethB}} {
		out, err := output("tc", "-n", end.ns, "qdisc", "show", "dev", end.dev, "root")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "tbf") || !strings.Contains(out, "rate 10Mbit") {
			t.Errorf("%s in %s: qdisc %q, want tbf rate 10Mbit", end.dev, end.ns, out)
		}
	}
	if err := p1.SetRate(0); err != nil {
		t.Fatal(err)
	}
	if out, _ := output("tc", "-n", p1.A.Name, "qdisc", "show", "dev", vethA, "root"); strings.Contains(out, "tbf") {
		t.Errorf("after SetRate(0): qdisc %q", out)
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{p1.A.Name, p1.B.Name} {
		if _, err := os.Stat(filepath.Join(runDir, ns)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("namespace %s after Close: %v", ns, err)
		}
	}
	if err := p1.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestCommandAndClose runs processes inside the namespaces and checks that Close
// kills one left running.
func TestCommandAndClose(t *testing.T) {
	p := NewPair(t, Options{})
	out, err := p.A.Command("ip", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), p.AddrA) || strings.Contains(string(out), p.AddrB) {
		t.Errorf("addresses seen inside %s: %s", p.A.Name, out)
	}
	cmd := p.B.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Error("sleep exited cleanly, want killed")
		}
	case <-time.After(transferTimeout):
		t.Fatal("sleep still running after Close")
	}
}

// TestCountersAndRate sends 4 MB from A to B through a 40 Mbit/s WAN: the counters
// see them once (plus headers), and the transfer is not faster than the rate allows
// (the limit holds; how close to it the link comes is BenchmarkWAN's to measure).
func TestCountersAndRate(t *testing.T) {
	const rate, size = 40e6, 4 << 20
	p := NewPair(t, Options{RateBitsPerSec: rate})
	a, b := connect(t, p)
	a0, b0, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	go func() {
		if _, err := a.Write(make([]byte, size)); err != nil {
			t.Error(err)
		}
	}()
	b.SetReadDeadline(time.Now().Add(transferTimeout))
	if _, err := io.ReadFull(b, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	a1, b1, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if sent := a1 - a0; sent < size || sent > size*11/10 {
		t.Errorf("A to B counted %d bytes for %d sent", sent, size)
	}
	if acks := b1 - b0; acks <= 0 || acks > size/10 {
		t.Errorf("B to A counted %d bytes (acknowledgements only)", acks)
	}
	// The bucket and the queue may pass up to 64 KiB + 100 ms ahead of the rate.
	fastest := time.Duration(float64(size-minBurst) * 8 / rate * float64(time.Second))
	if elapsed < fastest-queueTime {
		t.Errorf("%d bytes crossed a %v bit/s WAN in %v: faster than the rate", size, rate, elapsed)
	}
	t.Logf("%d bytes in %v: %.1f Mbit/s through a %.0f Mbit/s WAN", size, elapsed, float64(size)*8/elapsed.Seconds()/1e6, rate/1e6)
}

// TestCutRestore cuts the WAN under a live connection: nothing crosses while cut, a
// new connection cannot be made, and the old connection carries on once restored.
func TestCutRestore(t *testing.T) {
	p := NewPair(t, Options{RateBitsPerSec: 100e6})
	a, b := connect(t, p)
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	if err := p.Cut(); err != nil {
		t.Fatalf("second Cut: %v", err)
	}
	a0, _, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write([]byte("during the cut")); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := b.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read across a cut WAN: %d bytes, %v", n, err)
	}
	// A cut WAN drops the SYN silently: the dial times out rather than being refused.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var ne net.Error
	if c, err := p.B.DialContext(ctx, "tcp", net.JoinHostPort(p.AddrA, "1")); err == nil {
		c.Close()
		t.Fatal("dial across a cut WAN succeeded")
	} else if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("dial across a cut WAN: %v, want a timeout", err)
	}
	if a1, _, err := p.Counters(); err != nil || a1 != a0 {
		t.Errorf("A to B counter moved while cut: %d to %d (%v)", a0, a1, err)
	}
	// Traffic inside a namespace does not cross the WAN and is not cut.
	l, err := p.A.Listen("tcp", net.JoinHostPort(p.AddrA, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if c, err := p.A.Dial("tcp", l.Addr().String()); err != nil {
		t.Errorf("dial inside a region while cut: %v", err)
	} else {
		c.Close()
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if err := p.Restore(); err != nil {
		t.Fatalf("second Restore: %v", err)
	}
	if _, err := a.Write([]byte(" and after")); err != nil {
		t.Fatal(err)
	}
	want := []byte("during the cut and after")
	got := make([]byte, len(want))
	b.SetReadDeadline(time.Now().Add(transferTimeout))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after Restore read %q, %v; want %q", got, err, want)
	}
}

// BenchmarkWAN measures the throughput of one TCP connection from A to B through a
// 100 Mbit/s WAN (tbf with the default bucket and queue), in Mbit/s.
func BenchmarkWAN(b *testing.B) {
	const rate, size = 100e6, 8 << 20
	p := NewPair(b, Options{RateBitsPerSec: rate})
	l, err := p.B.Listen("tcp", net.JoinHostPort(p.AddrB, "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	buf := make([]byte, size)
	b.SetBytes(size)
	var elapsed time.Duration
	for b.Loop() {
		c, err := p.A.Dial("tcp", l.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		// Half-close and wait for the receiver's close: every byte has arrived.
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(transferTimeout))
		io.Copy(io.Discard, c)
		elapsed += time.Since(start)
		c.Close()
	}
	b.ReportMetric(float64(size)*8*float64(b.N)/elapsed.Seconds()/1e6, "Mbit/s")
}

// TestCutFlow: a cut flow black-holes the connections between one address
// and one port of another inside a namespace, established and new, and
// nothing else: the same port from another address, and the same address
// to another port, carry on; after RestoreFlows the stalled connection
// delivers what was written meanwhile.
func TestCutFlow(t *testing.T) {
	p := NewPair(t, Options{})
	src := strings.TrimSuffix(p.AddrA, ".1") + ".5"
	if err := p.A.AddLocalAddr(src); err != nil {
		t.Fatal(err)
	}
	l, err := p.A.Listen("tcp", net.JoinHostPort(p.AddrA, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := p.A.Listen("tcp", net.JoinHostPort(p.AddrA, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	accepted := make(chan net.Conn, 8)
	for _, ln := range []net.Listener{l, other} {
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
				accepted <- c
			}
		}()
	}
	dialFrom := func(from string, to net.Addr, timeout time.Duration) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: timeout}
		var c net.Conn
		err := p.A.do(func() error {
			var err error
			c, err = d.Dial("tcp", to.String())
			return err
		})
		return c, err
	}
	a, err := dialFrom(src, l.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := <-accepted
	port := l.Addr().(*net.TCPAddr).Port
	for range 2 { // a second cut does nothing
		if err := p.A.CutFlow(src, p.AddrA, port); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Write([]byte("during the cut")); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := b.Read(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read across a cut flow: %d bytes, %v", n, err)
	}
	if c, err := dialFrom(src, l.Addr(), 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("a new connection across the cut flow succeeded")
	}
	for name, to := range map[string]struct {
		from string
		addr net.Addr
	}{"another address": {p.AddrA, l.Addr()}, "another port": {src, other.Addr()}} {
		c, err := dialFrom(to.from, to.addr, time.Second)
		if err != nil {
			t.Errorf("%s while the flow is cut: %v", name, err)
			continue
		}
		c.Close()
		<-accepted
	}
	for range 2 { // a second restore does nothing
		if err := p.A.RestoreFlows(); err != nil {
			t.Fatal(err)
		}
	}
	want := []byte("during the cut")
	got := make([]byte, len(want))
	b.SetReadDeadline(time.Now().Add(transferTimeout))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after RestoreFlows read %q, %v; want %q", got, err, want)
	}
}

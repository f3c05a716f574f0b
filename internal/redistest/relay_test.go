package redistest

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line it reads with the line upper-cased, until
// the client closes.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := io.WriteString(c, strings.ToUpper(sc.Text())+"\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// relayClient dials the relay and returns a function that sends a line and
// returns the answer ("" once the connection ended).
func relayClient(t *testing.T, r *Relay) (ask func(string) string, conn net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	return func(s string) string {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, s+"\n"); err != nil {
			return ""
		}
		line, _ := br.ReadString('\n')
		return strings.TrimSuffix(line, "\n")
	}, c
}

// TestRelay: each connection's bytes pass both ways; the target's go
// through the RelayDown of the connection's number, which here cuts the
// second connection after its first answer, counted as a fault; DropAll
// closes the open connections and the relay accepts new ones.
func TestRelay(t *testing.T) {
	r := StartRelay(t, "127.0.0.1:0", echoServer(t), func(n int, dst io.Writer, src io.Reader) bool {
		if n != 2 {
			io.Copy(dst, src)
			return false
		}
		line, err := bufio.NewReader(src).ReadString('\n')
		if err == nil {
			io.WriteString(dst, line)
		}
		return true
	})
	first, _ := relayClient(t, r)
	if got := first("hello"); got != "HELLO" {
		t.Fatalf("first connection: %q, want HELLO", got)
	}
	second, _ := relayClient(t, r)
	if got := second("one"); got != "ONE" {
		t.Fatalf("second connection's first answer: %q, want ONE", got)
	}
	if got := second("two"); got != "" {
		t.Fatalf("second connection after the cut: %q, want nothing", got)
	}
	if got := first("still"); got != "STILL" {
		t.Fatalf("first connection after the other's cut: %q", got)
	}
	r.DropAll()
	if got := first("dropped"); got != "" {
		t.Fatalf("first connection after DropAll: %q, want nothing", got)
	}
	third, _ := relayClient(t, r)
	if got := third("again"); got != "AGAIN" {
		t.Fatalf("a connection after DropAll: %q, want AGAIN", got)
	}
	if accepted, faults := r.Stats(); accepted != 3 || faults != 1 {
		t.Errorf("Stats() = %d accepted, %d faults; want 3 and 1", accepted, faults)
	}
}

// TestRelayUnreachableTarget: a connection whose target refuses is closed
// at once.
func TestRelayUnreachableTarget(t *testing.T) {
	r := StartRelay(t, "127.0.0.1:0", "127.0.0.1:"+strconv.Itoa(FreePort(t)), nil)
	_, c := relayClient(t, r)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read from a relay without a target: %d bytes, %v; want EOF", n, err)
	}
}

package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// This file holds a raw replica (rawReplica: a TCP client that speaks PSYNC
// to the proxy and reads what comes back byte for byte) and the proxy the
// fake primary (helpers_fakeprimary_test.go) feeds. Together they drive a
// running proxy through what Redis never sends, and through streams the
// test writes by hand.

// startHostileProxy runs a proxy replicating from h with a 1 s repl-timeout
// and the smallest backlog, and waits for its link to be up.
func startHostileProxy(t testing.TB, h *fakePrimary, args ...string) *testProxy {
	t.Helper()
	p := startProxy(t, append(append(h.replicaOf(), "--repl-timeout", "1", "--repl-backlog-size", "16kb"), args...)...)
	redistest.WaitFor(t, 10*time.Second, "proxy link up", func() bool { return p.up.State() == upstream.StateConnected })
	return p
}

// waitSnapshotUnservable waits until the backlog no longer holds the byte
// after the proxy's snapshot, so that a full sync needs a fetch.
func waitSnapshotUnservable(t testing.TB, p *testProxy) {
	t.Helper()
	redistest.WaitFor(t, 10*time.Second, "snapshot out of the backlog", func() bool {
		sn := p.hist.Newest()
		if sn == nil {
			return true
		}
		c, err := p.hist.Stream().Attach(sn.Offset() + 1)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
}

// fetchInFlight reports whether the proxy has a snapshot fetch in flight.
func fetchInFlight(p *testProxy) bool {
	f, _ := p.hist.InFlight()
	return f != nil
}

// rawReplica is a replica of the proxy spoken byte for byte.
type rawReplica struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader

	// kept is what keep read in the background.
	kept struct {
		sync.Mutex
		b []byte
	}
}

// newRawReplica connects to the proxy and says nothing yet.
func newRawReplica(t testing.TB, p *testProxy) *rawReplica {
	t.Helper()
	c := p.dial(t)
	return &rawReplica{t: t, conn: c, br: bufio.NewReader(c)}
}

// dialRawReplica connects to the proxy and says REPLCONF listening-port and,
// if capaEOF, REPLCONF capa eof capa psync2 (else only capa psync2).
func dialRawReplica(t testing.TB, p *testProxy, capaEOF bool) *rawReplica {
	t.Helper()
	r := newRawReplica(t, p)
	capa := []string{"REPLCONF", "capa", "psync2"}
	if capaEOF {
		capa = []string{"REPLCONF", "capa", "eof", "capa", "psync2"}
	}
	for _, cmd := range [][]string{{"REPLCONF", "listening-port", "6380"}, capa} {
		if err := r.send(cmd...); err != nil {
			t.Fatal(err)
		}
		if line, err := r.readLine(); err != nil || line != "+OK" {
			t.Fatalf("%q: %q %v", cmd, line, err)
		}
	}
	return r
}

func (r *rawReplica) send(args ...string) error {
	r.conn.SetWriteDeadline(time.Now().Add(fakeIOTimeout))
	_, err := r.conn.Write(wire.AppendCommand(nil, args...))
	return err
}

// readLine reads one line without its CRLF: "" for a keepalive newline.
func (r *rawReplica) readLine() (string, error) {
	r.conn.SetReadDeadline(time.Now().Add(fakeIOTimeout))
	line, err := r.br.ReadString('\n')
	if err != nil {
		return line, err
	}
	return strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), nil
}

// psync sends PSYNC and returns the first line of the answer that is not a
// keepalive newline.
func (r *rawReplica) psync(replID, offset string) (string, error) {
	if err := r.send("PSYNC", replID, offset); err != nil {
		return "", err
	}
	return r.reply()
}

// reply returns the next line that is not a keepalive newline.
func (r *rawReplica) reply() (string, error) {
	for {
		line, err := r.readLine()
		if err != nil || line != "" {
			return line, err
		}
	}
}

// payload reads a sync payload, either form, after keepalive newlines.
func (r *rawReplica) payload() ([]byte, error) {
	header, err := r.reply()
	if err != nil {
		return nil, fmt.Errorf("payload header: %w", err)
	}
	size, mark, err := upstream.ParsePayloadHeader(header)
	if err != nil {
		return nil, err
	}
	r.conn.SetReadDeadline(time.Now().Add(fakeIOTimeout))
	if mark == nil {
		b := make([]byte, size)
		_, err := io.ReadFull(r.br, b)
		return b, err
	}
	var b []byte
	for !bytes.HasSuffix(b, mark) {
		c, err := r.br.ReadByte()
		if err != nil {
			return b, err
		}
		b = append(b, c)
	}
	return b[:len(b)-len(mark)], nil
}

// fullSync checks that the answer to PSYNC ? -1 (or to a PSYNC that cannot
// continue) is a full sync of the primary's replid and RDB.
func (r *rawReplica) fullSync(h *fakePrimary, replID, offset string) error {
	line, err := r.psync(replID, offset)
	if err != nil {
		return fmt.Errorf("PSYNC %s %s: %w", replID, offset, err)
	}
	if f := strings.Fields(line); len(f) != 3 || f[0] != "+FULLRESYNC" || f[1] != h.replID {
		return fmt.Errorf("PSYNC %s %s answered %q, want +FULLRESYNC %s <offset>", replID, offset, line, h.replID)
	}
	rdb, err := r.payload()
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if !bytes.Equal(rdb, h.rdb) {
		return fmt.Errorf("payload of %d bytes, want the primary's %d", len(rdb), len(h.rdb))
	}
	return nil
}

// rest reads until the proxy hangs up and returns what it sent.
func (r *rawReplica) rest() (string, error) {
	r.conn.SetReadDeadline(time.Now().Add(fakeIOTimeout))
	b, err := io.ReadAll(r.br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return string(b), fmt.Errorf("the proxy did not hang up: %w", err)
	}
	return string(b), nil
}

// attachRawReplica connects to the proxy and, saying nothing before,
// continues its stream at off with PSYNC <linkReplID> <off>; from then on it
// keeps every byte the proxy relays, for received.
func attachRawReplica(t testing.TB, p *testProxy, off int64) *rawReplica {
	t.Helper()
	r := newRawReplica(t, p)
	if err := r.send("PSYNC", linkReplID, itoa(off)); err != nil {
		t.Fatal(err)
	}
	if line, err := r.readLine(); err != nil || !strings.HasPrefix(line, "+CONTINUE") {
		t.Fatalf("PSYNC %s %d answered %q, %v; want +CONTINUE", linkReplID, off, line, err)
	}
	r.keep()
	return r
}

// keep reads everything the proxy sends from now on, with no deadline, until
// the connection ends; the test's cleanup closes it and waits.
func (r *rawReplica) keep() {
	r.conn.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	r.t.Cleanup(func() { r.conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := r.br.Read(buf)
			r.kept.Lock()
			r.kept.b = append(r.kept.b, buf[:n]...)
			r.kept.Unlock()
			if err != nil {
				return
			}
		}
	}()
}

// received returns what keep has read so far.
func (r *rawReplica) received() []byte {
	r.kept.Lock()
	defer r.kept.Unlock()
	return bytes.Clone(r.kept.b)
}

// waitReceived waits until keep has read as many bytes as want, then checks
// that they are want.
func (r *rawReplica) waitReceived(t testing.TB, want string) {
	t.Helper()
	redistest.WaitFor(t, 10*time.Second, "the replica to receive the stream", func() bool {
		return len(r.received()) >= len(want)
	})
	if got := r.received(); string(got) != want {
		t.Fatalf("the replica received %q, want %q", got, want)
	}
}

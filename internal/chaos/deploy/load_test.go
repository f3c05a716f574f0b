package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/replproxy/replproxy/internal/cachedata"
)

// TestAppendTail: a chunk ends with WAIT at every waitEvery-th tick and
// with FLUSHALL once every flushEvery of load (every 6,000th chunk at 20
// a second), both after the chunk's commands.
func TestAppendTail(t *testing.T) {
	cmds := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
	perFlush := int(flushEvery / writeTick)
	if perFlush != 6000 {
		t.Fatalf("a FLUSHALL every %d chunks, want 6000 (5 minutes of 50-ms ticks)", perFlush)
	}
	for _, tc := range []struct {
		tick, n int
		want    string
	}{
		{0, 1, waitCmd},
		{1, 2, ""},
		{9, 10, ""},
		{10, 11, waitCmd},
		{11, perFlush, flushAllCmd},
		{20, perFlush * 2, waitCmd + flushAllCmd},
		{21, perFlush + 1, ""},
	} {
		got := appendTail(slices.Clone(cmds), tc.tick, tc.n)
		if !bytes.HasPrefix(got, cmds) || string(got[len(cmds):]) != tc.want {
			t.Errorf("appendTail(tick %d, chunk %d) ends with %q, want %q", tc.tick, tc.n, got[len(cmds):], tc.want)
		}
	}
}

// TestLoaderWrite: the load writes nothing while paused, writes a chunk
// of commands every tick once resumed (one in waitEvery ending with WAIT),
// and leaves a primary that is no longer the primary within 20 ticks,
// closing its connection.
func TestLoaderWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var primary atomic.Value
		primary.Store("redis-1")
		l := &loader{primary: func() string { return primary.Load().(string) }}
		l.pause()
		client, server := net.Pipe()
		// Cancelled when the test ends, passed or failed, so that the load
		// stops and the bubble's goroutines with it.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.write(ctx, client, cachedata.New(1), "redis-1")
		}()

		buf := make([]byte, 1<<20)
		server.SetReadDeadline(time.Now().Add(time.Second))
		if n, err := server.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("paused for a second: read %d bytes, %v; want none", n, err)
		}
		l.resume()
		server.SetReadDeadline(time.Time{})
		var waits int
		for range waitEvery {
			n, err := server.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if chunk := buf[:n]; n < writeRate/20 || chunk[0] != '*' {
				t.Fatalf("a chunk of %d bytes starting %q: not a tick's commands", n, chunk[:min(n, 8)])
			} else if bytes.HasSuffix(chunk, []byte(waitCmd)) {
				waits++
			}
		}
		if waits != 1 {
			t.Errorf("%d of %d consecutive chunks end with WAIT, want 1", waits, waitEvery)
		}

		start := time.Now()
		primary.Store("redis-2")
		go io.Copy(io.Discard, server)
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("the load still writes to redis-1 a minute after redis-2 became the primary")
		}
		if took := time.Since(start); took > 20*writeTick {
			t.Errorf("left the old primary after %v, want 20 ticks at most", took)
		}
		if _, err := client.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("the connection is still open after the load left: write %v", err)
		}
	})
}

// TestLoaderRun: the load waits while no primary is known, dials again
// after a failed dial, writes to the primary it dialed, and stops when
// its context ends.
func TestLoaderRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		asks := 0
		var dialed []string
		client, server := net.Pipe()
		l := &loader{
			primary: func() string {
				asks++
				if asks <= 2 {
					return "" // no Sentinel answers yet
				}
				return "redis-1"
			},
			dial: func(ctx context.Context, name string) (net.Conn, error) {
				dialed = append(dialed, name)
				if len(dialed) == 1 {
					return nil, errors.New("connection refused")
				}
				return client, nil
			},
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			l.run(ctx)
		}()
		buf := make([]byte, 1<<20)
		if n, err := server.Read(buf); err != nil || n == 0 {
			t.Fatalf("no load reached the primary: %d bytes, %v", n, err)
		}
		go io.Copy(io.Discard, server)
		cancel()
		<-done
		if !slices.Equal(dialed, []string{"redis-1", "redis-1"}) {
			t.Errorf("dialed %q, want redis-1 twice (the first refused)", dialed)
		}
	})
}

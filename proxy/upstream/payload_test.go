package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replproxy/replproxy/internal/redistest"
)

// fakeSink is a PayloadSink that keeps what it is given, and fails with
// ENOSPC (a full disk) once it holds room bytes (room < 0: never).
type fakeSink struct {
	room      int
	got       bytes.Buffer
	committed int
	aborted   int
}

func (s *fakeSink) Write(p []byte) error {
	if s.room >= 0 && s.got.Len()+len(p) > s.room {
		return syscall.ENOSPC
	}
	s.got.Write(p)
	return nil
}

func (s *fakeSink) Commit() error { s.committed++; return nil }
func (s *fakeSink) Abort()        { s.aborted++ }

// TestPayloadSink: a main link's payload goes to the host's sink byte for
// byte as it arrives, in both forms ($<len>, and $EOF: without its mark),
// and is committed once whole; a sink that fails (an EOF-marked payload
// outgrowing the disk) fails the sync cleanly: aborted, never committed nor
// installed, the host told, the error kept.
func TestPayloadSink(t *testing.T) {
	body := make([]byte, 300<<10)
	rand.Read(body)
	rdb := redistest.RDBWith(body)
	mark := strings.Repeat("m", eofMarkLen)
	for _, tc := range []struct {
		name string
		eof  bool
		room int
	}{
		{"sized", false, -1},
		{"eof", true, -1},
		{"sized, disk full", false, 100 << 10},
		{"eof, disk full", true, 100 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, h := newTestLink(t, Target{}, Options{})
			sink := &fakeSink{room: tc.room}
			h.sink = sink
			proxySide, primarySide := net.Pipe()
			defer primarySide.Close()
			f := redistest.NewFakeLink(primarySide)
			go func() { // the primary: the handshake's replies, the payload, then silence
				header := "$" + strconv.Itoa(len(rdb)) + "\r\n"
				if tc.eof {
					header = "$EOF:" + mark + "\r\n"
				}
				f.Write("+PONG\r\n+OK\r\n+OK\r\n+FULLRESYNC " + linkReplID + " 1000\r\n" + header)
				f.WriteRaw(rdb)
				if tc.eof {
					f.Write(mark)
				}
				// A pipe's Write returns once the proxy read it all: hanging
				// up now ends a good session after its sync.
				primarySide.Close()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := l.Serve(ctx, proxySide, Target{Timeout: 5 * time.Second})
			h.mu.Lock()
			installs, failed := h.installs, h.failed
			h.mu.Unlock()
			if tc.room < 0 {
				if installs != 1 || sink.committed != 1 || sink.aborted != 0 || !bytes.Equal(sink.got.Bytes(), rdb) {
					t.Fatalf("installs %d, committed %d, aborted %d, sink got %d bytes of %d (equal %v); Serve: %v",
						installs, sink.committed, sink.aborted, sink.got.Len(), len(rdb), bytes.Equal(sink.got.Bytes(), rdb), err)
				}
				return
			}
			if !errors.Is(err, syscall.ENOSPC) || installs != 0 || failed != 1 || sink.committed != 0 || sink.aborted != 1 {
				t.Fatalf("Serve = %v, installs %d, host told %d, committed %d, aborted %d; want ENOSPC, 0, 1, 0, 1",
					err, installs, failed, sink.committed, sink.aborted)
			}
		})
	}
}

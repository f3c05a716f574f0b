package proxy

import (
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replproxy/replproxy/internal/redistest"
	"github.com/replproxy/replproxy/rdbcheck"
)

// This file gives redistest's fake primary the names this package's tests
// use: fakePrimary and fakeLink wrap redistest.FakePrimary and
// redistest.FakeLink, with the fields the tests read (a link's number,
// side, PSYNC and connection; the primary's replid, RDB and link counts)
// and lower-case forms of the methods they call. The fake primary's
// dataset is testdata/rdb/small.rdb.

const (
	linkReplID    = redistest.FakeReplID
	linkReplIDNew = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
	linkEOFMark   = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c" // 40 random hex characters
	linkOffset    = redistest.FakeOffset                       // X of +FULLRESYNC <replid> X

	fakeIOTimeout = redistest.FakeIOTimeout
	fakePing      = redistest.FakePing
)

// hostileDotsReplID is 40 characters that climb out of any directory.
var hostileDotsReplID = strings.Repeat("../", 13) + "x"

// linkRDB returns the bytes of testdata/rdb/small.rdb, a Redis 7.0 RDB with a
// valid CRC64 trailer: the fake primary's dataset.
func linkRDB(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/rdb/small.rdb")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakePrimary is a redistest.FakePrimary whose dataset is linkRDB.
type fakePrimary struct {
	*redistest.FakePrimary
	replID       string
	rdb          []byte
	mains, sides *atomic.Int32 // links handed to the main and the side script
	done         <-chan struct{}
}

func wrapPrimary(p *redistest.FakePrimary) *fakePrimary {
	return &fakePrimary{FakePrimary: p, replID: p.ReplID(), rdb: p.RDB(), mains: &p.Mains, sides: &p.Sides, done: p.Done()}
}

// startFakePrimary listens on a free port; main and side play each link of
// their kind (nil: hang up). It stops, closing every link, when the test ends.
func startFakePrimary(t testing.TB, main, side func(hc *fakeLink) error) *fakePrimary {
	t.Helper()
	return wrapPrimary(redistest.StartFakePrimary(t, redistest.FakeOptions{Main: fakeScript(main), Side: fakeScript(side), RDB: linkRDB(t)}))
}

// fakeScript is s for redistest's links.
func fakeScript(s func(hc *fakeLink) error) redistest.FakeScript {
	if s == nil {
		return nil
	}
	return func(l *redistest.FakeLink) error { return s(wrapLink(l)) }
}

// replicaOf returns the --replicaof arguments naming h.
func (h *fakePrimary) replicaOf() []string { return h.ReplicaOf() }

// next waits for the proxy's next link handed over by fakeHandOver, up to
// its PSYNC.
func (h *fakePrimary) next(t testing.TB) *fakeLink {
	t.Helper()
	return wrapLink(h.Next(t))
}

// fakeLink is the primary's end of one link from the proxy (see
// redistest.FakeLink).
type fakeLink struct {
	*redistest.FakeLink
	primary *fakePrimary // nil for newFakeLink's
	conn    net.Conn
	n       int    // 1 for the first link of its kind, and so on
	side    bool   // the proxy sent REPLCONF rdb-only 1: a snapshot fetch
	psync   string // the PSYNC as received, arguments joined by spaces
}

func wrapLink(l *redistest.FakeLink) *fakeLink {
	f := &fakeLink{FakeLink: l, conn: l.Conn(), n: l.N(), side: l.Side(), psync: l.PSYNC()}
	if p := l.Primary(); p != nil {
		f.primary = wrapPrimary(p)
	}
	return f
}

// newFakeLink plays the primary on conn, the test's end of a connection
// whose other end it gives the proxy: nothing is written but what the script
// writes. The test closes conn, which ends the link's reading.
func newFakeLink(conn net.Conn) *fakeLink { return wrapLink(redistest.NewFakeLink(conn)) }

// The methods below are redistest.FakeLink's; await waits up to
// linkTimeout, the repl-timeout the link tests give the upstream.
func (f *fakeLink) write(s string) error             { return f.Write(s) }
func (f *fakeLink) writeRaw(p []byte) error          { return f.WriteRaw(p) }
func (f *fakeLink) payload() string                  { return f.Payload() }
func (f *fakeLink) fullSync() error                  { return f.FullSync() }
func (f *fakeLink) fullResync() string               { return f.FullResync() }
func (f *fakeLink) goodFetch() error                 { return f.GoodFetch() }
func (f *fakeLink) awaitHangup() (acked bool)        { return f.AwaitHangup() }
func (f *fakeLink) await(want string) error          { return f.Await(want, linkTimeout) }
func (f *fakeLink) mustWrite(t testing.TB, s string) { t.Helper(); f.MustWrite(t, s) }
func (f *fakeLink) waitHangUp(t testing.TB)          { t.Helper(); f.WaitHangUp(t) }
func fakeHandOver(hc *fakeLink) error                { return redistest.FakeHandOver(hc.FakeLink) }
func fakeGoodMain(burst int) func(hc *fakeLink) error {
	good := redistest.FakeGoodMain(burst)
	return func(hc *fakeLink) error { return good(hc.FakeLink) }
}

// rdbPieces is a valid RDB of exactly size bytes (a string key whose value
// fills it), made in pieces for a fake primary to send: its head, then the
// value from chunk over and over, then the end opcode and the CRC64
// trailer. It is written from one buffer, so that the test's heap does not
// grow with it, and CRC is the CRC64 of every byte handed out.
type rdbPieces struct {
	size, sent int
	valueLeft  int
	chunk      []byte
	crc        uint64 // of the RDB's bytes handed out, the trailer's once it is
	done       bool
}

func newRDBPieces(size int, chunk []byte) *rdbPieces {
	value := size - len(redistest.RDBHead(1<<20)) - len(redistest.RDBEnd(0)) // a 32-bit length
	return &rdbPieces{size: size, valueLeft: value, chunk: chunk}
}

// next returns the next piece (valid until the next call), or nil once the
// RDB's last byte was handed out.
func (r *rdbPieces) next() []byte {
	var p []byte
	switch {
	case r.done:
		return nil
	case r.sent == 0:
		p = redistest.RDBHead(r.valueLeft)
	case r.valueLeft > 0:
		p = r.chunk[:min(len(r.chunk), r.valueLeft)]
		r.valueLeft -= len(p)
	default:
		p = redistest.RDBEnd(r.crc)
		r.done = true
	}
	r.crc = rdbcheck.CRC64(r.crc, p)
	r.sent += len(p)
	return p
}

// CRC is the CRC64 of every byte handed out, as a replica receiving them
// computes it.
func (r *rdbPieces) CRC() uint64 { return r.crc }

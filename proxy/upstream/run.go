package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

const (
	// BackoffMin and BackoffMax bound the wait before reconnecting after
	// failed attempts; the first retry after a link that was up is
	// immediate, as in Redis. Snapshot fetches back off the same way
	// (NextBackoff, one rule for both).
	BackoffMin = 250 * time.Millisecond
	BackoffMax = 5 * time.Second
)

// Run keeps a link to the configured primary until ctx is done: connect,
// sync, stream, and on failure reconnect with backoff. A lost link is
// retried, never returned: Run returns nil once ctx is done.
func (l *Link) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		t := l.set().Target
		if t.Addr == "" {
			l.state.Store(int32(StateNone))
			select {
			case <-ctx.Done():
				return nil
			case <-l.retargetCh:
				continue
			}
		}
		wasUp, retargeted, err := l.attempt(ctx, t)
		if wasUp { // as Redis: -1 in INFO until a link that was up goes down
			l.downSince.Store(time.Now().UnixNano())
		}
		if ctx.Err() != nil {
			return nil
		}
		if retargeted {
			l.log.Info("primary changed, reconnecting")
			backoff = 0
			continue
		}
		l.counters.LinkFailures.Add(1)
		l.lost()
		switch {
		case errors.Is(err, ErrStreamProtocol), errors.Is(err, ErrQueryBufferLimit), isCorrupt(err):
			backoff = NextBackoff(backoff) // up, but not healthy: do not hammer the primary
		case wasUp:
			backoff = 0
		default:
			backoff = NextBackoff(backoff)
		}
		if errors.Is(err, ErrSourceWait) {
			l.log.Debug("link to primary lost", "primary", t.Addr, "error", err, "retry-in-ms", backoff.Milliseconds())
		} else {
			l.log.Warn("link to primary lost", "primary", t.Addr, "error", err, "retry-in-ms", backoff.Milliseconds())
		}
		l.state.Store(int32(StateConnect))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		case <-l.retargetCh:
			backoff = 0
		}
	}
	return nil
}

// attempt runs one session to t, which a retarget ends early; the goroutine
// watching for one has returned when attempt does.
func (l *Link) attempt(ctx context.Context, t Target) (wasUp, retargeted bool, err error) {
	sessCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var watch sync.WaitGroup
	watch.Go(func() { // a retarget ends the session; the next loop reads the new config
		select {
		case <-l.retargetCh:
			retargeted = true
			cancel()
		case <-done:
		}
	})
	wasUp, err = l.connect(sessCtx, t)
	close(done)
	watch.Wait()
	return wasUp, retargeted, err
}

// NextBackoff is the wait before the next attempt after one that failed
// following a wait of prev: BackoffMin first, then doubling up to BackoffMax.
func NextBackoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return BackoffMin
	}
	return min(2*prev, BackoffMax)
}

// connect is one connection to the primary, from dial to loss. wasUp reports
// whether it got as far as streaming.
func (l *Link) connect(ctx context.Context, t Target) (wasUp bool, err error) {
	l.state.Store(int32(StateConnecting))
	conn, err := dial(ctx, t)
	if err != nil {
		return false, err
	}
	l.counters.Connects.Add(1)
	l.log.Info("connected to primary", "primary", t.Addr)
	return l.Serve(ctx, conn, t)
}

// Serve runs the replica side of the protocol on a connected conn until the
// link fails or ctx is done, and closes conn: the main link's session after
// the dial (t.Addr is not used). wasUp reports whether it got as far as
// streaming. Serve must not run concurrently with Run or itself.
func (l *Link) Serve(ctx context.Context, conn net.Conn, t Target) (wasUp bool, err error) {
	defer conn.Close()
	defer closeOnDone(ctx, conn)()

	l.state.Store(int32(StateHandshake))
	c, err := l.handshake(conn, t, mainMeter{l})
	if err != nil {
		return false, err
	}
	defer func() {
		l.sessionEnded(c.zr, true) // after every reader of it returned
		if isCorrupt(err) {
			l.linkCorrupt(c.primary, err)
		}
	}()
	switch {
	case c.agreed:
		l.mode.Store(int32(LinkZstd))
	case c.ask:
		l.mode.Store(int32(LinkRefused))
	default:
		l.mode.Store(int32(LinkPlain))
	}
	if err := c.psync(ctx); err != nil {
		return false, err
	}
	conn.SetDeadline(time.Time{})

	// Streaming: ACKs once a second from their own goroutine, the stream read
	// here, straight into the shared blocks. The first error of the two ends
	// the session and is the one returned.
	l.state.Store(int32(StateConnected))
	l.log.Info("link to primary up", "primary", conn.RemoteAddr().String(), "repl-offset", l.host.Stream().Offset())
	var first firstError
	ackCtx, stopAcks := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.ackLoop(ackCtx); err != nil {
			first.keep(err)
			conn.Close() // the reader notices and ends the session
		}
	})
	first.keep(c.streamLoop())
	stopAcks()
	conn.Close()
	wg.Wait()
	l.endStream()
	return true, first.err
}

// firstError keeps the first error of a session's goroutines.
type firstError struct {
	mu  sync.Mutex
	err error // read once every goroutine that keeps has returned
}

func (f *firstError) keep(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// closeOnDone closes conn when ctx ends, which unblocks every read and
// write; the function it returns stops that.
func closeOnDone(ctx context.Context, conn net.Conn) (stop func() bool) {
	return context.AfterFunc(ctx, func() { conn.Close() })
}

// endStream ends a streaming session: the bytes read after the last published
// command are dropped and the scanner goes back to the published end, so that
// the next PSYNC asks for exactly the bytes no replica has seen, from a
// command boundary. REQUIRES: the session's readers and ackLoop have returned.
func (l *Link) endStream() {
	st := l.host.Stream()
	st.Discard()
	off := st.Offset()
	l.scanner.Reset(off)
	l.applied.Store(off)
}

// FetchSnapshot opens a side link to from (host:port; "": the configured
// primary) and asks for an RDB only (REPLCONF rdb-only 1, PSYNC ? -1), with
// the primary's credentials and TLS settings. position, when not nil, is
// called with the replid and offset of the source: first (announced false)
// as its INFO replication says before the PSYNC, when it says, so that a
// source that cannot serve is not made to fork; then (announced true) as
// its +FULLRESYNC names them, before the payload (a disk-based sync sends
// its header only once the RDB is written). An error from it ends the
// fetch there, the payload unread. started is called with
// the new snapshot and the payload's declared size (-1: EOF-marked) once
// the payload's header arrived, before its first byte; the payload then
// streams into it, and into the sink started returns (nil: memory only), as
// a main link's does (PayloadSink); an error from started refuses it
// unread. A side link touches neither the stream nor the main link's state.
func (l *Link) FetchSnapshot(ctx context.Context, from string, position func(replID string, offset int64, announced bool) error,
	started func(*replbuf.Snapshot, int64) (PayloadSink, error)) (*replbuf.Snapshot, error) {
	return l.fetch(ctx, from, nil, position, started)
}

// FetchFiltered opens a side link to from ("": the configured primary), as
// FetchSnapshot does, and asks for the
// RDB it makes under REPLCONF rdb-filter-only filter (Redis 7.0: "" for none
// of the data, "functions" for the functions alone), as REPLCONF rdb-only 1
// and PSYNC ? -1, into a snapshot of its own: it is not the dataset, and
// never becomes the proxy's. A payload over limit bytes is refused, unread
// when its size is declared. A primary's error reply comes back as a
// *wire.RefusedError.
func (l *Link) FetchFiltered(ctx context.Context, from, filter string, limit int64) (*replbuf.Snapshot, error) {
	return l.fetch(ctx, from, []string{"rdb-filter-only", filter}, nil, func(_ *replbuf.Snapshot, size int64) (PayloadSink, error) {
		if size > limit {
			return nil, fmt.Errorf("filtered snapshot of %d bytes: more than the %d this proxy relays", size, limit)
		}
		return &limitSink{limit: limit, err: fmt.Errorf("filtered snapshot: more than the %d bytes this proxy relays", limit)}, nil
	})
}

// A limitSink is a PayloadSink that keeps nothing and refuses a payload,
// with err, once more than limit bytes of it arrived: an EOF-marked payload
// declares no size to refuse it by before it is read. Owned by the link's
// goroutine, as every sink is.
type limitSink struct {
	limit int64
	err   error
	n     int64 // the payload's bytes so far
}

func (s *limitSink) Write(p []byte) error {
	if s.n += int64(len(p)); s.n > s.limit {
		return s.err
	}
	return nil
}
func (s *limitSink) Commit() error { return nil }
func (s *limitSink) Abort()        {}

// fetch is one side link's fetch: the handshake, REPLCONF rdb-only 1 and the
// option pairs of opts (each refusal a *wire.RefusedError), PSYNC ? -1 (its
// error reply a *wire.RefusedError too), and the payload into a new snapshot
// (see FetchSnapshot for from, position and started).
func (l *Link) fetch(ctx context.Context, from string, opts []string, position func(string, int64, bool) error,
	started func(*replbuf.Snapshot, int64) (PayloadSink, error)) (*replbuf.Snapshot, error) {
	t := l.set().Target
	if t.Addr == "" {
		return nil, errors.New("no primary configured")
	}
	if from != "" {
		// A snapshot source: another replica of the same primary, or a
		// peer proxy, reached with the primary's credentials, TLS
		// settings (the TLS server name comes from from's host) and
		// source address (bind-source-addr).
		t.Addr, t.Source = from, true
	}
	conn, err := dial(ctx, t)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer closeOnDone(ctx, conn)()
	c, err := l.handshake(conn, t, sideMeter{l.counters})
	if err != nil {
		return nil, err
	}
	defer func() { l.sessionEnded(c.zr, false) }()
	if position != nil {
		h, err := c.askHistory()
		if err != nil {
			return nil, err
		}
		if h != nil {
			if err := position(h.replID, h.offset, false); err != nil {
				return nil, err
			}
		}
	}
	if err := c.send("REPLCONF", "rdb-only", "1"); err != nil {
		return nil, err
	}
	if reply, err := c.readLine(); err != nil || reply[0] == '-' {
		return nil, fmt.Errorf("REPLCONF rdb-only: %q %v", reply, err)
	}
	for i := 0; i+1 < len(opts); i += 2 {
		if err := c.send("REPLCONF", opts[i], opts[i+1]); err != nil {
			return nil, err
		}
		reply, err := c.readLine()
		if err != nil {
			return nil, fmt.Errorf("REPLCONF %s: %w", opts[i], err)
		}
		if reply[0] == '-' {
			return nil, &wire.RefusedError{Command: "REPLCONF " + opts[i], Reply: reply}
		}
	}
	if err := c.send("PSYNC", "?", "-1"); err != nil {
		return nil, err
	}
	reply, err := c.readLine()
	if err != nil {
		return nil, fmt.Errorf("PSYNC: %w", err)
	}
	if reply[0] == '-' {
		return nil, &wire.RefusedError{Command: "PSYNC", Reply: reply}
	}
	replID, offset, err := parseFullResync(reply)
	if err != nil {
		return nil, err
	}
	if position != nil {
		if err := position(replID, offset, true); err != nil {
			return nil, err
		}
	}
	c.decompress(false) // a fetched snapshot crosses a compressed link compressed too
	// readPayload renews the read deadline itself: no read of the side link
	// goes without one, or a silent primary would stall every waiting replica.
	sn, _, err := c.readPayload(replID, offset, started)
	if isCorrupt(err) {
		l.linkCorrupt(c.primary, err)
	}
	return sn, err
}

// isCorrupt reports whether err is compressed input that failed its check.
// A chunk cut by the connection's end (linkzstd's io.ErrUnexpectedEOF) is
// not: it is a link that ended, as a plain one's mid-command end is, and is
// neither counted nor logged as corruption (it resyncs all the same).
func isCorrupt(err error) bool {
	return errors.Is(err, linkzstd.ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF)
}

// linkCorrupt counts and logs a link, main or side, that corrupt compressed
// input ended. Nothing of the chunk that failed its check was used (the
// reader verifies a chunk before it returns a byte of it), so the main
// link's stream stays whole and it resyncs partially; a side link's
// snapshot is failed and fetched again.
func (l *Link) linkCorrupt(primary string, err error) {
	l.counters.LinkCorrupt.Add(1)
	l.log.Warn("compressed link corrupt, resyncing", "primary", primary, "error", err)
}

package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
)

// linkState is the upstream link's state, named as ROLE names a replica's.
type linkState int32

const (
	linkNone       linkState = iota // no replicaof configured
	linkConnect                     // waiting to connect (backoff)
	linkConnecting                  // dialling
	linkHandshake                   // PING, AUTH, REPLCONF, PSYNC
	linkSync                        // receiving the RDB of a full sync
	linkConnected                   // streaming
)

func (st linkState) String() string {
	switch st {
	case linkNone:
		return "none"
	case linkConnect:
		return "connect"
	case linkConnecting:
		return "connecting"
	case linkHandshake:
		return "handshake"
	case linkSync:
		return "sync"
	case linkConnected:
		return "connected"
	}
	return "unknown"
}

const (
	// replyLineMax bounds a handshake reply line from the primary.
	replyLineMax = 1024
	// eofMarkLen is the length of the $EOF:<mark> delimiter of a diskless payload.
	eofMarkLen = 40
	// ackInterval is how often the proxy sends REPLCONF ACK, as a replica does.
	ackInterval = time.Second
	// ackFirstInterval is the wait before the first ACK of a link.
	ackFirstInterval = 50 * time.Millisecond
	// Reconnection backoff after failed attempts; the first retry after a
	// link that was up is immediate, as in Redis.
	backoffMin = 250 * time.Millisecond
	backoffMax = 5 * time.Second
	// deadlineRefresh is how often a busy reader pushes its read deadline out.
	deadlineRefresh = time.Second
)

// errTryLater is the primary's -NOMASTERLINK or -LOADING answer to PSYNC.
var errTryLater = errors.New("primary cannot serve a sync right now")

// errStreamProtocol ends a link whose stream the scanner refused. Nothing
// from the refused command on was published, so the stream stays resumable
// from the last whole command; the link is retried with backoff, since the
// primary is likely to send the same bytes again.
var errStreamProtocol = errors.New("malformed replication stream from the primary")

// upstream is the link to the primary: the proxy in the replica role. Its run
// goroutine owns the connection, the scanner and the stream's producer side;
// the ack goroutine of a session only writes ACKs. The fields below are
// atomics because INFO and ROLE read them.
type upstream struct {
	srv *Server
	log hclog.Logger

	state     atomic.Int32 // a linkState
	lastIO    atomic.Int64 // unix nanos of the last byte from the primary
	downSince atomic.Int64 // unix nanos the link went down; 0 if it was never up
	applied   atomic.Int64 // offset of the last complete command outside MULTI
	syncTotal atomic.Int64 // RDB size during a full sync (-1 when unknown: EOF mark)
	syncRead  atomic.Int64 // RDB bytes received so far

	retargetCh chan struct{} // capacity 1: replicaof or its credentials changed

	// Owned by run.
	scanner *wire.StreamScanner
	// resumable says the stream holds the primary's bytes in a state a PSYNC
	// can continue (false before the first sync and during a full one). A
	// scanner error leaves it true: only whole commands were published.
	resumable bool
}

func newUpstream(s *Server, log hclog.Logger) *upstream {
	u := &upstream{srv: s, log: log, retargetCh: make(chan struct{}, 1), scanner: wire.NewStreamScanner(0)}
	u.syncTotal.Store(-1)
	return u
}

func (u *upstream) linkState() linkState { return linkState(u.state.Load()) }

// retarget makes the link drop its current primary and look at the
// configuration again.
func (u *upstream) retarget() {
	select {
	case u.retargetCh <- struct{}{}:
	default:
	}
}

// run keeps a link to the configured primary until ctx is done: connect,
// sync, stream, and on failure reconnect with backoff.
func (u *upstream) run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		cfg := u.srv.config()
		if cfg.MasterHost == "" {
			u.state.Store(int32(linkNone))
			select {
			case <-ctx.Done():
				return
			case <-u.retargetCh:
				continue
			}
		}
		addr := net.JoinHostPort(cfg.MasterHost, strconv.Itoa(cfg.MasterPort))
		sessCtx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(ctx, cancel)
		retargeted := make(chan struct{})
		go func() { // a retarget ends the session; the next loop reads the new config
			select {
			case <-u.retargetCh:
				close(retargeted)
				cancel()
			case <-sessCtx.Done():
			}
		}()
		wasUp, err := u.session(sessCtx, addr, cfg.MasterUser, cfg.MasterAuth, cfg.ReplTimeout)
		cancel()
		stop()
		if wasUp { // as Redis: -1 in INFO until a link that was up goes down
			u.downSince.Store(time.Now().UnixNano())
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-retargeted:
			u.log.Info("primary changed, reconnecting")
			backoff = 0
			continue
		default:
		}
		u.srv.stats.upstreamLinkFailures.Add(1)
		switch {
		case errors.Is(err, errStreamProtocol):
			backoff = nextBackoff(backoff) // up, but not healthy: do not hammer the primary
		case wasUp:
			backoff = 0
		default:
			backoff = nextBackoff(backoff)
		}
		u.log.Warn("link to primary lost", "primary", addr, "error", err, "retry-in", backoff)
		u.state.Store(int32(linkConnect))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		case <-u.retargetCh:
			backoff = 0
		}
	}
}

// nextBackoff is the wait before the next attempt after one that failed
// following a wait of prev: backoffMin first, then doubling up to backoffMax.
func nextBackoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return backoffMin
	}
	return min(2*prev, backoffMax)
}

// session is one connection to the primary, from dial to loss. wasUp reports
// whether it got as far as streaming.
func (u *upstream) session(ctx context.Context, addr, user, pass string, timeout time.Duration) (wasUp bool, err error) {
	u.state.Store(int32(linkConnecting))
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	u.srv.stats.upstreamConnects.Add(1)
	u.log.Info("connected to primary", "primary", addr)
	return u.serve(ctx, conn, user, pass, timeout)
}

// serve runs the replica side of the protocol on a connected conn until the
// link fails or ctx is done, and closes conn.
func (u *upstream) serve(ctx context.Context, conn net.Conn, user, pass string, timeout time.Duration) (wasUp bool, err error) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // unblocks every read and write
	defer stop()

	l := &link{u: u, conn: conn, timeout: timeout}
	l.rd = wire.NewCommandReader(conn, wire.Limits{})
	u.state.Store(int32(linkHandshake))
	conn.SetDeadline(time.Now().Add(timeout))
	if err := l.handshake(user, pass); err != nil {
		return false, fmt.Errorf("handshake: %w", err)
	}
	if err := l.psync(); err != nil {
		return false, err
	}
	conn.SetDeadline(time.Time{})

	// Streaming: ACKs once a second from their own goroutine, the stream read
	// here, straight into the shared blocks.
	u.state.Store(int32(linkConnected))
	u.log.Info("link to primary up", "primary", conn.RemoteAddr().String(), "repl-offset", u.srv.hist.stream().Offset())
	ackCtx, stopAcks := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { l.ackLoop(ackCtx) })
	err = l.streamLoop()
	stopAcks()
	conn.Close()
	wg.Wait()
	u.endStream()
	return true, err
}

// endStream ends a streaming session: the bytes read after the last published
// command are dropped and the scanner goes back to the published end, so that
// the next PSYNC asks for exactly the bytes no replica has seen, from a
// command boundary. REQUIRES: the session's readers and ackLoop have returned.
func (u *upstream) endStream() {
	st := u.srv.hist.stream()
	st.Discard()
	off := st.Offset()
	u.scanner.Reset(off)
	u.applied.Store(off)
}

// link is one session's connection state.
type link struct {
	u       *upstream
	conn    net.Conn
	rd      *wire.CommandReader
	timeout time.Duration
	side    bool // a snapshot fetch, not the main link: no stream, no link state

	writeMu sync.Mutex // guards writes to conn: the reader answers GETACK, ackLoop sends ACKs
	scratch []byte     // guarded by writeMu
}

// send writes one command to the primary.
func (l *link) send(args ...string) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.scratch = wire.AppendCommand(l.scratch[:0], args...)
	// Every write gets its own deadline: the handshake's covers only the
	// handshake, and a long payload must not leave the ACK after it expired.
	l.conn.SetWriteDeadline(time.Now().Add(l.timeout))
	_, err := l.conn.Write(l.scratch)
	return err
}

// readLine reads one reply line, skipping the newlines a primary sends as
// keepalives while it prepares a sync.
func (l *link) readLine() (string, error) {
	for {
		line, err := l.rd.ReadReplyLine(replyLineMax)
		if err != nil {
			return "", err
		}
		if !l.side {
			l.u.lastIO.Store(time.Now().UnixNano())
		}
		if len(line) > 0 {
			return string(line), nil
		}
		l.conn.SetReadDeadline(time.Now().Add(l.timeout))
	}
}

// handshake is PROTOCOL §1: PING, then AUTH, REPLCONF listening-port and
// REPLCONF capa pipelined, one reply line each.
func (l *link) handshake(user, pass string) error {
	if err := l.send("PING"); err != nil {
		return err
	}
	reply, err := l.readLine()
	if err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	if reply[0] != '+' && !hasPrefixFold(reply, "-NOAUTH") && !hasPrefixFold(reply, "-NOPERM") &&
		!hasPrefixFold(reply, "-ERR operation not permitted") {
		return fmt.Errorf("PING: unexpected reply %q", clip(reply, 80))
	}
	var batch []byte
	auth := pass != ""
	if auth {
		if user != "" {
			batch = wire.AppendCommand(batch, "AUTH", user, pass)
		} else {
			batch = wire.AppendCommand(batch, "AUTH", pass)
		}
	}
	port := strconv.Itoa(l.u.srv.Port())
	batch = wire.AppendCommand(batch, "REPLCONF", "listening-port", port)
	batch = wire.AppendCommand(batch, "REPLCONF", "capa", "eof", "capa", "psync2")
	if _, err := l.conn.Write(batch); err != nil {
		return err
	}
	if auth {
		reply, err := l.readLine()
		if err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
		if reply[0] == '-' {
			return fmt.Errorf("AUTH refused: %s", clip(reply, 120))
		}
	}
	for _, what := range []string{"REPLCONF listening-port", "REPLCONF capa"} {
		reply, err := l.readLine()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if reply[0] == '-' {
			l.u.log.Info("primary refused a handshake option (non critical)", "command", what, "reply", clip(reply, 120))
		}
	}
	return nil
}

// psync asks for a partial resync when the stream can continue, otherwise a
// full one, and handles the answer up to the first stream byte.
func (l *link) psync() error {
	u := l.u
	id := u.srv.identity()
	replID, offset := "?", "-1"
	if u.resumable && id.history {
		replID, offset = id.replID, strconv.FormatInt(u.srv.hist.stream().Offset()+1, 10)
	}
	if err := l.send("PSYNC", replID, offset); err != nil {
		return fmt.Errorf("PSYNC: %w", err)
	}
	reply, err := l.readLine()
	if err != nil {
		return fmt.Errorf("PSYNC: %w", err)
	}
	switch {
	case hasPrefixFold(reply, "+FULLRESYNC"):
		return l.fullSync(reply)
	case hasPrefixFold(reply, "+CONTINUE"):
		if replID == "?" {
			// The stream holds nothing to continue from: the primary is not
			// answering the question asked.
			return fmt.Errorf("PSYNC: %w: %q in reply to PSYNC ? -1", errBadReply, clip(reply, 120))
		}
		return l.partialSync(reply)
	case hasPrefixFold(reply, "-NOMASTERLINK"), hasPrefixFold(reply, "-LOADING"):
		return fmt.Errorf("PSYNC: %w: %s", errTryLater, clip(reply, 120))
	default:
		return fmt.Errorf("PSYNC: unexpected reply %q", clip(reply, 120))
	}
}

// partialSync handles +CONTINUE [replid]: the stream goes on where it was; a
// new replid moves the old one to replid2 (PROTOCOL §5).
func (l *link) partialSync(reply string) error {
	u := l.u
	newID, err := parseContinue(reply)
	if err != nil {
		return fmt.Errorf("PSYNC: %w", err)
	}
	s := u.srv
	offset := s.hist.stream().Offset()
	if oldID, second, epoch, changed := s.hist.continueAs(newID); changed {
		u.log.Info("primary changed replication id", "old-replid", oldID, "new-replid", newID, "second-repl-offset", second)
		// Replicas reconnect and continue through replid2 (PROTOCOL §5).
		s.disconnectReplicas(closeReplIDChanged, epoch)
	}
	s.stats.upstreamPartialSyncs.Add(1)
	u.log.Info("partial resync accepted", "repl-offset", offset)
	return nil
}

// fullSync handles +FULLRESYNC <replid> <offset>: read the payload into a new
// snapshot, check it, and start a new generation of the stream at offset.
func (l *link) fullSync(reply string) error {
	u := l.u
	replID, offset, err := parseFullResync(reply)
	if err != nil {
		return err
	}
	u.state.Store(int32(linkSync))
	u.resumable = false
	start := time.Now()
	sn, eof, err := l.readPayload(replID, offset, nil)
	if err != nil {
		return fmt.Errorf("full sync payload: %w", err)
	}
	u.srv.installSnapshot(sn)
	u.scanner.Reset(offset)
	u.applied.Store(offset)
	u.resumable = true
	u.srv.stats.upstreamFullSyncs.Add(1)
	u.log.Info("full sync received", "replid", replID, "repl-offset", offset,
		"rdb-size", humanize.IBytes(uint64(sn.Size())), "eof-mark", eof, "took", time.Since(start).Round(time.Millisecond))
	if eof {
		// After a diskless payload the primary sends nothing until the first ACK.
		if err := l.send("REPLCONF", "ACK", strconv.FormatInt(offset, 10)); err != nil {
			return err
		}
	}
	return nil
}

// readPayload reads the payload header ("$<len>" or "$EOF:<mark>") and the
// RDB into a new snapshot, and checks its CRC64. started, when not nil, is
// called with the snapshot before its first byte, so that others can follow
// it; an error from it abandons the payload. It reports whether the payload
// was EOF-marked.
func (l *link) readPayload(replID string, offset int64, started func(*replbuf.Snapshot) error) (*replbuf.Snapshot, bool, error) {
	u := l.u
	// The primary may take long to start the payload (a disk-based sync
	// writes the RDB first), but it sends a newline every second meanwhile,
	// which readLine takes as a renewal: silence fails within repl-timeout.
	l.conn.SetReadDeadline(time.Now().Add(l.timeout))
	header, err := l.readLine()
	if err != nil {
		return nil, false, fmt.Errorf("payload header: %w", err)
	}
	if header[0] == '-' {
		return nil, false, fmt.Errorf("primary aborted the sync: %s", clip(header, 120))
	}
	size, mark, err := parsePayloadHeader(header)
	if err != nil {
		return nil, false, err
	}
	sn := replbuf.NewSnapshot(replID, offset, u.srv.pool, time.Now())
	if started != nil {
		if err := started(sn); err != nil {
			sn.Release()
			return nil, false, err
		}
	}
	if !l.side {
		u.syncTotal.Store(size)
		u.syncRead.Store(0)
	}
	if mark != nil {
		err = l.readEOFPayload(sn, mark)
	} else {
		err = l.readSizedPayload(sn, size)
	}
	if err == nil {
		err = sn.Complete()
		if errors.Is(err, replbuf.ErrChecksum) {
			u.srv.stats.upstreamChecksumFails.Add(1)
		}
	}
	if err != nil {
		sn.Fail(err)
		if started == nil {
			sn.Release() // nobody else saw it
		}
		return nil, false, err
	}
	return sn, mark != nil, nil
}

// payloadRead accounts for n payload bytes received.
func (l *link) payloadRead(n int, now time.Time) {
	s := l.u.srv
	s.stats.replInputBytes.Add(int64(n))
	if l.side {
		s.stats.snapshotFetchBytes.Add(int64(n))
		return
	}
	l.u.lastIO.Store(now.UnixNano())
	l.u.syncRead.Add(int64(n))
	s.stats.upstreamRDBBytes.Add(int64(n))
}

// source is where payload and stream bytes come from: what the handshake
// reader has buffered first, then the connection itself, so that once the
// buffer is drained every read goes straight from the socket into a block.
func (l *link) source() io.Reader { return drainThen{l.rd, l.conn} }

type drainThen struct {
	rd   *wire.CommandReader
	conn net.Conn
}

func (d drainThen) Read(p []byte) (int, error) {
	if d.rd.Buffered() > 0 {
		return d.rd.Reader().Read(p)
	}
	return d.conn.Read(p)
}

// deadline pushes the read deadline out at most once a second, so that the
// link fails between repl-timeout and repl-timeout+1s after the last byte
// (Redis checks once a second too).
type deadline struct {
	conn    net.Conn
	timeout time.Duration
	set     time.Time
}

func (d *deadline) touch(now time.Time) {
	if now.Sub(d.set) >= deadlineRefresh {
		d.conn.SetReadDeadline(now.Add(d.timeout + deadlineRefresh))
		d.set = now
	}
}

// readSizedPayload reads a "$<len>" payload: exactly n bytes, straight into the
// snapshot's blocks. Whatever follows is already stream.
func (l *link) readSizedPayload(sn *replbuf.Snapshot, n int64) error {
	src := io.LimitReader(l.source(), n)
	dl := deadline{conn: l.conn, timeout: l.timeout}
	for sn.Size() < n {
		now := time.Now()
		dl.touch(now)
		p, err := sn.ReadOnce(src)
		if len(p) > 0 {
			l.payloadRead(len(p), now)
		}
		if err == io.EOF && sn.Size() < n {
			return fmt.Errorf("primary closed the link after %d of %d payload bytes: %w", sn.Size(), n, io.ErrUnexpectedEOF)
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}

// readEOFPayload reads a "$EOF:<mark>" payload: the RDB bytes end with the
// mark, which is not part of them. The last 40 bytes read are held back until
// more arrive, so readers of the snapshot never see the mark.
func (l *link) readEOFPayload(sn *replbuf.Snapshot, mark []byte) error {
	src := l.source()
	buf := make([]byte, 64<<10)
	held := 0 // bytes at the start of buf not yet appended: possibly the mark
	dl := deadline{conn: l.conn, timeout: l.timeout}
	for {
		now := time.Now()
		dl.touch(now)
		n, err := src.Read(buf[held:])
		if n > 0 {
			l.payloadRead(n, now)
			held += n
			// The primary sends nothing after the mark before our ACK, so
			// the mark, when it comes, ends a read.
			if held >= eofMarkLen && bytes.Equal(buf[held-eofMarkLen:held], mark) {
				if err := sn.Append(buf[:held-eofMarkLen]); err != nil {
					return err
				}
				return nil
			}
			if keep := min(held, eofMarkLen); held > keep {
				if err := sn.Append(buf[:held-keep]); err != nil {
					return err
				}
				copy(buf, buf[held-keep:held])
				held = keep
			}
		}
		if err == io.EOF {
			return fmt.Errorf("primary closed the link mid-payload after %d bytes: %w", sn.Size(), io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
	}
}

// streamLoop reads the stream straight into the shared blocks, scans each
// read in place for command boundaries and GETACK, publishes the commands the
// scanner accepted whole, and answers GETACK with the offset before it. It
// returns when the link fails; the bytes filled and not published are left
// for endStream to drop.
//
// Publishing up to the scanner's Applied offset, the reploff of a Redis
// replica, is what a chained Redis replica relays too: a command cut across
// reads waits for its end, a MULTI for its EXEC, and a byte the scanner
// refuses never reaches a replica, which would otherwise fail on it,
// reconnect and be sent it again.
func (l *link) streamLoop() error {
	u := l.u
	s := u.srv
	st := s.hist.stream()
	src := l.source()
	dl := deadline{conn: l.conn, timeout: l.timeout}
	for {
		now := time.Now()
		dl.touch(now)
		p, err := st.Fill(src)
		if len(p) > 0 {
			u.lastIO.Store(now.UnixNano())
			s.stats.replInputBytes.Add(int64(len(p)))
			ev, serr := u.scanner.Feed(p)
			applied := u.scanner.Applied()
			if perr := st.Publish(applied); perr != nil {
				return fmt.Errorf("publish stream up to %d: %w", applied, perr)
			}
			u.applied.Store(applied)
			if ev.GetAck {
				if werr := l.send("REPLCONF", "ACK", strconv.FormatInt(ev.GetAckOffset, 10)); werr != nil {
					return fmt.Errorf("answer GETACK: %w", werr)
				}
			}
			if serr != nil {
				s.stats.upstreamStreamErrors.Add(1)
				bad := int64(-1)
				if pe := (*wire.ProtocolError)(nil); errors.As(serr, &pe) {
					bad = pe.Offset
				}
				u.log.Error("malformed stream from primary", "error", serr, "error-offset", bad, "repl-offset", applied)
				return fmt.Errorf("%w: %w", errStreamProtocol, serr)
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("primary silent for longer than repl-timeout (%s): %w", l.timeout, err)
			}
			return fmt.Errorf("read stream: %w", err)
		}
	}
}

// ackLoop sends REPLCONF ACK <applied offset> once a second, as a replica does.
//
// The first ACKs come sooner, at 50 ms doubling up to the second: after a
// diskless payload Redis starts the stream only at an ACK that arrives once
// it has reaped its RDB child, and the one sent right after the payload may
// come before that. A real replica's first ACK comes after loading the RDB,
// which hides this; ours would otherwise hold the stream back for a second.
func (l *link) ackLoop(ctx context.Context) {
	wait := ackFirstInterval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.send("REPLCONF", "ACK", strconv.FormatInt(l.u.applied.Load(), 10)); err != nil {
				l.conn.Close() // the reader notices and ends the session
				return
			}
			wait = min(2*wait, ackInterval)
			t.Reset(wait)
		}
	}
}

// installSnapshot makes sn the newest snapshot and starts a new generation of
// the stream at its offset: the primary's bytes from offset+1 on. The
// replicas of the old generation are disconnected after the change.
func (s *Server) installSnapshot(sn *replbuf.Snapshot) {
	epoch := s.hist.install(sn)
	s.disconnectReplicas(closeGenerationChanged, epoch)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

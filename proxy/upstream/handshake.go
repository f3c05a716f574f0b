package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replproxy/replproxy/proxy/linkzstd"
	"github.com/replproxy/replproxy/proxy/wire"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

const (
	// replyLineMax bounds a handshake reply line from the primary.
	replyLineMax = 1024
	// maxPayloadSize bounds the "$<len>" of a sync payload (1 PiB).
	maxPayloadSize = 1 << 50
	// eofMarkLen is the length of the $EOF:<mark> delimiter of a diskless payload.
	eofMarkLen = 40
)

// ErrBadReply marks a handshake reply from the primary that does not have
// the form Redis gives it: the link fails with it and is retried later.
var ErrBadReply = errors.New("proxy: malformed reply from primary")

// session is one connection to the primary, main or side link, from the
// handshake on. The goroutine that opened it reads; writes go through send.
type session struct {
	l        *Link
	conn     net.Conn
	rd       *wire.CommandReader
	timeout  time.Duration
	meter    meter  // what differs between the main link and a side link
	primary  string // the primary's address, as the configuration names it (a source's, for a side link to one)
	toSource bool   // a side link to the snapshot source (Target.Source)

	// Link compression (REPLCONF link-compression), set by hello: ask is
	// repl-link-compression zstd at this connection, agreed the primary's
	// +OK to it. Once agreed, everything after the PSYNC reply line comes
	// through zr (compressed), which in and rd then read from. Owned by the
	// goroutine that opened the session.
	ask, agreed bool
	in          io.Reader // what rd reads once drained: conn, or zr
	zr          *linkzstd.Reader

	writeMu sync.Mutex // guards writes to conn: the reader answers GETACK, ackLoop sends ACKs
	scratch []byte     // guarded by writeMu
	raw     rawWriter  // guarded by writeMu
	acked   int64      // guarded by writeMu: the highest offset this session acknowledged
	lastAck time.Time  // guarded by writeMu: when this session last sent an ACK or GETACK answer
	warmEnd time.Time  // guarded by writeMu: until when ACKs are never kept quiet (ackLoop sets it)
}

// dial connects to the primary t names, from t.BindSource when set, within
// t.Timeout, and runs the TLS handshake when t.TLS is set, within the same
// timeout.
func dial(ctx context.Context, t Target) (net.Conn, error) {
	nd, err := t.netDialer(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if t.TLS != nil {
		ctx, cancel := context.WithTimeout(ctx, t.Timeout)
		defer cancel()
		raw, err := nd.DialContext(ctx, "tcp", t.Addr)
		if err != nil {
			return nil, fmt.Errorf("connect over TLS: %w", err)
		}
		// The stream's records are read by raw reads (wire.RawReadConn), as
		// a plain link's bytes are; the server name is the address's host
		// unless the configuration names one, as tls.Dialer would make it.
		conf := t.TLS
		if host, _, err := net.SplitHostPort(t.Addr); err == nil && conf.ServerName == "" {
			conf = conf.Clone()
			conf.ServerName = host
		}
		conn := tls.Client(wire.RawReadConn(raw), conf)
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("connect over TLS: %w", err)
		}
		return conn, nil
	}
	conn, err := nd.DialContext(ctx, "tcp", t.Addr)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return conn, nil
}

// DialTCP makes a plain TCP connection to addr as the link's connections
// are made: from t.BindSource when set (resolved at each dial), within
// t.Timeout and ctx. It is for connections to other nodes that belong with
// the link (the cluster follower's topology queries), which must leave from
// the same source address; network is "tcp", as net.Dialer takes it.
func (t Target) DialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	nd, err := t.netDialer(ctx)
	if err != nil {
		return nil, err
	}
	return nd.DialContext(ctx, network, addr)
}

// netDialer is the dialer of t's connections: within t.Timeout, from
// t.BindSource when set, resolved now.
func (t Target) netDialer(ctx context.Context) (*net.Dialer, error) {
	nd := &net.Dialer{Timeout: t.Timeout}
	if t.BindSource != "" {
		local, err := bindSource(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("bind-source-addr %s: %w", t.BindSource, err)
		}
		nd.LocalAddr = local
	}
	return nd, nil
}

// bindSource resolves t.BindSource here, not when configured, as Redis does
// on each connect (a name may move to another address of the host), within
// t.Timeout and ctx, so that a slow lookup neither outlasts the link's
// timeout nor a shutdown.
func bindSource(ctx context.Context, t Target) (*net.TCPAddr, error) {
	if ip := net.ParseIP(t.BindSource); ip != nil {
		return &net.TCPAddr{IP: ip}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, t.BindSource)
	if err != nil {
		return nil, err
	}
	return &net.TCPAddr{IP: ips[0].IP, Zone: ips[0].Zone}, nil
}

// handshake starts a session on conn and runs PROTOCOL §1 on it: PING, then
// AUTH, REPLCONF listening-port and REPLCONF capa pipelined, one reply line
// each, all within t.Timeout. The main link and the side links share it; m
// is what they count differently.
func (l *Link) handshake(conn net.Conn, t Target, m meter) (*session, error) {
	c := &session{l: l, conn: conn, rd: wire.NewCommandReader(conn, wire.Limits{}), timeout: t.Timeout, meter: m,
		primary: t.Addr, toSource: t.Source, ask: t.Compress, in: conn}
	if c.primary == "" { // Serve's caller dialled
		c.primary = conn.RemoteAddr().String()
	}
	conn.SetDeadline(time.Now().Add(t.Timeout))
	if err := c.hello(t.User, t.Pass); err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return c, nil
}

// send writes one command to the primary.
func (c *session) send(args ...string) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.sendLocked(args...)
}

// sendLocked is send with writeMu held.
func (c *session) sendLocked(args ...string) error {
	c.scratch = wire.AppendCommand(c.scratch[:0], args...)
	// A command of a few dozen bytes fits in the socket's buffer: one raw
	// write takes it, without the scheduler (see rawWriter). What it did
	// not take, a full buffer or a failed write, goes as any write does.
	p := c.scratch[c.raw.write(c.conn, c.scratch):]
	if len(p) == 0 {
		return nil
	}
	// Every write gets its own deadline: the handshake's covers only the
	// handshake, and a long payload must not leave the ACK after it expired.
	c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err := c.conn.Write(p)
	return err
}

// readLine reads one reply line, skipping the newlines a primary sends as
// keepalives while it prepares a sync: each one renews the read deadline.
// This is the one keepalive rule of both kinds of link.
func (c *session) readLine() (string, error) {
	for {
		line, err := c.rd.ReadReplyLine(replyLineMax)
		if err != nil {
			return "", err
		}
		c.meter.sawIO(time.Now())
		if len(line) > 0 {
			return string(line), nil
		}
		c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	}
}

// hello is the part of the handshake before PSYNC.
func (c *session) hello(user, pass string) error {
	if err := c.send("PING"); err != nil {
		return err
	}
	reply, err := c.readLine()
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
	port := strconv.Itoa(c.l.set().ListeningPort)
	batch = wire.AppendCommand(batch, "REPLCONF", "listening-port", port)
	// capa replproxy tells an upstream replproxy that this replica is a
	// proxy (its traffic control and INFO's Links single those out); Redis
	// and Valkey ignore a capa they do not know.
	capa := []string{"REPLCONF", "capa", "eof", "capa", "psync2", "capa", "replproxy"}
	if c.toSource {
		capa = append(capa, "capa", "replproxy-source")
	}
	batch = wire.AppendCommand(batch, capa...)
	if c.ask {
		batch = wire.AppendCommand(batch, "REPLCONF", "link-compression", "zstd")
	}
	if _, err := c.conn.Write(batch); err != nil {
		return err
	}
	if auth {
		reply, err := c.readLine()
		if err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
		if reply[0] == '-' {
			return fmt.Errorf("AUTH refused: %s", clip(reply, 120))
		}
	}
	for _, what := range []string{"REPLCONF listening-port", "REPLCONF capa"} {
		reply, err := c.readLine()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if reply[0] == '-' {
			c.l.log.Info("primary refused a handshake option (non critical)", "command", what, "reply", clip(reply, 120))
		}
	}
	if c.ask {
		reply, err := c.readLine()
		if err != nil {
			return fmt.Errorf("REPLCONF link-compression: %w", err)
		}
		if reply[0] == '+' {
			c.agreed = true
		} else {
			c.l.compressionRefused(c.primary, reply)
		}
	}
	return nil
}

// psync asks for a partial resync when the stream can continue, otherwise a
// full one, and handles the answer up to the first stream byte. With a
// snapshot source (snapshot-from), a stream the primary cannot continue
// (none yet, or one its INFO replication says it no longer holds) is synced
// from the source instead (seedSync), so that the primary does not fork.
// Main link only.
func (c *session) psync(ctx context.Context) error {
	l := c.l
	id, ok := l.host.ResumeID()
	resumable := l.resumable && ok
	next := l.host.Stream().Offset() + 1
	if l.set().SnapshotSource != "" {
		ph, err := c.askHistory()
		if err != nil {
			return err
		}
		if !resumable {
			return c.seedSync(ctx, ph)
		}
		if ph != nil {
			if err := ph.continues(id, next); err != nil {
				l.log.Warn("the primary cannot continue the proxy's history, syncing from the snapshot source", "error", err)
				return c.seedSync(ctx, ph)
			}
		}
	}
	if resumable {
		return c.psyncAsk(id, strconv.FormatInt(next, 10), nil)
	}
	return c.psyncAsk("?", "-1", nil)
}

// psyncAsk sends PSYNC replID offset and handles the answer up to the first
// stream byte. seed, when not nil, is the snapshot source's position the
// PSYNC continues: a +CONTINUE begins it, anything else aborts it (exactly
// one of the two).
func (c *session) psyncAsk(replID, offset string, seed Seed) (err error) {
	l := c.l
	resolved := false
	if seed != nil {
		defer func() {
			if !resolved && err != nil {
				seed.Abort(err)
			}
		}()
	}
	if err := c.send("PSYNC", replID, offset); err != nil {
		return fmt.Errorf("PSYNC: %w", err)
	}
	reply, err := c.readLine()
	if err != nil {
		return fmt.Errorf("PSYNC: %w", err)
	}
	switch {
	case hasPrefixFold(reply, "+FULLRESYNC"):
		if seed != nil {
			// The primary forked all the same: its payload is read.
			seed.Abort(ErrPrimaryFullSync)
			resolved = true
			sid, soff := seed.Position()
			l.log.Warn("the primary answered the snapshot source's position with a full sync", "replid", sid, "offset", soff)
		}
		c.decompress(true)
		return c.fullSync(reply)
	case hasPrefixFold(reply, "+CONTINUE"):
		if replID == "?" {
			// The stream holds nothing to continue from: the primary is not
			// answering the question asked.
			return fmt.Errorf("PSYNC: %w: %q in reply to PSYNC ? -1", ErrBadReply, clip(reply, 120))
		}
		c.decompress(true)
		if seed != nil {
			newID, err := parseContinue(reply)
			if err != nil {
				return fmt.Errorf("PSYNC: %w", err)
			}
			resolved = true
			c.seeded(seed, newID)
			return nil
		}
		return c.partialSync(reply)
	case hasPrefixFold(reply, "-NOMASTERLINK"), hasPrefixFold(reply, "-LOADING"):
		return fmt.Errorf("PSYNC: %w: %s", ErrTryLater, clip(reply, 120))
	default:
		return fmt.Errorf("PSYNC: unexpected reply %q", clip(reply, 120))
	}
}

// seeded begins seed, whose position the primary continues (+CONTINUE
// [newID]): the stream starts a new generation at its offset, and goes on
// from the primary while the snapshot arrives from the source.
func (c *session) seeded(seed Seed, newID string) {
	l := c.l
	replID, offset := seed.Position()
	seed.Begin()
	l.scanner.Reset(offset)
	l.applied.Store(offset)
	l.resumable = true
	if oldID, second, changed := l.host.ContinueAs(newID); changed {
		l.log.Info("primary changed replication id", "old-replid", oldID, "new-replid", newID, "second-repl-offset", second)
	}
	l.counters.PartialSyncs.Add(1)
	l.log.Info("partial resync accepted at the snapshot source's position", "replid", replID, "repl-offset", offset)
}

// compressedReadBuffer is the read buffer under a compressed link's
// decoder: a live stream's chunks are a few hundred bytes to a few KiB.
const compressedReadBuffer = 64 << 10

// decompress starts reading a compressed session's bytes through a
// linkzstd.Reader, when the primary agreed to compress: its first byte is
// the one after the PSYNC reply line just read, which the handshake's reader
// may already hold. The payload readers and the stream loop then read
// through the new reader, unchanged; ACKs still write conn, plain. main
// says the session is the main link's, whose figures Compression shows.
func (c *session) decompress(main bool) {
	if !c.agreed || c.zr != nil {
		return
	}
	// Buffered: a chunk's header and body then come in one read, not two.
	// Raw reads (wire.ConnReader), as a plain link's stream is read: each
	// chunk is a read, and one the scheduler is told of keeps its monitor
	// thread polling while the proxy works.
	c.zr = linkzstd.NewReader(bufio.NewReaderSize(drainThen{c.rd, wire.ConnReader(c.conn)}, compressedReadBuffer))
	c.in = c.zr
	c.rd = wire.NewCommandReader(c.zr, wire.Limits{})
	if main {
		c.l.mainSession(c.zr)
	}
}

// partialSync handles +CONTINUE [replid]: the stream goes on where it was; a
// new replid moves the old one to replid2 (PROTOCOL §5).
func (c *session) partialSync(reply string) error {
	l := c.l
	newID, err := parseContinue(reply)
	if err != nil {
		return fmt.Errorf("PSYNC: %w", err)
	}
	offset := l.host.Stream().Offset()
	if oldID, second, changed := l.host.ContinueAs(newID); changed {
		// Replicas reconnect and continue through replid2 (PROTOCOL §5).
		l.log.Info("primary changed replication id", "old-replid", oldID, "new-replid", newID, "second-repl-offset", second)
	}
	l.counters.PartialSyncs.Add(1)
	l.log.Info("partial resync accepted", "repl-offset", offset)
	return nil
}

// fullSync handles +FULLRESYNC <replid> <offset>: read the payload into a new
// snapshot, check it, and start a new generation of the stream at offset.
func (c *session) fullSync(reply string) error {
	l := c.l
	replID, offset, err := parseFullResync(reply)
	if err != nil {
		return err
	}
	l.state.Store(int32(StateSync))
	l.resumable = false
	start := time.Now()
	// The snapshot work counts the payload while it arrives, and may have
	// it written to a file as it does; a payload it accepted and that
	// failed is its to forget, then released here (nobody else reads it).
	var arriving *replbuf.Snapshot
	sn, eof, err := c.readPayload(replID, offset, func(sn *replbuf.Snapshot, size int64) (PayloadSink, error) {
		sink, err := l.snaps.PayloadStarted(sn, size)
		if err == nil {
			arriving = sn
		}
		return sink, err
	})
	if err != nil {
		if arriving != nil {
			l.snaps.PayloadFailed(arriving)
			arriving.Release()
		}
		return fmt.Errorf("full sync payload: %w", err)
	}
	l.host.Install(sn)
	l.scanner.Reset(offset)
	l.applied.Store(offset)
	l.resumable = true
	l.counters.FullSyncs.Add(1)
	l.log.Info("full sync received", "replid", replID, "repl-offset", offset,
		"rdb-bytes", sn.Size(), "eof-mark", eof, "took-ms", time.Since(start).Milliseconds())
	if eof {
		// After a diskless payload the primary sends nothing until the first
		// ACK, whatever its offset: under ack-policy replicas it is what the
		// policy allows, as every ACK.
		if err := c.ack(offset, false); err != nil {
			return err
		}
	}
	return nil
}

// parseFullResync parses "+FULLRESYNC <replid> <offset>". The replid must be
// 40 lowercase hex digits and the offset in [0, replid.MaxOffset].
func parseFullResync(line string) (replID string, offset int64, err error) {
	f := strings.Fields(line)
	if len(f) != 3 || !wire.EqualFold(f[0], "+FULLRESYNC") {
		return "", 0, fmt.Errorf("%w: FULLRESYNC %q", ErrBadReply, clip(line, 120))
	}
	if !replid.Valid(f[1]) {
		return "", 0, fmt.Errorf("%w: FULLRESYNC replid %q is not 40 lowercase hex digits", ErrBadReply, clip(f[1], 60))
	}
	offset, ok := replid.ParseOffset(f[2])
	if !ok {
		return "", 0, fmt.Errorf("%w: FULLRESYNC offset %q is not in [0, %d]", ErrBadReply, clip(f[2], 40), int64(replid.MaxOffset))
	}
	return f[1], offset, nil
}

// parseContinue parses "+CONTINUE" or "+CONTINUE <replid>"; replID is ""
// when the primary kept its replid (a reply from before PSYNC2).
func parseContinue(line string) (replID string, err error) {
	f := strings.Fields(line)
	if len(f) == 0 || len(f) > 2 || !wire.EqualFold(f[0], "+CONTINUE") {
		return "", fmt.Errorf("%w: CONTINUE %q", ErrBadReply, clip(line, 120))
	}
	if len(f) == 1 {
		return "", nil
	}
	if !replid.Valid(f[1]) {
		return "", fmt.Errorf("%w: CONTINUE replid %q is not 40 lowercase hex digits", ErrBadReply, clip(f[1], 60))
	}
	return f[1], nil
}

// ParsePayloadHeader parses the header of a sync payload: "$<len>" (size,
// nil) or "$EOF:<mark>" (-1, mark), the mark being exactly 40 bytes. The
// size is in [0, 2^50]. The proxy's own payloads to its replicas have the
// same form.
func ParsePayloadHeader(line string) (size int64, eofMark []byte, err error) {
	rest, ok := strings.CutPrefix(line, "$")
	if !ok {
		return 0, nil, fmt.Errorf("%w: payload header %q", ErrBadReply, clip(line, 80))
	}
	if mark, ok := strings.CutPrefix(rest, "EOF:"); ok {
		if len(mark) != eofMarkLen {
			return 0, nil, fmt.Errorf("%w: payload EOF mark of %d bytes, want %d", ErrBadReply, len(mark), eofMarkLen)
		}
		return -1, []byte(mark), nil
	}
	size, ok = replid.ParseDecimal(rest, maxPayloadSize)
	if !ok {
		return 0, nil, fmt.Errorf("%w: payload length %q is not in [0, %d]", ErrBadReply, clip(rest, 40), int64(maxPayloadSize))
	}
	return size, nil, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && wire.EqualFold(s[:len(prefix)], prefix)
}

// clip shortens s for an error or a log line.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

package downstream

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Traffic control (repl-link-sync-rate-limit): the full-sync payload a
// downstream proxy is sent (from its "$" header to the last byte of the RDB
// or of the EOF mark) is paced to a rate in bytes per second, so that a
// full sync across a WAN link does not take the whole link from the stream
// of the proxy's other links, or from everything else that crosses it.
// Only payloads: the stream that follows is never paced, since a throttled
// stream is only a replica falling behind. Only downstream proxies
// (Replica.IsProxy): a real replica is one of the proxy's own region, on a
// link that needs no cap.
//
// Each link has its own pacer: the cap is what one link may take, so that a
// standby's sync does not slow the active proxy's, and a link paces its own
// writes with no lock shared with another.

// minPaceBurst is the least a pacer lets go at once, whatever the rate: a
// block of the stream. Below 160 KiB/s, where 100 ms of bytes is less than
// a block, the burst is then longer than 100 ms rather than the payload cut
// into pieces smaller than the blocks it is held in.
const minPaceBurst = 16 << 10

// throttleTick is the longest a pacer sleeps before it counts the time
// slept: how stale the throttled time read meanwhile may be.
const throttleTick = 100 * time.Millisecond

// paceCopyBuf is the pacer's buffer for a file it is handed (ReadFrom) while
// it paces: a throttled payload cannot use sendfile.
const paceCopyBuf = 64 << 10

// A pacer is the writer's connection while a payload is sent to a downstream
// proxy: its Write lets through at most rate bytes a second, with a burst of
// about 100 ms of bytes (at least minPaceBurst), by sleeping before each
// piece, and counts the time slept as it passes (throttleTick). Off (before
// begin, after end) it is the connection below. It sits under a compressing
// writer when there is one, so that what it counts is bytes on the wire.
// Owned by the replica's write loop.
//
// repl-link-sync-rate-limit is at least config.SyncRatePiece bytes per
// repl-timeout (config.Validate), so that the largest piece a downstream
// proxy reads whole, a compressed chunk, reaches it within its timeout: a
// lower rate would have its reads time out and its full sync start over,
// forever. Pieces smaller than minPaceBurst would not help there, since a
// compressed chunk is read whole whatever the pieces it comes in.
type pacer struct {
	net.Conn // the connection below: the socket, or what writes to it

	rate    func() int64  // repl-link-sync-rate-limit in force, read before each piece: 0 is unlimited
	timeout time.Duration // repl-timeout: the write deadline, renewed after a sleep
	slept   *atomic.Int64 // nanoseconds slept in all: the replica's throttled time, read by INFO

	// Time, injected for the tests: now is the clock the rate is held to,
	// sleep waits (or ends early with ctx's error).
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	ctx context.Context // the write loop's, from begin
	on  bool
	// tat is the time by which every byte let through so far would have
	// been sent at the rate (GCRA's theoretical arrival time): a piece
	// waits until tat is at most one burst ahead of now.
	tat time.Time
	buf []byte // ReadFrom's, made on first use
}

// newPacer returns a pacer, off, over conn.
func newPacer(conn net.Conn, rate func() int64, timeout time.Duration, slept *atomic.Int64) *pacer {
	return &pacer{Conn: conn, rate: rate, timeout: timeout, slept: slept, now: time.Now, sleep: sleepContext}
}

// begin switches pacing on for a payload: its sleeps end with ctx. The
// bucket starts full (one burst may go at once).
func (p *pacer) begin(ctx context.Context) {
	p.ctx, p.on, p.tat = ctx, true, p.now()
}

// end switches pacing off: the stream is never paced.
func (p *pacer) end() {
	p.ctx, p.on = nil, false
}

// Write writes b, paced while on: in pieces of at most one burst, each
// after the sleep that keeps the bytes so far within the rate. A change of
// the rate applies from the next piece.
func (p *pacer) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		rate := int64(0)
		if p.on {
			rate = p.rate()
		}
		if rate <= 0 {
			n, err := p.Conn.Write(b)
			return written + n, err
		}
		burst := max(rate/10, minPaceBurst)
		k := int(min(int64(len(b)), burst))
		if err := p.wait(rate, burst, k); err != nil {
			return written, err
		}
		n, err := p.Conn.Write(b[:k])
		written += n
		if err != nil {
			return written, err
		}
		b = b[k:]
	}
	return written, nil
}

// wait sleeps until k more bytes may go at rate with burst: until the
// theoretical arrival time of the bytes let through, these included, is no
// more than one burst's time ahead of now. The write deadline is renewed
// after a sleep, which the caller's deadline did not allow for.
func (p *pacer) wait(rate, burst int64, k int) error {
	now := p.now()
	// In float: a rate or burst near the int64 range would overflow the
	// products in nanoseconds.
	perByte := float64(time.Second) / float64(rate)
	tau := time.Duration(float64(burst) * perByte)
	switch {
	case p.tat.Before(now):
		p.tat = now // an idle bucket holds one burst, no more
	case p.tat.Sub(now) > tau:
		p.tat = now.Add(tau) // owed at a lower rate than the one in force now
	}
	p.tat = p.tat.Add(time.Duration(float64(k) * perByte))
	d := p.tat.Sub(now) - tau
	if d <= 0 {
		return nil
	}
	// In slices, each counted as it ends, so that the throttled time
	// (INFO's throttled_ms) grows while the payload is held back rather
	// than at the end of a sleep that may last seconds.
	for d > 0 {
		slice := min(d, throttleTick)
		if err := p.sleep(p.ctx, slice); err != nil {
			return err
		}
		p.slept.Add(int64(slice))
		d -= slice
	}
	return p.Conn.SetWriteDeadline(p.now().Add(p.timeout))
}

// ReadFrom sends what r holds: by the connection below's own ReadFrom
// (sendfile, for a file to a TCP socket) when nothing is paced now, else
// through Write from a buffer, since bytes that go by sendfile cannot be
// paced. io.Copy finds it, so that sendFile needs no case of its own.
func (p *pacer) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := p.Conn.(io.ReaderFrom); ok && (!p.on || p.rate() <= 0) {
		return rf.ReadFrom(r)
	}
	if p.buf == nil {
		p.buf = make([]byte, paceCopyBuf)
	}
	return io.CopyBuffer(onlyWriter{p}, r, p.buf)
}

// onlyWriter hides a pacer's ReadFrom from io.CopyBuffer, which would
// otherwise call it back.
type onlyWriter struct{ io.Writer }

// sleepContext waits d, or until ctx ends (its error).
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

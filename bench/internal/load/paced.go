package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Paced holds a fixed total rate of commands from many connections, as a
// primary's clients do in production: every Tick each connection writes
// its share of the rate, so that the primary, and its replication stream,
// sees a steady trickle of small packets instead of saturating pipelines.
//
// Shares are fractional. Connection c has written, after tick t,
// floor((t × Rate × Tick / 1 s + c) / Conns) commands: each accumulates
// its share, with the connections' phases spread evenly over one command,
// so that over all connections the commands written by tick t are exactly
// floor(t × Rate × Tick / 1 s) and every tick writes the rate's share of
// it rounded down or up. At 1,000 commands/s over 20 connections, one
// command per millisecond, each connection in turn every 20 ms; at
// 20,000, one per connection every millisecond. The schedule is kept by
// the clock: a tick that runs late writes what the ticks it missed were
// due, so the rate holds, and counts the ticks it missed (PacedStats.Missed):
// their commands went out with a later tick's, a burstier load than asked.
//
// Each connection writes its commands from a ring built before the load
// starts, again and again, so that generating the load costs one write
// system call per connection and tick and no formatting. One goroutine,
// which sleeps between ticks on a thread of its own (sleepUntil), writes
// every connection and, every replyEvery, reads the replies that have
// arrived without waiting for any, so the schedule never stalls on a
// reply; it waits for them only when the load stops.
type Paced struct {
	Addr  string        // host:port of the primary
	Rate  int           // commands per second over all connections
	Conns int           // connections; default 20
	Tick  time.Duration // how often every connection writes its share; default 1 ms
	// ValueSize is the value size of the SETs written when Next is nil:
	// connection c's ring is SET paced:<c>:<i> <ValueSize 'x' bytes> for
	// i < Ring, so the dataset stays Conns × Ring keys.
	ValueSize int
	// Next, when set, returns connection c's generator of commands, each
	// call appending one command (RESP) to dst and returning the extended
	// slice; it is called Ring times per connection before the load
	// starts. Every command's reply must be one line of +… or :… (SET,
	// HSET, INCRBY, EXPIRE); an error reply stops the load with ErrReply.
	Next func(c int) func(dst []byte) []byte
	// Ring is the commands built per connection; default 64.
	Ring int
}

// replyEvery is how often the writer reads the replies that have arrived:
// a few hundred bytes per connection at the highest rates, which its
// socket buffer holds many times over.
const replyEvery = 10 * time.Millisecond

// drainTimeout bounds the wait for the last replies when the load stops.
const drainTimeout = 30 * time.Second

func (p Paced) withDefaults() Paced {
	if p.Conns <= 0 {
		p.Conns = 20
	}
	if p.Tick <= 0 {
		p.Tick = time.Millisecond
	}
	if p.Ring <= 0 {
		p.Ring = 64
	}
	return p
}

// due is the commands connection c has written after tick t (ticks count
// from 1 at Tick after the start).
func (p Paced) due(t int64, c int) int64 {
	return (t*int64(p.Rate)*int64(p.Tick) + int64(c)*int64(time.Second)) / (int64(p.Conns) * int64(time.Second))
}

// ring builds connection c's commands: the bytes, and where each ends.
func (p Paced) ring(c int) (ring []byte, ends []int) {
	next := p.Next
	if next == nil {
		value := bytes.Repeat([]byte{'x'}, p.ValueSize)
		next = func(c int) func([]byte) []byte {
			i := 0
			return func(dst []byte) []byte {
				dst = append(dst, "*3\r\n$3\r\nSET\r\n"...)
				dst = appendBulk(dst, []byte("paced:"+strconv.Itoa(c)+":"+strconv.Itoa(i)))
				i++
				return appendBulk(dst, value)
			}
		}
	}
	gen := next(c)
	for range p.Ring {
		ring = gen(ring)
		ends = append(ends, len(ring))
	}
	return ring, ends
}

// PacedStats are a paced load's figures from its start: so far
// (PacedRun.Progress) or in all (PacedRun.Stop).
type PacedStats struct {
	Commands, Bytes int64         // written (Stop's: and answered)
	Ticks           int64         // the schedule's ticks that have passed
	Wakeups         int64         // the writer's: one per tick when on time, one for several when late
	Elapsed         time.Duration // from the start to the last wake-up
	MaxLate         time.Duration // the latest wake-up, after its tick
}

// Rate is the commands written per second.
func (s PacedStats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Commands) / s.Elapsed.Seconds()
}

// Missed is the share of ticks that had no wake-up of their own: the
// writer woke late, and wrote their commands with a later tick's.
func (s PacedStats) Missed() float64 {
	if s.Ticks <= 0 {
		return 0
	}
	return 1 - float64(s.Wakeups)/float64(s.Ticks)
}

// Sub is the figures between an earlier reading and s; its MaxLate is s's.
func (s PacedStats) Sub(earlier PacedStats) PacedStats {
	return PacedStats{
		Commands: s.Commands - earlier.Commands, Bytes: s.Bytes - earlier.Bytes,
		Ticks: s.Ticks - earlier.Ticks, Wakeups: s.Wakeups - earlier.Wakeups,
		Elapsed: s.Elapsed - earlier.Elapsed, MaxLate: s.MaxLate,
	}
}

// pacedProgress is PacedStats published by writeLoop once per tick, for
// Progress to read from another goroutine.
type pacedProgress struct {
	commands, bytes, ticks, wakeups, elapsed, maxLate atomic.Int64
}

func (p *pacedProgress) store(s PacedStats) {
	p.commands.Store(s.Commands)
	p.bytes.Store(s.Bytes)
	p.ticks.Store(s.Ticks)
	p.wakeups.Store(s.Wakeups)
	p.elapsed.Store(int64(s.Elapsed))
	p.maxLate.Store(int64(s.MaxLate))
}

func (p *pacedProgress) load() PacedStats {
	return PacedStats{
		Commands: p.commands.Load(), Bytes: p.bytes.Load(), Ticks: p.ticks.Load(), Wakeups: p.wakeups.Load(),
		Elapsed: time.Duration(p.elapsed.Load()), MaxLate: time.Duration(p.maxLate.Load()),
	}
}

// PacedRun is a paced load running: Start returns it, Stop ends it.
type PacedRun struct {
	p        Paced
	ctx      context.Context
	conns    []*pacedConn // owned by writeLoop
	start    time.Time
	progress pacedProgress // writeLoop stores once per tick
	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	done     chan struct{} // closed when writeLoop has returned
	stats    PacedStats    // written by writeLoop before done is closed
	err      error         // likewise
}

// pacedConn is one connection of the load. Owned by writeLoop.
type pacedConn struct {
	conn     *net.TCPConn
	raw      syscall.RawConn
	ring     []byte
	ends     []int // ends[i]: where command i of ring ends
	next     int   // the ring's next command to write
	sent     int64 // commands written
	answered int64 // replies read
	midLine  bool  // the last bytes read ended inside a reply
}

// Start dials Conns connections to Addr, builds their rings and starts the
// load, which runs until Stop is called or ctx is cancelled.
func (p Paced) Start(ctx context.Context) (*PacedRun, error) {
	p = p.withDefaults()
	if p.Rate <= 0 {
		return nil, fmt.Errorf("load: paced rate %d: want > 0", p.Rate)
	}
	r := &PacedRun{p: p, ctx: ctx, stop: make(chan struct{}), done: make(chan struct{})}
	for c := range p.Conns {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.Addr)
		if err != nil {
			r.closeConns()
			return nil, fmt.Errorf("load: dial %s: %w", p.Addr, err)
		}
		pc := &pacedConn{conn: conn.(*net.TCPConn)}
		r.conns = append(r.conns, pc)
		if pc.raw, err = pc.conn.SyscallConn(); err != nil {
			r.closeConns()
			return nil, err
		}
		pc.ring, pc.ends = p.ring(c)
	}
	// A cancelled ctx closes the connections, so that a write blocked on
	// a primary that stopped reading returns.
	unwatch := context.AfterFunc(ctx, r.closeConns)
	r.start = time.Now()
	go func() {
		defer close(r.done)
		r.err = r.writeLoop()
		unwatch()
		r.closeConns()
	}()
	return r, nil
}

func (r *PacedRun) closeConns() {
	for _, pc := range r.conns {
		pc.conn.Close()
	}
}

// Progress is the load's figures so far, as of its last wake-up. Safe to
// call from any goroutine.
func (r *PacedRun) Progress() PacedStats { return r.progress.load() }

// Done is closed when the load has ended: stopped, or failed (Stop says how).
func (r *PacedRun) Done() <-chan struct{} { return r.done }

// Stop stops the load, waits until every command written has been
// answered, and returns the load's figures and its first error (ctx's
// when it was cancelled). It may be called more than once.
func (r *PacedRun) Stop() (PacedStats, error) {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
	return r.stats, r.err
}

// writeLoop writes every connection's share each tick and reads replies
// every replyEvery, until Stop; then it reads the last replies.
func (r *PacedRun) writeLoop() error {
	// The loop keeps its thread, so that sleepUntil can sleep on it
	// unseen by the scheduler. It unlocks before it returns: a goroutine
	// that exits locked takes its thread with it, and a server the
	// harness started from that thread would get its Pdeathsig.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := r.p
	replyTicks := max(int64(replyEvery/p.Tick), 1)
	scratch := make([]byte, 64<<10) // replies, read and dropped
	st := &r.stats
	var lastTick int64
	for t := int64(1); ; t++ {
		at := r.start.Add(time.Duration(t) * p.Tick)
		sleepUntil(at)
		select {
		case <-r.stop:
			return r.drain(scratch)
		case <-r.ctx.Done():
			return r.ctx.Err()
		default:
		}
		now := time.Now()
		st.Wakeups++
		st.MaxLate = max(st.MaxLate, now.Sub(at))
		// The ticks that have passed: t itself, and any a late wake-up missed.
		t = max(t, int64(now.Sub(r.start)/p.Tick))
		st.Ticks = t
		var cmds, written int64
		for c, pc := range r.conns {
			k := p.due(t, c) - pc.sent
			if k <= 0 {
				continue
			}
			n, err := pc.write(k)
			if err != nil {
				if r.ctx.Err() != nil {
					return r.ctx.Err()
				}
				return fmt.Errorf("load: write: %w", err)
			}
			cmds, written = cmds+k, written+n
		}
		st.Commands += cmds
		st.Bytes += written
		st.Elapsed = now.Sub(r.start)
		r.progress.store(*st)
		if t-lastTick >= replyTicks {
			lastTick = t
			for _, pc := range r.conns {
				if err := pc.readReplies(scratch, false); err != nil {
					return err
				}
			}
		}
	}
}

// drain reads every reply still owed, within drainTimeout.
func (r *PacedRun) drain(scratch []byte) error {
	deadline := time.Now().Add(drainTimeout)
	for _, pc := range r.conns {
		if err := pc.conn.SetReadDeadline(deadline); err != nil {
			return err
		}
		if err := pc.readReplies(scratch, true); err != nil {
			return err
		}
	}
	return nil
}

// write writes the ring's next k commands and returns the bytes written:
// one write, or one writev where the ring wraps, per ring's length.
func (pc *pacedConn) write(k int64) (int64, error) {
	var written int64
	for k > 0 {
		n := int(min(k, int64(len(pc.ends))))
		from := pc.offset(pc.next)
		var err error
		var m int64
		if end := pc.next + n; end <= len(pc.ends) {
			var w int
			w, err = pc.conn.Write(pc.ring[from:pc.ends[end-1]])
			m = int64(w)
		} else {
			bufs := net.Buffers{pc.ring[from:], pc.ring[:pc.ends[end-len(pc.ends)-1]]}
			m, err = bufs.WriteTo(pc.conn)
		}
		written += m
		if err != nil {
			return written, err
		}
		pc.next = (pc.next + n) % len(pc.ends)
		pc.sent += int64(n)
		k -= int64(n)
	}
	return written, nil
}

// offset is where command i of the ring starts.
func (pc *pacedConn) offset(i int) int {
	if i == 0 {
		return 0
	}
	return pc.ends[i-1]
}

// readReplies reads the replies owed: those that have arrived when wait is
// false (a read that would block ends it), all of them when it is true
// (within the connection's read deadline).
func (pc *pacedConn) readReplies(scratch []byte, wait bool) error {
	for pc.answered < pc.sent {
		var n int
		var rerr error
		if err := pc.raw.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), scratch)
			// false: the runtime waits until the socket is readable and calls again.
			return !(wait && rerr == syscall.EAGAIN)
		}); err != nil {
			return fmt.Errorf("load: read reply: %w", err)
		}
		switch {
		case rerr == syscall.EAGAIN:
			return nil
		case rerr == syscall.EINTR:
			continue
		case rerr != nil:
			return fmt.Errorf("load: read reply: %w", rerr)
		case n == 0:
			return fmt.Errorf("load: read reply: %w", io.ErrUnexpectedEOF)
		}
		if err := pc.replies(scratch[:n]); err != nil {
			return err
		}
	}
	return nil
}

// replies counts the one-line replies in b, which continues the bytes read
// before it, and checks that each is +… or :….
func (pc *pacedConn) replies(b []byte) error {
	for len(b) > 0 {
		if !pc.midLine {
			if b[0] != '+' && b[0] != ':' {
				line, _, _ := bytes.Cut(b, []byte("\r\n"))
				return fmt.Errorf("%w: %q", ErrReply, line)
			}
			pc.midLine = true
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		pc.answered++
		pc.midLine = false
		b = b[i+1:]
	}
	return nil
}

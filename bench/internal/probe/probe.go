// Package probe measures how long a write to the primary takes to reach
// each replica: a Publisher PUBLISHes its send time on the primary at a
// fixed pace (PUBLISH is replicated, and a replica delivers it to its own
// subscribers as it applies the stream), and a Subscriber on each replica
// records when each message arrived. Both run in this process, so the
// delay is read on one monotonic clock.
package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Channel is the channel the probe publishes on.
const Channel = "bench:probe"

// Clock is the time base shared by a publisher and its subscribers: a
// message carries its send time as nanoseconds since Clock's start.
type Clock struct{ start time.Time }

// NewClock starts a clock.
func NewClock() *Clock { return &Clock{start: time.Now()} }

// Now is the time since the clock started, on the monotonic clock.
func (c *Clock) Now() time.Duration { return time.Since(c.start) }

// Publisher publishes one message every Every on the server at Addr.
type Publisher struct {
	Addr  string
	Every time.Duration
	Clock *Clock
}

// PublisherRun is a running publisher.
type PublisherRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	sent   []time.Duration // send time of message i (its sequence number)
	err    error
}

// Start connects and publishes until Stop or ctx ends.
func (p Publisher) Start(ctx context.Context) (*PublisherRun, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.Addr)
	if err != nil {
		return nil, fmt.Errorf("probe publisher: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &PublisherRun{cancel: cancel, done: make(chan struct{})}
	// Replies (":<receivers>") are read and dropped as they come, so that
	// the primary never holds them back.
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	go func() {
		defer close(r.done)
		defer conn.Close()
		next := time.Now()
		var buf []byte
		for seq := 0; ; seq++ {
			next = next.Add(p.Every)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			at := p.Clock.Now()
			payload := strconv.Itoa(seq) + ":" + strconv.FormatInt(int64(at), 10)
			buf = appendCommand(buf[:0], "PUBLISH", Channel, payload)
			r.mu.Lock()
			r.sent = append(r.sent, at)
			r.mu.Unlock()
			if _, err := conn.Write(buf); err != nil {
				r.mu.Lock()
				r.err = fmt.Errorf("probe publisher: %w", err)
				r.mu.Unlock()
				return
			}
		}
	}()
	return r, nil
}

// Stop stops publishing and returns the send time of every message, by
// sequence number.
func (r *PublisherRun) Stop() ([]time.Duration, error) {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent, r.err
}

// Sent is how many messages have been sent so far.
func (r *PublisherRun) Sent() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	return b
}

// Subscriber records when each probe message arrives at one server.
type Subscriber struct {
	conn  net.Conn
	clock *Clock
	done  chan struct{}
	mu    sync.Mutex
	got   map[int]time.Duration // arrival by sequence number
	err   error
}

// Subscribe connects to addr and subscribes to Channel; it returns once
// the subscription is confirmed.
func Subscribe(ctx context.Context, addr string, clock *Clock) (*Subscriber, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("probe subscriber: %w", err)
	}
	if _, err := conn.Write(appendCommand(nil, "SUBSCRIBE", Channel)); err != nil {
		conn.Close()
		return nil, fmt.Errorf("probe subscriber: %w", err)
	}
	rd := bufio.NewReader(conn)
	if _, err := readArray(rd); err != nil { // subscribe, channel, 1
		conn.Close()
		return nil, fmt.Errorf("probe subscriber %s: %w", addr, err)
	}
	s := &Subscriber{conn: conn, clock: clock, done: make(chan struct{}), got: map[int]time.Duration{}}
	go s.read(rd)
	return s, nil
}

func (s *Subscriber) read(rd *bufio.Reader) {
	defer close(s.done)
	for {
		msg, err := readArray(rd)
		at := s.clock.Now()
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		if len(msg) != 3 || msg[0] != "message" || msg[1] != Channel {
			continue
		}
		seq, _, ok := cutInt(msg[2])
		if !ok {
			continue
		}
		s.mu.Lock()
		s.got[seq] = at
		s.mu.Unlock()
	}
}

// Has reports whether message seq has arrived.
func (s *Subscriber) Has(seq int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.got[seq]
	return ok
}

// Close ends the subscription and returns the arrival time of each
// message, by sequence number.
func (s *Subscriber) Close() map[int]time.Duration {
	s.conn.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func cutInt(payload string) (int, string, bool) {
	for i := 0; i < len(payload); i++ {
		if payload[i] == ':' {
			n, err := strconv.Atoi(payload[:i])
			return n, payload[i+1:], err == nil
		}
	}
	return 0, "", false
}

var errProtocol = errors.New("unexpected reply")

// readArray reads one RESP2 array of bulk strings or integers.
func readArray(rd *bufio.Reader) ([]string, error) {
	line, err := readLine(rd)
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[0] != '*' {
		return nil, fmt.Errorf("%w: %q", errProtocol, line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > 16 {
		return nil, fmt.Errorf("%w: %q", errProtocol, line)
	}
	out := make([]string, 0, n)
	for range n {
		line, err := readLine(rd)
		if err != nil {
			return nil, err
		}
		switch {
		case len(line) > 0 && line[0] == ':':
			out = append(out, line[1:])
		case len(line) > 0 && line[0] == '$':
			size, err := strconv.Atoi(line[1:])
			if err != nil || size < 0 || size > 1<<20 {
				return nil, fmt.Errorf("%w: %q", errProtocol, line)
			}
			b := make([]byte, size+2)
			if _, err := io.ReadFull(rd, b); err != nil {
				return nil, err
			}
			out = append(out, string(b[:size]))
		default:
			return nil, fmt.Errorf("%w: %q", errProtocol, line)
		}
	}
	return out, nil
}

func readLine(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", fmt.Errorf("%w: %q", errProtocol, line)
	}
	return line[:len(line)-2], nil
}

// Delays are the delays of the messages sent in a window, in microseconds,
// one per message that every subscriber of a group received: the last of
// the group's arrivals (the replica that got it last), and the first.
type Delays struct {
	First, Last []float64
	Lost        int // messages of the window some subscriber never got
}

// Measure pairs sends with a group's arrivals: the messages with sequence
// numbers in [from, to).
func Measure(sent []time.Duration, from, to int, group []map[int]time.Duration) Delays {
	var d Delays
	for seq := from; seq < to && seq < len(sent); seq++ {
		var first, last time.Duration
		ok := true
		for i, got := range group {
			at, has := got[seq]
			if !has {
				ok = false
				break
			}
			if i == 0 || at < first {
				first = at
			}
			if i == 0 || at > last {
				last = at
			}
		}
		if !ok {
			d.Lost++
			continue
		}
		d.First = append(d.First, float64(first-sent[seq])/1e3)
		d.Last = append(d.Last, float64(last-sent[seq])/1e3)
	}
	return d
}

// Quantiles are a set of delays summarised, in microseconds.
type Quantiles struct {
	N                        int
	P50, P90, P99, P999, Max float64
}

// Summarise returns xs's quantiles (nearest rank); xs is not modified.
func Summarise(xs []float64) Quantiles {
	if len(xs) == 0 {
		return Quantiles{}
	}
	v := slices.Clone(xs)
	slices.Sort(v)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(v)))) - 1
		return v[min(max(i, 0), len(v)-1)]
	}
	return Quantiles{N: len(v), P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: v[len(v)-1]}
}

package downstream

import (
	"sync/atomic"
	"time"

	"github.com/replproxy/replproxy/replbuf"
)

// How stale a replica is, and where the time goes: the stream keeps when
// its bytes arrived from the primary (replbuf's arrival marks), and a
// replica's position in it says which bytes it lacks.
//
//   - Delay: two ages at one moment, for INFO and the metrics: of the
//     oldest byte published and not yet written to the replica's socket
//     (unsent: the time inside the proxy), and of the oldest byte written
//     and not covered by its last REPLCONF ACK (unacked: the time since it
//     arrived, of which unsent is part and the rest is the network, the
//     socket buffers and the replica, including its ACK period, a second
//     for Redis).
//   - WriteDelays: a histogram of the time from a byte's arrival to its
//     write to a replica, observed once per write of the stream, for the
//     oldest byte in it, by where the write came from (WritePath). The
//     replicas have no class of their own, and 300 replicas are too many
//     for a histogram each; the path says which part of the proxy made a
//     byte wait.

// A Delay is how stale a replica is at one moment (Replica.Delay). Each age
// is 0 when nothing waits; a byte older than the stream's arrival marks
// reach (80 s or more of publishes) counts as old as the oldest mark,
// which makes the age a lower bound.
type Delay struct {
	// Unsent is the age of the oldest stream byte published and not yet
	// written to the replica's socket.
	Unsent time.Duration
	// Unacked is the age of the oldest stream byte written to the replica
	// and not covered by its last REPLCONF ACK: bytes written before the
	// first ACK count, so that a replica that never acknowledges (SYNC)
	// ages from its first byte, as Redis's lag does.
	Unacked time.Duration
}

// Delay returns how stale the replica is at now. Any goroutine: it reads
// the replica's atomics and the stream's arrival marks, and takes no lock.
func (r *Replica) Delay(now time.Time) Delay {
	if r.hist == nil {
		return Delay{}
	}
	gen, next, ok := r.position()
	if !ok {
		return Delay{} // no position in the stream yet: syncing
	}
	st := r.hist.Stream()
	var d Delay
	if next <= st.Offset() {
		d.Unsent = arrivalAge(st, gen, next, now)
	}
	if from := r.streamFrom.Load(); from > 0 {
		from = max(from, r.ackOff.Load()+1)
		if from < next {
			d.Unacked = arrivalAge(st, gen, from, now)
		}
	}
	return d
}

// position is the replica's next stream byte to write and its generation:
// its cursor's, or while it reads the stream log the log reader's; ok is
// false when it has neither (waiting for a snapshot, or between them for
// an instant).
func (r *Replica) position() (gen uint64, next int64, ok bool) {
	if c := r.cursor.Load(); c != nil {
		return c.Generation(), c.Offset(), true
	}
	if r.onDisk.Load() {
		return r.diskGen.Load(), r.diskOff.Load(), true
	}
	return 0, 0, false
}

// startStream records where the stream written to the replica on this
// connection begins, once: bytes from there on that it has not
// acknowledged are its unacked bytes, its ACK offset before the first ACK
// being 0, not where it is.
func (r *Replica) startStream(off int64) { r.streamFrom.CompareAndSwap(0, off) }

// arrivalAge is how long before now the byte at off of generation gen
// arrived: 0 when the marks do not cover it (not yet published, another
// generation), as old as the oldest mark when it is older than they reach.
func arrivalAge(st *replbuf.Stream, gen uint64, off int64, now time.Time) time.Duration {
	at, _ := st.Arrival(gen, off)
	if at.IsZero() {
		return 0
	}
	return max(now.Sub(at), 0)
}

// A WritePath is where a write of the stream to a replica came from.
type WritePath int

const (
	WriteInline   WritePath = iota // the producer's inline sender (inline.go): a caught-up replica
	WriteLoop                      // the replica's write loop, from memory: a replica behind, over TLS or compressed
	WriteLog                       // the replica's write loop, from the stream log: out of the memory window
	NumWritePaths                  // not a path: how many there are
)

func (p WritePath) String() string {
	switch p {
	case WriteInline:
		return "inline"
	case WriteLoop:
		return "loop"
	case WriteLog:
		return "log"
	}
	return "unknown"
}

// relayBounds are the upper bounds of WriteDelays' buckets, from the fine
// arrival marks' precision (100 µs) to past repl-timeout's default's
// half, about three a decade. Read-only.
var relayBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second,
}

// RelayBounds returns the upper bounds of WriteDelays' buckets, ascending.
func RelayBounds() []time.Duration { return relayBounds[:] }

// WriteDelays is the histogram of the time from a stream byte's arrival to
// its write to a replica, per WritePath: the server's (INFO has none of it;
// /metrics renders it), added to by every replica's writes. Its zero value
// is ready; every field is atomic, so any goroutine observes and reads.
type WriteDelays struct {
	paths [NumWritePaths]relayHistogram
}

// relayHistogram is one path's buckets: counts per bucket (not
// cumulative; the last is above every bound) and the sum in nanoseconds.
// Padded so that the producer's path and the write loops' do not share a
// cache line.
type relayHistogram struct {
	counts [len(relayBounds) + 1]atomic.Int64
	sum    atomic.Int64
	_      [64]byte
}

// RelayCounts is one path's histogram at one moment: Buckets[i] counts the
// observations at most RelayBounds()[i] and above the bound before it, the
// last those above every bound. Read without a lock while writes go on, a
// sum and the counts may be an observation apart.
type RelayCounts struct {
	Buckets [len(relayBounds) + 1]int64
	Sum     time.Duration
}

// Read returns path p's histogram as it stands.
func (d *WriteDelays) Read(p WritePath) RelayCounts {
	h := &d.paths[p]
	var c RelayCounts
	for i := range h.counts {
		c.Buckets[i] = h.counts[i].Load()
	}
	c.Sum = time.Duration(h.sum.Load())
	return c
}

// observe adds one write's delay to path p's histogram. Two atomic adds
// and a scan of 17 bounds.
func (d *WriteDelays) observe(p WritePath, delay time.Duration) {
	i := 0
	for i < len(relayBounds) && delay > relayBounds[i] {
		i++
	}
	h := &d.paths[p]
	h.counts[i].Add(1)
	h.sum.Add(int64(delay))
}

// wrote observes a write of the stream that began at offset off of
// generation gen: the time since that byte, its oldest, arrived. One clock
// read; nothing when d is nil (tests) or the byte has no mark (a stream
// that keeps none). A byte older than the marks reach counts as old as the
// oldest mark, the least it can be.
func (d *WriteDelays) wrote(p WritePath, st *replbuf.Stream, gen uint64, off int64) {
	if d == nil {
		return
	}
	at, _ := st.Arrival(gen, off)
	if at.IsZero() {
		return
	}
	d.observe(p, max(time.Since(at), 0))
}

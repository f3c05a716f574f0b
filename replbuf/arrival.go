package replbuf

import (
	"sync/atomic"
	"time"
)

// Arrival times: a stream made with Config.Arrivals keeps when its bytes
// arrived, so that a reader can tell how long a byte has waited for it
// (Stream.Arrival). They are kept as marks (end, at): the bytes after the
// previous mark's end, up to end, arrived at at. The producer dates what it
// fills (Stream.Arrived: the proxy's stream loop, right after each read of
// the primary's socket) and a publish turns those dates into marks, so that
// marks only ever hold published offsets, in order, and bytes filled and
// then discarded (Discard, Reset) leave none. A publish of bytes nobody
// dated dates them with the stream's clock (Config.Now).
//
// Two rings hold the marks, each written by the producer alone and read by
// any goroutine without a lock:
//
//   - fine: fineMarks marks, a new one opened only fineMerge (100 µs) after
//     the last was: the recent past, at least the last 0.4 s however fast
//     the stream is published, and ~4 s at the proxy's coalesced pace (one
//     read per millisecond);
//   - coarse: coarseMarks marks, a new one opened only coarseMerge (10 ms)
//     after the last: at least the last 80 s. It is fed the fine ring's
//     marks as each is closed (a newer one opened), so it holds everything
//     but the fine ring's newest mark.
//
// A read dated within a ring's window of its newest mark extends that mark
// (its end moves, its time stays), so a mark dates its bytes by the first
// of the reads it covers: an age read from the fine ring is at most 100 µs
// too old, one from the coarse ring at most 10 ms, never too young. A byte
// older than both rings reach is reported as such, with the oldest mark's
// time: its age is then at least that mark's, less the window.
//
// What the producer stores is what a reader needs and no more, since each
// atomic store is a full barrier (tens of nanoseconds): the fine ring's newest mark ends
// where the stream's published end is, which Publish stores anyway, so
// extending it stores nothing; opening a mark stores the newest one's end
// (final now), the new one's time and the count, and feeds the closed mark
// to the coarse ring, whose marks store their ends.
//
// Reading without a lock: marks' ends and times are atomics, and a ring's
// count of marks opened (n) is stored after a new mark's fields. The
// producer overwrites the slot of mark i-size while it opens mark i, with n
// still i, so a reader trusts only marks [n-size+1, n-1], and after its
// reads checks that n has not moved past its oldest one (the seqlock idea,
// with the mark's index as the sequence); for the fine ring, whose newest
// mark's end it takes from the stream's end (loaded after n: the producer
// stores n before the end), that n has not moved at all, lest bytes of a
// mark opened meanwhile be dated by the one before. A reader that saw a
// change asks again, and after tornRetries tries asks the coarse ring,
// which holds all but the newest fine mark: marks open at most once per
// 100 µs, so a byte of that one is younger than that. Nothing allocates
// once the rings exist: they
// are made whole with the stream, and anew, for a new generation's
// offsets, by Reset.

const (
	fineMarks   = 4096
	fineMerge   = 100 * time.Microsecond
	coarseMarks = 8192
	coarseMerge = 10 * time.Millisecond

	// pendingFills bounds the reads dated and not yet published
	// (Stream.Arrived): a command cut across more reads than this (a value
	// of several MiB read as it trickles in) has its later reads dated by
	// the last date kept, early by at most the time they took to arrive.
	pendingFills = 64

	// tornRetries bounds how often Arrival reads a ring again after the
	// producer changed the marks it was reading: opened a fine mark
	// meanwhile, or overwrote the coarse ones a reader that slept through a
	// whole ring's worth was reading.
	tornRetries = 3
)

// An arrivalMark says that the bytes after the previous mark's end, up to
// end, arrived at at (nanoseconds since the stream's clock base). Both are
// written by the producer alone; a fine ring's newest mark's end is not
// stored until a newer one is opened.
type arrivalMark struct {
	end atomic.Int64
	at  atomic.Int64
}

// A markRing is one ring of marks; see above.
type markRing struct {
	marks []arrivalMark // a power of two long; slot i&mask holds mark i
	mask  uint64
	merge int64         // nanoseconds: a read dated this close after the newest mark extends it
	n     atomic.Uint64 // marks opened; the newest is n-1; producer-only writes

	// Owned by the producer: the marks opened (n's value), the newest
	// mark's time, and the end of the bytes it dates so far.
	opened  uint64
	lastAt  int64
	lastEnd int64
}

func newMarkRing(size int, merge time.Duration) markRing {
	return markRing{marks: make([]arrivalMark, size), mask: uint64(size - 1), merge: int64(merge)}
}

// arrivals is one stream generation's marks.
type arrivals struct {
	gen uint64 // the generation whose offsets the marks hold; set before the stream publishes the pointer
	// published is the stream's published end, where the fine ring's
	// newest mark ends; the producer stores it after the marks.
	published *atomic.Int64
	fine      markRing
	coarse    markRing
}

func newArrivals(gen uint64, published *atomic.Int64) *arrivals {
	return &arrivals{gen: gen, published: published,
		fine: newMarkRing(fineMarks, fineMerge), coarse: newMarkRing(coarseMarks, coarseMerge)}
}

// mark records that the bytes up to end (past the last marked) arrived at
// at, before the stream publishes them. Producer only.
func (a *arrivals) mark(end, at int64) {
	f := &a.fine
	if f.opened > 0 {
		if end <= f.lastEnd {
			return // dated already: ends only grow
		}
		if at-f.lastAt < f.merge {
			f.lastEnd = end // the stream's published end will say it
			return
		}
		// The newest mark ends here for good: store its end, and hand
		// it to the coarse ring.
		f.marks[(f.opened-1)&f.mask].end.Store(f.lastEnd)
		a.coarse.mark(f.lastEnd, f.lastAt)
	}
	f.marks[f.opened&f.mask].at.Store(at)
	f.opened++
	f.n.Store(f.opened) // after the fields: a reader that sees it sees them
	f.lastAt, f.lastEnd = at, end
}

// mark is arrivals.mark for the coarse ring, whose marks store their ends.
func (r *markRing) mark(end, at int64) {
	if r.opened > 0 {
		if end <= r.lastEnd {
			return
		}
		if at-r.lastAt < r.merge {
			r.marks[(r.opened-1)&r.mask].end.Store(end)
			r.lastEnd = end
			return
		}
	}
	m := &r.marks[r.opened&r.mask]
	m.at.Store(at)
	m.end.Store(end)
	r.opened++
	r.n.Store(r.opened)
	r.lastAt, r.lastEnd = at, end
}

// markResult says what a ring knows of a byte.
type markResult int

const (
	markFound markResult = iota // the mark covering it: its time is the byte's
	markOlder                   // it is older than the ring reaches: the time is the oldest mark's
	markNone                    // no mark covers it: not yet published, or nothing marked yet
	markTorn                    // the producer changed marks being read: ask again
)

// find returns the time of the mark covering offset off, searching back
// from the newest mark (a byte asked about is usually recent) by doubling
// steps, then by halving between the last two. newest, when not nil, is
// where the newest mark ends (the fine ring's: the stream's published end),
// loaded after the count; nil reads it from the mark.
func (r *markRing) find(off int64, newest *atomic.Int64) (int64, markResult) {
	n := r.n.Load()
	if n == 0 {
		return 0, markNone
	}
	last := n - 1
	lastEnd := int64(0)
	if newest != nil {
		lastEnd = newest.Load()
	} else {
		lastEnd = r.marks[last&r.mask].end.Load()
	}
	end := func(i uint64) int64 {
		if i == last {
			return lastEnd
		}
		return r.marks[i&r.mask].end.Load()
	}
	// valid reports whether the marks from i on that were read still held
	// what was read: see the comment at the top.
	valid := func(i uint64) bool {
		if newest != nil {
			return r.n.Load() == n
		}
		return i+uint64(len(r.marks)) > r.n.Load()
	}
	if off > lastEnd {
		if !valid(last) {
			return 0, markTorn
		}
		return 0, markNone
	}
	size := uint64(len(r.marks))
	oldest := uint64(0) // the oldest mark whose slot is not being overwritten
	if n >= size {
		oldest = n - size + 1
	}
	hi := last // end(hi) >= off throughout
	var lo uint64
	for step := uint64(1); ; step *= 2 {
		if hi == oldest {
			// Nothing older is kept to say where hi's bytes begin, but
			// for the generation's first mark, which begins with it.
			at := r.marks[hi&r.mask].at.Load()
			if !valid(oldest) {
				return 0, markTorn
			}
			if oldest == 0 {
				return at, markFound
			}
			return at, markOlder
		}
		i := oldest
		if hi-oldest > step {
			i = hi - step
		}
		if end(i) < off {
			lo = i
			break
		}
		hi = i
	}
	for hi-lo > 1 { // end(lo) < off <= end(hi)
		mid := lo + (hi-lo)/2
		if end(mid) < off {
			lo = mid
		} else {
			hi = mid
		}
	}
	at := r.marks[hi&r.mask].at.Load()
	if !valid(lo) { // lo is the oldest mark read
		return 0, markTorn
	}
	return at, markFound
}

// find returns when the byte at offset off arrived: from the fine ring when
// it reaches that far back, else from the coarse one. exact is false when
// the byte is older than both reach (at is then the oldest mark's time); ok
// is false when no mark covers it.
func (a *arrivals) find(off int64) (at int64, exact, ok bool) {
	for try := range tornRetries {
		at, res := a.fine.find(off, a.published)
		switch res {
		case markFound:
			return at, true, true
		case markNone:
			return 0, false, false
		case markTorn:
			if try < tornRetries-1 {
				continue
			}
		}
		// Older than the fine ring reaches (or its marks kept changing
		// under the reader): the coarse one, which holds every mark the
		// fine ring closed.
		at, res = a.coarse.find(off, nil)
		switch res {
		case markFound:
			return at, true, true
		case markOlder:
			return at, false, true
		case markNone:
			return 0, false, false
		}
	}
	return 0, false, false
}

// A fillDate says that the bytes filled up to end arrived at at
// (nanoseconds since the stream's clock base): a read the producer dated
// (Arrived) whose bytes are not all published yet.
type fillDate struct{ end, at int64 }

// fillDates are the reads dated and not yet published, oldest first, in a
// ring of pendingFills; owned by the producer.
type fillDates struct {
	dates      [pendingFills]fillDate
	head, size int
}

// add dates the bytes filled up to end (past what is dated already, and
// past published, which is dated) at at. A read within the fine ring's
// window of the last one extends it, as the ring would, and so does every
// read once pendingFills are held.
func (d *fillDates) add(end, published, at int64) {
	if d.size == 0 {
		if end <= published {
			return
		}
	} else {
		last := &d.dates[(d.head+d.size-1)%pendingFills]
		if end <= last.end {
			return
		}
		if at-last.at < int64(fineMerge) || d.size == pendingFills {
			last.end = end
			return
		}
	}
	d.dates[(d.head+d.size)%pendingFills] = fillDate{end: end, at: at}
	d.size++
}

// covers reports whether every byte up to end is dated.
func (d *fillDates) covers(end int64) bool {
	return d.size > 0 && d.dates[(d.head+d.size-1)%pendingFills].end >= end
}

// publish turns the dates of the bytes up to end into marks of a, and
// forgets those wholly published.
func (d *fillDates) publish(a *arrivals, end int64) {
	for d.size > 0 {
		f := &d.dates[d.head]
		a.mark(min(f.end, end), f.at)
		if f.end > end {
			return
		}
		d.head = (d.head + 1) % pendingFills
		d.size--
	}
}

// clear forgets every date: the bytes filled and not published are gone.
func (d *fillDates) clear() { d.head, d.size = 0, 0 }

// Arrived dates the bytes filled so far and not dated yet: they arrived at
// at. The producer calls it right after the read that filled them (the
// proxy's stream loop reads the clock there anyway), so that Publish, which
// turns the dates into the marks Arrival reads, reads no clock of its own,
// and a command held back until its end arrives keeps the time of its first
// bytes. It does nothing on a stream made without Config.Arrivals. Arrived
// is a producer method; it allocates nothing.
func (s *Stream) Arrived(at time.Time) {
	if s.arr == nil {
		return
	}
	s.fillDates.add(s.filled.Load(), s.end.Load(), int64(at.Sub(s.base)))
}

// markPublished dates the bytes up to end, about to be published, in the
// marks: by the producer's dates, and by the clock for those it did not
// date. Before the end is stored, so that a reader that sees a byte
// published finds its mark.
func (s *Stream) markPublished(end int64) {
	if s.arr == nil {
		return
	}
	if !s.fillDates.covers(end) {
		s.fillDates.add(s.filled.Load(), s.end.Load(), int64(s.now().Sub(s.base)))
	}
	s.fillDates.publish(s.arr, end)
}

// Arrival returns when the byte at offset off of generation gen arrived:
// what the producer dated it (Arrived) or, undated, when it was published.
// ok is false when the marks do not tell: at is then the time of the oldest
// mark kept when the byte is older than they reach (its age is at least
// that mark's, less the coarse window), and zero when no mark covers it:
// not yet published, of another generation than the stream's, or a stream
// made without Config.Arrivals. A time from the marks errs early, by at
// most 100 µs for a byte of the last 0.4 s or more (the fine ring), and 10
// ms beyond (the coarse ring): see the package documentation.
//
// The time has the monotonic reading of the stream's clock when that has
// one (time.Now's): subtract it from a time.Now. Safe for concurrent use;
// it takes no lock and allocates nothing.
func (s *Stream) Arrival(gen uint64, off int64) (at time.Time, ok bool) {
	a := s.arrivals.Load()
	if a == nil || a.gen != gen {
		return time.Time{}, false
	}
	ns, exact, found := a.find(off)
	// The fine ring's newest mark ends at the stream's end, which Reset
	// moves to the new generation's after it replaced the rings: a reader
	// that took the old rings and the new end sees the new rings here.
	if !found || s.arrivals.Load() != a {
		return time.Time{}, false
	}
	return s.base.Add(time.Duration(ns)), exact
}

package history

import (
	"sync"
	"time"
)

// The stream log's lag, in bytes and seconds (Follower.Lag), from marks of
// the published end taken as the follower goes.

// lagMarkCount bounds the marks kept: one is taken per batch the follower
// takes, and only those past what the log holds are kept, so a few dozen
// cover a window of batches; past it new marks are skipped (see mark).
const lagMarkCount = 128

// lagMark says that by at, the stream was published up to off.
type lagMark struct {
	off int64
	at  time.Time
}

// lagMarks measures the log's lag (Follower.Lag). A mark (off, at) says
// that every byte up to off was published by at, so the first mark past
// what the log holds bounds the age of the oldest byte it lacks from
// below: it is at least now - at old. Marks are taken by the follower
// before each batch, by the syncer once a second and by every Lag, so the
// age is exact to a batch while the follower runs, and to a second (or the
// last look) while a write holds it; it errs low, never high. Its lock is a
// leaf, held for no I/O and no call out.
type lagMarks struct {
	sync.Mutex
	// Guarded by the mutex; written by the follower's goroutine.
	gen      uint64 // the stream generation appended is in
	appended int64  // the last offset the log holds
	valid    bool   // appended was set: the log follows or followed a stream
	ring     [lagMarkCount]lagMark
	head, n  int // the oldest mark's index in ring, and how many there are
}

// appendedTo records that the log holds generation gen's stream up to off,
// and forgets the marks it no longer needs. A new generation's offsets are
// another stream's: its marks start anew.
func (m *lagMarks) appendedTo(gen uint64, off int64) {
	m.Lock()
	defer m.Unlock()
	if gen != m.gen {
		m.head, m.n = 0, 0
	}
	m.gen, m.appended, m.valid = gen, off, true
	for m.n > 0 && m.ring[m.head].off <= off {
		m.head, m.n = (m.head+1)%lagMarkCount, m.n-1
	}
}

// mark records that by at the stream of generation gen was published up
// to end. A mark of another generation than the log's (read before a new
// one began) would date another stream's offsets, and is dropped. Nothing
// new since the newest mark keeps that one (its time is the earlier
// bound); with the ring full the mark is skipped, which only makes the age
// err lower for bytes no mark covers.
func (m *lagMarks) mark(gen uint64, end int64, at time.Time) {
	m.Lock()
	defer m.Unlock()
	if gen != m.gen || end <= m.appended || m.n == lagMarkCount {
		return
	}
	if m.n > 0 && m.ring[(m.head+m.n-1)%lagMarkCount].off >= end {
		return
	}
	m.ring[(m.head+m.n)%lagMarkCount] = lagMark{off: end, at: at}
	m.n++
}

// lag is Follower.Lag for a stream of generation gen published up to end.
// start gives the offset a stream of another generation than the log's
// starts after: all of it is lag. It is called without m's lock held (it
// takes the stream's).
func (m *lagMarks) lag(gen uint64, end int64, now time.Time, start func() int64) (int64, time.Duration) {
	m.Lock()
	valid, appended, sameGen := m.valid, m.appended, gen == m.gen
	var at time.Time
	for i := range m.n {
		if mk := m.ring[(m.head+i)%lagMarkCount]; mk.off > appended {
			at = mk.at
			break
		}
	}
	m.Unlock()
	if !valid {
		return 0, 0
	}
	if !sameGen {
		return max(end-start(), 0), 0
	}
	bytes := max(end-appended, 0)
	if bytes == 0 || at.IsZero() {
		return bytes, 0
	}
	return bytes, max(now.Sub(at), 0)
}

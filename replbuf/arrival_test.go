package replbuf

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// arrivalStart is the clock reading a test stream's marks count from.
var arrivalStart = time.Unix(1_700_000_000, 0)

// arrivalStream returns a stream that keeps arrival times, whose clock
// reads *now (arrivalStart at first).
func arrivalStream(t testing.TB) (*Stream, *time.Time) {
	t.Helper()
	now := arrivalStart
	s := NewStream(0, &Config{BacklogSize: -1, Arrivals: true, Now: func() time.Time { return now }})
	return s, &now
}

// fillAt fills n pattern bytes after the last filled one, unpublished, and
// dates them at.
func fillAt(t testing.TB, s *Stream, n int, at time.Time) {
	t.Helper()
	for n > 0 {
		p, err := s.FillCopy(pattern(s.Filled()+1, n))
		if err != nil {
			t.Fatal(err)
		}
		n -= len(p)
	}
	s.Arrived(at)
}

// publishAt fills n bytes, dates them at and publishes them.
func publishAt(t testing.TB, s *Stream, n int, at time.Time) {
	t.Helper()
	fillAt(t, s, n, at)
	if err := s.Publish(s.Filled()); err != nil {
		t.Fatal(err)
	}
}

// expectArrival checks what Arrival says of offset off.
func expectArrival(t testing.TB, s *Stream, off int64, want time.Time, wantOK bool) {
	t.Helper()
	got, ok := s.Arrival(s.Generation(), off)
	if !got.Equal(want) || ok != wantOK {
		t.Errorf("Arrival(%d) = %v, %v; want %v, %v", off, got.Sub(arrivalStart), ok, want.Sub(arrivalStart), wantOK)
	}
}

// TestArrivalLookup: every published byte is dated by the read that
// brought it, up to the publish's end and no further; a byte not yet
// published, of another generation, or of a stream that keeps no times
// has none.
func TestArrivalLookup(t *testing.T) {
	s, _ := arrivalStream(t)
	expectArrival(t, s, 1, time.Time{}, false) // nothing published
	t1, t2, t3 := arrivalStart.Add(time.Millisecond), arrivalStart.Add(3*time.Millisecond), arrivalStart.Add(10*time.Millisecond)
	publishAt(t, s, 100, t1)         // 1..100
	publishAt(t, s, 50, t2)          // 101..150
	publishAt(t, s, 3*BlockSize, t3) // 151..: across blocks
	end := s.Offset()
	for _, c := range []struct {
		off  int64
		want time.Time
	}{{1, t1}, {50, t1}, {100, t1}, {101, t2}, {150, t2}, {151, t3}, {BlockSize + 7, t3}, {end, t3}} {
		expectArrival(t, s, c.off, c.want, true)
	}
	expectArrival(t, s, end+1, time.Time{}, false)
	if got, ok := s.Arrival(s.Generation()+1, 1); ok || !got.IsZero() {
		t.Errorf("Arrival of another generation = %v, %v; want none", got, ok)
	}

	plain := NewStream(0, nil)
	if err := plain.Append([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	plain.Arrived(t1) // does nothing
	if got, ok := plain.Arrival(0, 1); ok || !got.IsZero() {
		t.Errorf("Arrival on a stream without Config.Arrivals = %v, %v; want none", got, ok)
	}
}

// TestArrivalMerge: reads less than fineMerge after a mark was opened
// extend it, so a byte's time is the first of the reads its mark covers:
// early by less than the window, never late.
func TestArrivalMerge(t *testing.T) {
	s, _ := arrivalStream(t)
	const step = 30 * time.Microsecond
	var ends []int64
	for k := range 20 {
		publishAt(t, s, 10, arrivalStart.Add(time.Duration(k)*step))
		ends = append(ends, s.Offset())
	}
	opened := s.arr.fine.n.Load()
	perMark := uint64((fineMerge + step - 1) / step) // the most reads a mark spans
	if opened >= 20 || opened < (20+perMark-1)/perMark {
		t.Errorf("%d fine marks for 20 reads %v apart: want them merged within %v", opened, step, fineMerge)
	}
	for k, end := range ends {
		read := arrivalStart.Add(time.Duration(k) * step)
		for _, off := range []int64{end - 9, end} {
			got, ok := s.Arrival(0, off)
			if !ok || got.After(read) || read.Sub(got) >= fineMerge {
				t.Errorf("offset %d read at %v: Arrival %v, %v; want within %v before", off, read.Sub(arrivalStart), got.Sub(arrivalStart), ok, fineMerge)
			}
		}
	}
	// The first mark is opened by the first read and takes the next three
	// (30, 60 and 90 µs later); the fifth opens another.
	expectArrival(t, s, ends[3], arrivalStart, true)
	expectArrival(t, s, ends[4], arrivalStart.Add(4*step), true)
}

// TestArrivalWrap: once the fine ring has wrapped, older bytes are dated by
// the coarse ring, within coarseMerge; once the coarse ring has wrapped
// too, a byte older than it reaches is reported as such, with the oldest
// mark's time, which bounds its age from below; the newest are exact
// throughout.
func TestArrivalWrap(t *testing.T) {
	s, _ := arrivalStream(t)
	const step = time.Millisecond // every read a fine mark, every tenth a coarse one
	at := func(k int) time.Time { return arrivalStart.Add(time.Duration(k) * step) }
	const chunk = 10
	offOf := func(k int) int64 { return int64(k*chunk + 1) } // the first byte of read k
	reads := 0
	publishTo := func(n int) {
		for ; reads < n; reads++ {
			publishAt(t, s, chunk, at(reads))
		}
	}

	publishTo(2 * fineMarks)
	for _, k := range []int{reads - 1, reads - fineMarks + 2} { // the fine ring's
		expectArrival(t, s, offOf(k), at(k), true)
	}
	for _, k := range []int{0, 1, 5, reads - fineMarks - 5} { // the coarse ring's
		got, ok := s.Arrival(0, offOf(k))
		if !ok || got.After(at(k)) || at(k).Sub(got) >= coarseMerge {
			t.Errorf("read %d at %v: Arrival %v, %v; want within %v before", k, at(k).Sub(arrivalStart), got.Sub(arrivalStart), ok, coarseMerge)
		}
	}

	publishTo(int(coarseMarks*coarseMerge/step) + 5*fineMarks)
	oldestKept := s.arr.coarse.n.Load() - coarseMarks + 1
	oldestAt := arrivalStart.Add(time.Duration(s.arr.coarse.marks[oldestKept&s.arr.coarse.mask].at.Load()))
	for _, k := range []int{30000, reads - fineMarks - 5} { // still the coarse ring's
		got, ok := s.Arrival(0, offOf(k))
		if !ok || got.After(at(k)) || at(k).Sub(got) >= coarseMerge {
			t.Errorf("read %d at %v: Arrival %v, %v; want within %v before", k, at(k).Sub(arrivalStart), got.Sub(arrivalStart), ok, coarseMerge)
		}
	}
	for _, k := range []int{0, 1000, 20000} { // older than it reaches
		got, ok := s.Arrival(0, offOf(k))
		if ok || !got.Equal(oldestAt) || !at(k).Before(got.Add(coarseMerge)) {
			t.Errorf("read %d at %v, older than the rings: Arrival %v, %v; want the oldest mark's time %v, not ok",
				k, at(k).Sub(arrivalStart), got.Sub(arrivalStart), ok, oldestAt.Sub(arrivalStart))
		}
	}
	expectArrival(t, s, s.Offset(), at(reads-1), true)
}

// TestArrivalHeldBack: bytes filled and published later (a command cut
// across reads) keep the time of the read that brought them; bytes filled
// and discarded leave no date, so that the bytes filled at their offsets
// later get their own.
func TestArrivalHeldBack(t *testing.T) {
	s, _ := arrivalStream(t)
	t1, t2 := arrivalStart.Add(time.Millisecond), arrivalStart.Add(5*time.Millisecond)
	fillAt(t, s, 100, t1) // 1..100
	if err := s.Publish(40); err != nil {
		t.Fatal(err)
	}
	fillAt(t, s, 100, t2) // 101..200
	if err := s.Publish(200); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		want time.Time
	}{{1, t1}, {40, t1}, {41, t1}, {100, t1}, {101, t2}, {200, t2}} {
		expectArrival(t, s, c.off, c.want, true)
	}

	t3, t4 := arrivalStart.Add(time.Second), arrivalStart.Add(2*time.Second)
	fillAt(t, s, 100, t3) // 201..300, cut by the link's end
	s.Discard()
	publishAt(t, s, 100, t4) // 201..300 again, after a reconnect
	expectArrival(t, s, 201, t4, true)
	expectArrival(t, s, 300, t4, true)
}

// TestArrivalUndated: bytes published without a date from the producer are
// dated by the stream's clock when published.
func TestArrivalUndated(t *testing.T) {
	s, now := arrivalStream(t)
	*now = arrivalStart.Add(7 * time.Millisecond)
	if err := s.Append(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	expectArrival(t, s, 10, *now, true)
	// Dated bytes keep their date; those filled after the date get the clock's.
	fillAt(t, s, 10, arrivalStart.Add(8*time.Millisecond))
	if _, err := s.FillCopy(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	*now = arrivalStart.Add(20 * time.Millisecond)
	if err := s.Publish(s.Filled()); err != nil {
		t.Fatal(err)
	}
	expectArrival(t, s, 20, arrivalStart.Add(8*time.Millisecond), true)
	expectArrival(t, s, 30, *now, true)
}

// TestArrivalReset: a new generation's marks start anew: the old one's are
// not known under its offsets, which the new one may repeat.
func TestArrivalReset(t *testing.T) {
	s, _ := arrivalStream(t)
	publishAt(t, s, 100, arrivalStart.Add(time.Millisecond))
	fillAt(t, s, 10, arrivalStart.Add(2*time.Millisecond)) // unpublished: dropped by Reset
	old := s.Generation()
	s.Reset(50)
	if got, ok := s.Arrival(old, 60); ok || !got.IsZero() {
		t.Errorf("Arrival of the old generation after Reset = %v, %v; want none", got, ok)
	}
	expectArrival(t, s, 51, time.Time{}, false)
	t2 := arrivalStart.Add(time.Second)
	publishAt(t, s, 100, t2) // 51..150
	expectArrival(t, s, 51, t2, true)
	expectArrival(t, s, 150, t2, true)
}

// TestArrivalConcurrent: readers ask about published bytes while the
// producer publishes, wrapping both rings; every answer is one the marks
// allow (race detector on: the readers take no lock).
func TestArrivalConcurrent(t *testing.T) {
	s, _ := arrivalStream(t)
	const chunk, step = 7, 23 * time.Microsecond
	reads := 300_000
	if testing.Short() {
		reads = 50_000
	}
	readAt := func(off int64) time.Time { // when the read holding off was made
		return arrivalStart.Add(time.Duration((off+chunk-1)/chunk) * step)
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	var asked, unknown atomic.Int64
	for r := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for !done.Load() {
				end := s.Offset()
				if end == 0 {
					continue
				}
				// Mostly recent bytes, as a replica's are, some far back.
				back := rng.Int64N(min(end, 2000))
				if rng.IntN(8) == 0 {
					back = rng.Int64N(end)
				}
				off := end - back
				got, ok := s.Arrival(0, off)
				want := readAt(off)
				asked.Add(1)
				switch {
				case ok && (got.After(want) || want.Sub(got) >= coarseMerge):
					t.Errorf("offset %d read at %v: Arrival %v, want within %v before", off, want.Sub(arrivalStart), got.Sub(arrivalStart), coarseMerge)
				case !ok && got.IsZero():
					unknown.Add(1) // torn three times: the reader slept through whole rings
				case !ok && !want.Before(got.Add(coarseMerge)):
					t.Errorf("offset %d read at %v: older than the rings, Arrival %v", off, want.Sub(arrivalStart), got.Sub(arrivalStart))
				}
			}
		})
	}
	for k := 1; k <= reads; k++ {
		fillAt(t, s, chunk, arrivalStart.Add(time.Duration(k)*step))
		if err := s.Publish(s.Filled()); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	if n := asked.Load(); n == 0 || unknown.Load()*100 > n {
		t.Errorf("%d of %d lookups found nothing", unknown.Load(), n)
	}
	t.Logf("%d lookups, %d found nothing", asked.Load(), unknown.Load())
}

// TestArrivalAllocs: dating, publishing and looking up allocate nothing.
func TestArrivalAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	s := NewStream(0, &Config{BacklogSize: 4 * BlockSize, Arrivals: true})
	r := &limitedPrefilled{n: 4 << 10}
	var ok bool
	expectNoAllocs(t, "read dated, published and looked up", func() {
		if _, err := s.Fill(r); err != nil {
			t.Fatal(err)
		}
		s.Arrived(time.Now())
		if err := s.Publish(s.Filled() - 100); err != nil {
			t.Fatal(err)
		}
		_, ok = s.Arrival(0, s.Offset()-1000)
	})
	if !ok {
		t.Error("no arrival for a byte just published")
	}
}

// TestMarkRingBounds: a ring of 8 that has wrapped trusts its 7 newest
// marks (the eighth slot is the one the next mark overwrites), finds a
// byte by the mark covering it, says a byte of the oldest kept mark or
// before is older than it reaches (where that mark begins is lost), and
// dates nothing past the newest mark's end.
func TestMarkRingBounds(t *testing.T) {
	r := newMarkRing(8, 0)
	for k := range 20 { // mark k: (10k, 10k+10] at k
		r.mark(int64(10*k+10), int64(k))
	}
	for _, c := range []struct {
		off  int64
		at   int64
		want markResult
	}{
		{200, 19, markFound}, {191, 19, markFound}, {190, 18, markFound}, {141, 14, markFound},
		{140, 13, markOlder}, {131, 13, markOlder}, {5, 13, markOlder}, {201, 0, markNone},
	} {
		if at, res := r.find(c.off, nil); at != c.at || res != c.want {
			t.Errorf("find(%d) = %d, %d; want %d, %d", c.off, at, res, c.at, c.want)
		}
	}
	// Before it wraps, the first mark begins the generation: found.
	r = newMarkRing(8, 0)
	r.mark(10, 0)
	r.mark(20, 1)
	if at, res := r.find(3, nil); at != 0 || res != markFound {
		t.Errorf("find(3) in the first mark = %d, %d; want 0, found", at, res)
	}
}

// TestFineRingNewestEnd: the fine ring's newest mark ends at the stream's
// published end, so extending it stores nothing; opening the next stores
// its end and hands it to the coarse ring.
func TestFineRingNewestEnd(t *testing.T) {
	var published atomic.Int64
	a := newArrivals(0, &published)
	ms := int64(time.Millisecond)
	a.mark(10, 0)
	published.Store(10)
	a.mark(20, 50) // 50 ns later: the same mark
	if n := a.fine.n.Load(); n != 1 || a.fine.marks[0].end.Load() != 0 {
		t.Errorf("%d fine marks, the first's end stored as %d: want one, its end not stored", n, a.fine.marks[0].end.Load())
	}
	if at, res := a.fine.find(15, &published); res != markNone {
		t.Errorf("find(15) before the end is published = %d, %d; want none", at, res)
	}
	published.Store(20)
	if at, res := a.fine.find(15, &published); at != 0 || res != markFound {
		t.Errorf("find(15) = %d, %d; want 0, found", at, res)
	}
	a.mark(30, ms)
	published.Store(30)
	if end := a.fine.marks[0].end.Load(); end != 20 {
		t.Errorf("the first mark's end stored as %d once the second opened, want 20", end)
	}
	if at, res := a.coarse.find(15, nil); at != 0 || res != markFound || a.coarse.n.Load() != 1 {
		t.Errorf("coarse find(15) = %d, %d with %d marks; want the closed fine mark", at, res, a.coarse.n.Load())
	}
	if at, res := a.fine.find(25, &published); at != ms || res != markFound {
		t.Errorf("find(25) = %d, %d; want %d, found", at, res, ms)
	}
}

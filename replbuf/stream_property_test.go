package replbuf

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader returns its bytes in reads of the given sizes (or less, when the
// buffer it is handed is smaller), like a socket.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (r *chunkReader) Read(p []byte) (int, error) { return r.ReadBuffers([][]byte{p}) }

// ReadBuffers is Read into several buffers, as readv: one read's bytes (the
// next size, or less when the buffers hold less) spread over bufs in order.
func (r *chunkReader) ReadBuffers(bufs [][]byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = min(n, r.sizes[0])
		r.sizes = r.sizes[1:]
	}
	got := 0
	for _, b := range bufs {
		if got == n {
			break
		}
		got += copy(b, r.data[got:n])
	}
	r.data = r.data[got:]
	return got, nil
}

// model is the trivial reference: every byte of the generation in one slice.
type model struct {
	start  int64  // offset before the first byte
	bytes  []byte // published bytes start+1 ...
	filled int    // bytes filled after them and not yet published
}

func (m *model) end() int64 { return m.start + int64(len(m.bytes)) }

// fillEnd is the offset of the last filled byte.
func (m *model) fillEnd() int64 { return m.end() + int64(m.filled) }

// publish moves n filled bytes to the published ones. Filled bytes that may
// be published are always the pattern's, so they are known by their offset.
func (m *model) publish(n int) {
	m.bytes = append(m.bytes, pattern(m.end()+1, n)...)
	m.filled -= n
}

func (m *model) at(off int64, n int) []byte {
	i := off - m.start - 1
	return m.bytes[i : i+int64(n)]
}

type modelCursor struct {
	c   *Cursor
	off int64
}

// TestStreamAgainstModel drives a stream with random reads (1..40000 bytes),
// fills published in random prefixes, garbage filled and discarded, random
// cursor progress (partial writes included), random attach offsets, backlog
// changes, closes and resets, and after every step checks it against the
// reference: every byte out equals the byte in at that offset (no cursor ever
// sees an unpublished or discarded byte), non-tail blocks are full, refs equal
// the cursors on each block, accounting matches the blocks, and the history
// never falls below the backlog size.
func TestStreamAgainstModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	steps := 2500
	if testing.Short() {
		seeds, steps = seeds[:2], 1000
	}
	for _, seed := range seeds {
		runModel(t, seed, rand.New(rand.NewPCG(seed, 99)), steps)
	}
}

// choices is where the model run takes its decisions from: a PRNG, or the
// fuzzer's bytes.
type choices interface {
	IntN(n int) int
}

// fuzzChoices turns fuzz input into decisions; when it runs out, every
// decision is 0.
type fuzzChoices struct{ data []byte }

func (f *fuzzChoices) IntN(n int) int {
	if n <= 1 || len(f.data) == 0 {
		return 0
	}
	var v int
	for range 3 {
		if len(f.data) == 0 {
			break
		}
		v = v<<8 | int(f.data[0])
		f.data = f.data[1:]
	}
	return v % n
}

func runModel(t *testing.T, seed uint64, rng choices, steps int) {
	pool := NewPool(32)
	pool.poison = true // a read from a released block shows up as a mismatch
	backlog := int64(1 + rng.IntN(6*BlockSize))
	m := &model{start: int64(rng.IntN(1 << 20))}
	s := NewStream(m.start, &Config{BacklogSize: backlog, MaxBatchBytes: 1 + rng.IntN(5*BlockSize), Pool: pool})
	var cursors []*modelCursor
	produced := int64(0)

	prevFirst, _ := s.Backlog()
	check := func(step int, what string) {
		t.Helper()
		live := make([]*Cursor, 0, len(cursors))
		for _, mc := range cursors {
			live = append(live, mc.c)
		}
		checkInvariants(t, s, live...)
		first, hist := s.Backlog()
		if s.Offset() != m.end() || s.Filled() != m.fillEnd() {
			t.Fatalf("seed %d step %d (%s): offset %d filled %d, model %d and %d", seed, step, what, s.Offset(), s.Filled(), m.end(), m.fillEnd())
		}
		// Trimming never takes the history below the backlog size, and
		// with no cursor pinning it, keeps no more than the backlog, the
		// block being filled and one more.
		if first > prevFirst && hist <= backlog {
			t.Fatalf("seed %d step %d (%s): trimmed to histlen %d, backlog %d", seed, step, what, hist, backlog)
		}
		if len(cursors) == 0 && hist > backlog+2*BlockSize {
			t.Fatalf("seed %d step %d (%s): histlen %d with no cursor, backlog %d", seed, step, what, hist, backlog)
		}
		prevFirst = first
		for _, mc := range cursors {
			if mc.off <= m.end()+1 && mc.off < first {
				t.Fatalf("seed %d step %d (%s): cursor at %d but backlog starts at %d", seed, step, what, mc.off, first)
			}
		}
	}

	// fill reads data into the stream with Fill, FillBuffers (room for a
	// random number of bytes) or ReadOnce (which also publishes everything
	// filled before) in random read sizes.
	fill := func(step int, data []byte, once bool) {
		r := &chunkReader{data: data}
		for range 4 {
			r.sizes = append(r.sizes, 1+rng.IntN(40000))
		}
		for {
			var p []byte
			var err error
			switch {
			case once:
				p, err = s.ReadOnce(r)
			case rng.IntN(2) == 0:
				p, err = s.Fill(r)
			default:
				var ps [][]byte
				ps, err = s.FillBuffers(r, rng.IntN(4*BlockSize))
				for _, q := range ps {
					if len(q) == 0 {
						t.Fatalf("seed %d step %d: FillBuffers returned an empty slice", seed, step)
					}
					p = append(p, q...)
				}
			}
			if !bytes.Equal(p, data[:len(p)]) {
				t.Fatalf("seed %d step %d: Fill/FillBuffers/ReadOnce returned other bytes", seed, step)
			}
			data = data[len(p):]
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	for step := range steps {
		switch op := rng.IntN(100); {
		case op < 25: // the producer reads a burst and publishes it
			n := 1 + rng.IntN(40000)
			fill(step, pattern(m.fillEnd()+1, n), true)
			m.filled += n
			m.publish(m.filled)
			produced += int64(n)
			check(step, "read")
		case op < 35: // the producer fills a burst, and publishes a prefix of what is filled
			n := 1 + rng.IntN(40000)
			fill(step, pattern(m.fillEnd()+1, n), false)
			m.filled += n
			check(step, "fill")
			k := rng.IntN(m.filled + 1)
			if rng.IntN(4) == 0 {
				k = m.filled
			}
			if err := s.Publish(m.end() + int64(k)); err != nil {
				t.Fatalf("seed %d step %d: publish %d of %d filled: %v", seed, step, k, m.filled, err)
			}
			m.publish(k)
			produced += int64(k)
			check(step, "publish")
		case op < 40: // a scan error: garbage is filled, and everything unpublished dropped
			if rng.IntN(2) == 0 {
				garbage := bytes.Repeat([]byte{0xee}, 1+rng.IntN(40000))
				fill(step, garbage, false)
				m.filled += len(garbage)
			}
			end := m.end()
			for _, bad := range []int64{end - 1, m.fillEnd() + 1} {
				if err := s.Publish(bad); !errors.Is(err, ErrPublish) {
					t.Fatalf("seed %d step %d: publish %d (published %d, filled %d): %v", seed, step, bad, end, m.fillEnd(), err)
				}
			}
			s.Discard()
			m.filled = 0
			check(step, "discard")
		case op < 75 && len(cursors) > 0: // a cursor writes part of its batch
			mc := cursors[rng.IntN(len(cursors))]
			bufs, err := mc.c.Pending()
			if err != nil {
				t.Fatalf("seed %d step %d: pending: %v", seed, step, err)
			}
			total := 0
			for _, b := range *bufs {
				if want := m.at(mc.off+int64(total), len(b)); !bytes.Equal(b, want) {
					t.Fatalf("seed %d step %d: cursor at %d got wrong bytes", seed, step, mc.off)
				}
				total += len(b)
			}
			if avail := m.end() + 1 - mc.off; avail > 0 && total == 0 {
				t.Fatalf("seed %d step %d: cursor at %d has %d bytes to send but got none", seed, step, mc.off, avail)
			}
			n := int64(0)
			if total > 0 {
				n = int64(rng.IntN(total + 1))
				if rng.IntN(3) == 0 {
					n = int64(total)
				}
			}
			if err := mc.c.Advance(n); err != nil {
				t.Fatal(err)
			}
			mc.off += n
			if mc.c.Offset() != mc.off {
				t.Fatalf("seed %d step %d: cursor offset %d, model %d", seed, step, mc.c.Offset(), mc.off)
			}
			check(step, "advance")
		case op < 85: // a replica attaches somewhere
			first, _ := s.Backlog()
			off := first - 20 + int64(rng.IntN(int(m.end()+60-first)))
			c, err := s.Attach(off)
			switch {
			case off < first:
				if !errors.Is(err, ErrOffsetOutOfRange) {
					t.Fatalf("seed %d step %d: attach at %d before %d: %v", seed, step, off, first, err)
				}
			case err != nil:
				t.Fatalf("seed %d step %d: attach at %d (first %d end %d): %v", seed, step, off, first, m.end(), err)
			default:
				cursors = append(cursors, &modelCursor{c: c, off: off})
			}
			check(step, "attach")
		case op < 93 && len(cursors) > 0: // a replica goes away
			i := rng.IntN(len(cursors))
			cursors[i].c.Close()
			cursors = append(cursors[:i], cursors[i+1:]...)
			check(step, "close")
		case op < 97: // CONFIG SET repl-backlog-size
			backlog = int64(1 + rng.IntN(6*BlockSize))
			s.SetBacklogSize(backlog)
			check(step, "backlog")
		case op < 99 || len(cursors) == 0:
			// nothing: let the other operations weigh more
		default: // an upstream full resync
			m = &model{start: m.fillEnd() + int64(rng.IntN(1000))}
			s.Reset(m.start)
			prevFirst = m.start + 1
			for _, mc := range cursors {
				if _, err := mc.c.Pending(); !errors.Is(err, ErrReset) {
					t.Fatalf("seed %d step %d: cursor after reset: %v", seed, step, err)
				}
				mc.c.Close()
			}
			cursors = nil
			check(step, "reset")
		}
	}
	for _, mc := range cursors {
		mc.c.Close()
	}
	cursors = nil
	check(steps, "end")
	if produced == 0 {
		t.Fatal("nothing produced")
	}
}

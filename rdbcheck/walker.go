package rdbcheck

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
)

// Walker checks one RDB payload fed to it in order, in pieces of any size.
// It is used by one goroutine.
type Walker struct {
	w    *walk
	next func() (struct{}, bool) // resumes the walk with w.in.buf
	stop func()                  // ends a suspended walk

	err    error // sticky: the first fault, or ErrClosed after Close
	ended  bool
	closed bool
}

// NewWalker returns a Walker at the start of a payload.
func NewWalker() *Walker {
	w := newWalk()
	next, stop := iter.Pull(w.seq)
	wk := &Walker{w: w, next: next, stop: stop}
	// A Walker dropped without Close leaves its walk suspended: stop it
	// when the Walker is collected (the walk holds nothing of the Walker).
	runtime.AddCleanup(wk, func(stop func()) { stop() }, stop)
	return wk
}

// Write walks every byte of p before it returns: the caller may publish
// what Write accepted. It returns len(p), nil while the payload is good so
// far. At the first byte that cannot belong to an RDB Redis loads it
// returns the count of bytes before that byte and a *CorruptError, and
// every later call returns that error again. A byte after the end of the
// RDB (after its checksum) is such a byte. Write does not keep p.
func (wk *Walker) Write(p []byte) (int, error) {
	switch {
	case wk.err != nil:
		return 0, wk.err
	case len(p) == 0:
		return 0, nil
	case wk.ended:
		wk.err = &CorruptError{Offset: wk.Walked(), Reason: "a byte after the end of the RDB", rule: ruleTrailing}
		return 0, wk.err
	}
	w := wk.w
	start := w.in.offset()
	w.in.buf, w.in.pos, w.in.crcFrom = p, 0, 0
	if _, more := wk.next(); more {
		return len(p), nil // the walk used p up and waits for more
	}
	// The walk is over: at a fault, or at the end of the RDB.
	defer func() { w.in.buf = nil }()
	if w.err != nil {
		wk.err = w.err
		var ce *CorruptError
		if errors.As(w.err, &ce) {
			return int(ce.Offset - start), wk.err
		}
		return 0, wk.err
	}
	wk.ended = true
	if n := w.in.pos; n < len(p) {
		wk.err = &CorruptError{Offset: start + int64(n), Reason: "a byte after the end of the RDB", rule: ruleTrailing}
		return n, wk.err
	}
	return len(p), nil
}

// Walked is how many bytes have been accepted so far.
func (wk *Walker) Walked() int64 {
	var ce *CorruptError
	if errors.As(wk.err, &ce) {
		return ce.Offset
	}
	return wk.w.in.offset()
}

// Ended reports whether the walk has passed the end of the RDB: the EOF
// opcode and the checksum (for versions that have one) have been read and
// the checksum matched, or was zero.
func (wk *Walker) Ended() bool { return wk.ended }

// Close says the payload is over. It returns nil only when the walk Ended;
// otherwise the sticky error, or a *CorruptError for a truncated RDB
// (errors.Is(err, io.ErrUnexpectedEOF)). Close stops the walk; after it,
// Write returns the sticky error, or ErrClosed if there was none.
func (wk *Walker) Close() error {
	if wk.closed {
		return wk.closeErr()
	}
	wk.closed = true
	wk.stop()
	if wk.err == nil && !wk.ended {
		wk.err = &CorruptError{Offset: wk.w.in.offset(), Reason: "unexpected end of the RDB", Err: io.ErrUnexpectedEOF}
	}
	err := wk.closeErr()
	if wk.err == nil {
		wk.err = ErrClosed
	}
	return err
}

func (wk *Walker) closeErr() error {
	if wk.err == ErrClosed {
		return nil
	}
	return wk.err
}

// checkBuffer is the buffer Check reads with.
const checkBuffer = 64 << 10

// Check walks a whole RDB from r (a file, from its start) with a buffer of
// 64 KiB, and returns Close's verdict, or r's error.
func Check(r io.Reader) error {
	wk := NewWalker()
	defer wk.Close()
	buf := make([]byte, checkBuffer)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := wk.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return wk.Close()
		}
		if err != nil {
			return fmt.Errorf("rdbcheck: reading the RDB: %w", err)
		}
	}
}

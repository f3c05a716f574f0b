package streamlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// A Reader sends the log from an offset on, in verified records.
// It is used by one goroutine; any number may read the log at once.
type Reader struct {
	l     *Log
	gen   uint64 // the log's generation it reads
	off   int64  // the next offset to send
	f     File   // the open segment, or nil
	first int64  // its first offset
	buf   []byte // the record last checked, from recStart in the open segment
	// recStart is where, in the open segment, the record in buf starts.
	recStart int64
	// checked is the record of the open segment that buf holds, verified:
	// a call that sends only part of a record (max below RecordMax) leaves
	// the rest to the next, which sends it without reading it again. The
	// file cannot change under the reader (retention recycles no file a
	// reader has open), so what was verified is still what it holds.
	checked struct{ start, end int64 }
}

// NewReader returns a reader whose first byte is off, which the log must
// hold, or be one past its end.
func (l *Log) NewReader(off int64) (*Reader, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	first, last := l.firstLocked(), l.endLocked()
	if off < first || off > last+1 {
		return nil, fmt.Errorf("%w: %d is outside [%d, %d]", ErrNotHeld, off, first, last+1)
	}
	return &Reader{l: l, gen: l.gen, off: off}, nil
}

// Offset returns the next offset the reader sends.
func (r *Reader) Offset() int64 { return r.off }

// Close closes the reader's file.
func (r *Reader) Close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
		r.l.release(r.first)
	}
	r.checked.start, r.checked.end = 0, 0
}

// WriteTo sends w at most max bytes from the reader's offset: the records
// holding them, in order, each read whole and checked against its CRC before
// any of its bytes are sent, so that one call sends as many records as max
// allows (the caller's one write deadline covers them all). It stops early
// at the log's end or a segment's when sending by sendfile. The first record
// decides the error: io.EOF when the reader is at the log's end, ErrNotHeld
// when retention (or a Reset) removed its offset, ErrCorrupt when it no
// longer matches its checksum: those bytes are never sent. Such a condition
// met at a later record ends the call with what was sent and a nil error;
// the next call, whose first record it is, reports it.
//
// When w is an io.ReaderFrom (a *net.TCPConn) and the segment an *os.File,
// the verified records of one segment go by one sendfile, from the page
// cache the check just filled; otherwise each record is written from the
// checked buffer.
func (r *Reader) WriteTo(w io.Writer, max int64) (int64, error) {
	var sent int64
	for sent < max {
		n, err := r.writeRun(w, max-sent)
		sent += n
		if err != nil {
			var pe *positionError
			if errors.As(err, &pe) {
				if sent > 0 {
					return sent, nil // the next call's first record: it reports it
				}
				return 0, pe.err
			}
			return sent, err
		}
	}
	return sent, nil
}

// positionError is a condition found before a run's first byte was sent (the
// log's end, an offset no longer held, a corrupt record): WriteTo reports it
// only when it is the call's first record.
type positionError struct{ err error }

func (e *positionError) Error() string { return e.err.Error() }

// writeRun verifies the records from the reader's offset on, up to max bytes
// and within one segment (one record, for a writer without ReadFrom, whose
// bytes come from the checked buffer), and sends them: the run of the
// stream that one write covers. A condition met before its first record is
// verified comes back as a *positionError; a record found bad after that
// ends the run before it, unsent.
func (r *Reader) writeRun(w io.Writer, max int64) (int64, error) {
	segFirst, runEnd, err := r.verify(max, w)
	if err != nil {
		return 0, &positionError{err}
	}
	from := r.off - segFirst
	n := runEnd - from
	if rf, ok := w.(io.ReaderFrom); ok {
		if _, isFile := r.f.(*os.File); isFile {
			if _, err := r.f.Seek(from, io.SeekStart); err != nil {
				return 0, err
			}
			sent, err := rf.ReadFrom(io.LimitReader(r.f, n))
			r.off += sent
			return sent, err
		}
	}
	// One record, verified in r.buf, which starts at recStart.
	k, err := w.Write(r.buf[from-r.recStart : from-r.recStart+n])
	r.off += int64(k)
	return int64(k), err
}

// verify checks the records from the reader's offset on, up to max bytes,
// against their CRCs, opening their segment first if need be. It returns the
// segment's first offset and where, in the segment, the verified run ends
// (past the last byte max allows); the run is one record unless w takes
// sendfile. Only the first record's failure is an error: a later one ends
// the run before it, for the next run to report.
func (r *Reader) verify(max int64, w io.Writer) (segFirst, runEnd int64, err error) {
	_, viaFile := w.(io.ReaderFrom)
	off := r.off
	for {
		gen, first, last := r.l.bounds()
		var werr error
		switch {
		case gen != r.gen:
			werr = fmt.Errorf("%w: the log started a new generation", ErrNotHeld)
		case off == last+1:
			werr = io.EOF
		case off < first:
			werr = fmt.Errorf("%w: %d was removed (the log starts at %d)", ErrNotHeld, off, first)
		}
		var sf, start, end int64
		var sum uint32
		if werr == nil {
			sf, start, end, sum, werr = r.l.locate(r.gen, off)
		}
		if werr == nil && off != r.off && sf != segFirst {
			return segFirst, runEnd, nil // the next segment: the next run's
		}
		if werr == nil && (r.f == nil || r.first != sf) {
			werr = r.open(sf)
		}
		if werr == nil && (r.checked.start != start || r.checked.end != end) {
			werr = r.check(sf, start, end, sum)
		}
		if werr != nil {
			if off == r.off {
				return 0, 0, werr
			}
			return segFirst, runEnd, nil
		}
		segFirst, runEnd = sf, min(end, r.off-sf+max)
		off = sf + runEnd
		_, isFile := r.f.(*os.File)
		if !viaFile || !isFile || runEnd < end {
			return segFirst, runEnd, nil
		}
	}
}

// open makes the segment starting at first the reader's open file.
func (r *Reader) open(first int64) error {
	r.Close()
	if !r.l.acquire(r.gen, first) {
		return fmt.Errorf("%w: segment %s was removed", ErrNotHeld, segName(first, segExt))
	}
	f, err := r.l.fsys.OpenFile(segName(first, segExt), os.O_RDONLY, 0)
	if err != nil {
		r.l.release(first)
		return fmt.Errorf("%w: open %s: %v", ErrNotHeld, segName(first, segExt), err)
	}
	r.f, r.first = f, first
	return nil
}

// check reads the record [start, end) of the open segment (first) whole into
// r.buf and checks it against sum.
func (r *Reader) check(first, start, end int64, sum uint32) error {
	if int64(cap(r.buf)) < end-start {
		// Sized to the records met, not RecordMax: a reader of a log
		// appended in small records holds a small buffer.
		r.buf = make([]byte, max(end-start, 64<<10))
	}
	rec := r.buf[:end-start]
	r.recStart = start
	r.checked.start, r.checked.end = 0, 0
	if n, err := r.f.ReadAt(rec, start); n != len(rec) {
		return fmt.Errorf("%w: record at %d is short (%d of %d bytes): %v", ErrCorrupt, first+start, n, len(rec), err)
	}
	if crc32.Checksum(rec, castagnoli) != sum {
		return fmt.Errorf("%w: record at %d", ErrCorrupt, first+start)
	}
	r.checked.start, r.checked.end = start, end
	return nil
}

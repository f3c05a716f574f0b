package streamlog

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// A Reader sends the log from an offset on, one verified record at a time.
// It is used by one goroutine; any number may read the log at once.
type Reader struct {
	l     *Log
	gen   uint64 // the log's generation it reads
	off   int64  // the next offset to send
	f     File   // the open segment, or nil
	first int64  // its first offset
	buf   []byte
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
}

// WriteTo sends w at most max bytes from the reader's offset: the rest of the
// record holding it, read whole and checked against its CRC first. It
// returns io.EOF when the reader is at the log's end, ErrNotHeld when
// retention (or a Reset) removed its offset, ErrCorrupt when the record no
// longer matches its checksum: those bytes are never sent.
//
// When w is an io.ReaderFrom (a *net.TCPConn) and the segment an *os.File,
// the bytes go by sendfile, from the page cache the check just filled;
// otherwise they are written from the checked buffer.
func (r *Reader) WriteTo(w io.Writer, max int64) (int64, error) {
	gen, first, last := r.l.bounds()
	switch {
	case gen != r.gen:
		return 0, fmt.Errorf("%w: the log started a new generation", ErrNotHeld)
	case r.off == last+1:
		return 0, io.EOF
	case r.off < first:
		return 0, fmt.Errorf("%w: %d was removed (the log starts at %d)", ErrNotHeld, r.off, first)
	}
	segFirst, start, end, sum, err := r.l.locate(r.gen, r.off)
	if err != nil {
		return 0, err
	}
	if r.f == nil || r.first != segFirst {
		r.Close()
		if !r.l.acquire(r.gen, segFirst) {
			return 0, fmt.Errorf("%w: segment %s was removed", ErrNotHeld, segName(segFirst, segExt))
		}
		f, err := r.l.fsys.OpenFile(segName(segFirst, segExt), os.O_RDONLY, 0)
		if err != nil {
			r.l.release(segFirst)
			return 0, fmt.Errorf("%w: open %s: %v", ErrNotHeld, segName(segFirst, segExt), err)
		}
		r.f, r.first = f, segFirst
	}
	if r.buf == nil {
		r.buf = make([]byte, RecordMax)
	}
	rec := r.buf[:end-start]
	if n, err := r.f.ReadAt(rec, start); n != len(rec) {
		return 0, fmt.Errorf("%w: record at %d is short (%d of %d bytes): %v", ErrCorrupt, segFirst+start, n, len(rec), err)
	}
	if crc32.Checksum(rec, castagnoli) != sum {
		return 0, fmt.Errorf("%w: record at %d", ErrCorrupt, segFirst+start)
	}
	from := r.off - segFirst
	n := min(end-from, max)
	var sent int64
	if rf, ok := w.(io.ReaderFrom); ok {
		if _, isFile := r.f.(*os.File); isFile {
			if _, err := r.f.Seek(from, io.SeekStart); err != nil {
				return 0, err
			}
			sent, err = rf.ReadFrom(io.LimitReader(r.f, n))
			r.off += sent
			return sent, err
		}
	}
	k, err := w.Write(rec[from-start : from-start+n])
	r.off += int64(k)
	return int64(k), err
}

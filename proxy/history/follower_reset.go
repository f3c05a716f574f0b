package history

import (
	"fmt"
	"time"

	"github.com/replproxy/replproxy/replbuf"
)

// The start of a new generation of the stream log, where memory holds the
// stream: after a full sync, a fault, or a restart for falling behind (see
// the top of follower.go).

// reset starts a new generation of the log where memory holds the stream,
// and attaches there. The cursor attaches first and pins the stream from
// there while the log resets: a fresh generation (after a full sync) must
// begin where the snapshot's stream does, or a replica synced from that
// snapshot finds neither memory nor the log holding the bytes after it and
// the primary forks again for a fetch, and the reset's meta.json fsync can
// take a second on a disk busy with the very snapshot being written, while
// the stream runs at tens of MB/s. Dropping a long log's segments (removes
// and fsyncs) can take seconds, though, and what the cursor pins
// meanwhile is memory the limit is there to bound: the reset runs on a
// goroutine of its own while this one watches the cursor's lag, and lets
// go of it past the limit. Where it starts then moves on: the published
// end, attached first and reset after, which is quick with nothing left
// to drop.
func (f *Follower) reset(id Identity, st *replbuf.Stream) (*replbuf.Cursor, error) {
	limit := f.cfg.BehindLimit()
	// start is where a new generation begins: the memory backlog's first
	// byte, or within half the limit of the end when memory holds more
	// (what a slow replica pins, or blocks not yet trimmed), so that it does
	// not start already behind by more than all of it.
	from, held := st.Backlog()
	if limit > 0 && held > limit/2 {
		from = max(from, st.Offset()+1-limit/2)
	}
	// After a full sync, Install pinned the generation's first byte: the
	// log starts there, with the snapshot's stream.
	c := f.hist.TakeLogPin(st.Generation())
	if c != nil {
		from = c.Offset()
	} else if c2, err := st.Attach(from); err == nil {
		c = c2
	}
	done := make(chan error, 1)
	go func() { done <- f.log.Reset(id.log(), from-1) }()
	kept, err := f.watchReset(done, c, limit)
	if err != nil {
		if kept {
			c.Close()
		}
		return nil, err
	}
	if kept {
		return c, nil
	}
	// The reset took long enough for memory to let go of from, or to leave
	// it past half the limit behind: the generation starts at the published end
	// instead (a command's end, so PSYNC from the log asks for whole
	// commands). The end is read before attaching, so a burst published in
	// between may trim it first: then again, from the new end.
	for range 10 {
		from = st.Offset() + 1
		if c, err = st.Attach(from); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("attach to the stream: %w", err)
	}
	if err := f.log.Reset(id.log(), from-1); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// resetWatch is how often reset looks at what its cursor pins while the
// log resets.
const resetWatch = 10 * time.Millisecond

// watchReset waits for the reset running on its own goroutine to report on
// done, and meanwhile closes c (nil: none) once it is more than half the
// limit (0: none) behind the stream's end, so that a slow reset pins less
// than a slow follower may and the new generation does not start already
// close to a restart. It returns whether c is still open, and the reset's
// error.
func (f *Follower) watchReset(done <-chan error, c *replbuf.Cursor, limit int64) (kept bool, err error) {
	if c == nil {
		return false, <-done
	}
	if limit <= 0 {
		return true, <-done
	}
	t := time.NewTicker(resetWatch)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return true, err
		case <-t.C:
			if c.Lag() > limit/2 {
				c.Close()
				return false, <-done
			}
		}
	}
}

package streamlog

import (
	"fmt"
	"os"
)

// createSegment opens a new segment file under name: the spare, renamed,
// when there is one, else a new file. reused says it holds an older
// segment's bytes (a recycled one; a spare prepared ahead holds none).
// Its first SegmentBytes are allocated ahead (preallocate), so that the
// appends never allocate blocks. REQUIRES: wmu held.
func (l *Log) createSegment(name string) (f File, reused bool, err error) {
	if l.spare {
		l.spare = false
		if err := l.fsys.Rename(spareName, name); err == nil {
			if f, err := l.fsys.OpenFile(name, os.O_RDWR, 0); err == nil {
				reused = fileSize(f) > 0
				l.prealloc = preallocate(f, l.segBytes)
				return f, reused, nil
			}
		}
		// The spare is gone or unusable: a new file, as without one.
	}
	f, err = l.fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("create %s: %w", name, err)
	}
	l.prealloc = preallocate(f, l.segBytes)
	return f, false, nil
}

// prepareSpare makes sure a spare is ready for the next segment, a new file
// allocated ahead when retention dropped none (a log still growing to
// MaxBytes), so that the next roll starts on allocated blocks too. The
// spare is an optimisation: when it cannot be made, or the file layer
// cannot allocate ahead (a file system without fallocate, a test's FS), the
// next segment is a new file, as without it. REQUIRES: wmu held.
func (l *Log) prepareSpare() {
	if l.spare || l.vec == nil { // vec: the file layer gives real files
		return
	}
	f, err := l.fsys.OpenFile(spareName, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	ok := preallocate(f, l.segBytes)
	f.Close()
	if !ok {
		removeIfExists(l.fsys, spareName)
		return
	}
	l.spare = true
}

// dropped is a segment retention unlisted: its first offset, and whether
// a reader had its file open then (such a file is removed, not recycled).
type dropped struct {
	first int64
	open  bool
}

// dropLocked unlists the oldest segments while the others hold MaxBytes,
// and returns them, oldest first, for removeDropped once meta.json no
// longer lists them. REQUIRES: wmu and mu held.
func (l *Log) dropLocked() []dropped {
	var drop []dropped
	for len(l.segs) >= 2 && l.total-l.segs[0].size() >= l.maxBytes {
		old := l.segs[0]
		l.segs = l.segs[1:]
		l.total -= old.size()
		// Decided under mu: a reader opens a file only while its segment
		// is listed, so none can open this one from here on.
		drop = append(drop, dropped{first: old.first, open: l.readers[old.first] > 0})
	}
	return drop
}

// removeDropped removes the files of the segments dropLocked unlisted, once
// meta.json no longer lists them (a crash in between leaves files recovery
// removes). The first one no reader had open becomes the spare, when there
// is none. REQUIRES: wmu held.
func (l *Log) removeDropped(drop []dropped) error {
	for _, d := range drop {
		if !l.spare && !d.open && l.fsys.Rename(segName(d.first, segExt), spareName) == nil {
			l.spare = true
		}
		for _, ext := range []string{segExt, crcExt} {
			if err := removeIfExists(l.fsys, segName(d.first, ext)); err != nil {
				return fmt.Errorf("remove %s: %w", segName(d.first, ext), err)
			}
		}
	}
	return nil
}

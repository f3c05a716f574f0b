package proxy

import (
	"errors"
	"fmt"
	"os"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/streamlog"
)

// dir's lock (streamlog.LockDir: the lock file, its flock, its refusal)
// is held for the server's whole life, whatever the stream log's setting.
// New takes it before it touches any file in dir (the stream log, the
// snapshot on disk, spill leftovers), so that a second proxy on the same
// dir refuses to start instead of removing the files the first one serves
// from. CONFIG SET dir (only with the log off) moves it: the new dir's lock
// is taken first, with no lock held (dataDir.prepare), and a dir another proxy
// holds is refused; publishing the change swaps it in under writeMu, and
// the old dir's is released by the change's finish, with no lock held.

// dataDir is dir as the server holds it: dir's lock, and why the stream log
// could not be opened there at start. New sets both; after New, lock and
// released are guarded by configChanges.writeMu.
type dataDir struct {
	// lock is dir's lock: taken by New, moved by CONFIG SET dir, released
	// by Run's end or Close (configChanges.releaseDir). nil when dir could
	// not be locked (a missing or read-only dir).
	lock *streamlog.DirLock
	// released: the lock was released (the server's end), and no change
	// puts one in place any more.
	released bool
	// logOpenErr is why the stream log could not be opened at start, when
	// it was configured. Read-only after New.
	logOpenErr string
}

// dirMove is dir's lock moving with a change of dir.
type dirMove struct {
	lock *streamlog.DirLock // the new dir's; nil when it could not be locked
	err  error              // why not; logged once the change is published
}

// prepare takes next's dir's lock when dir moves to another directory
// (the same dir by another name keeps the lock it has); one that cannot be
// locked (read-only) is taken unlocked, as at start. A dir locked already
// is refused with Redis's reply text, and conflict set: the holder may be
// a sibling change, or the change before this one not yet finished.
// io tells the change's test hook of each piece of I/O.
// REQUIRES: no lock held; a change started (configChanges.start).
func (d *dataDir) prepare(prev, next *config.Config, io func(what string)) (m *dirMove, conflict bool, err error) {
	if next.Dir == prev.Dir {
		return nil, false, nil
	}
	io("stat dir")
	if sameDir(prev.Dir, next.Dir) {
		return nil, false, nil
	}
	io("lock dir")
	lock, err := streamlog.LockDir(next.Dir)
	if errors.Is(err, streamlog.ErrDirLocked) {
		return nil, true, fmt.Errorf("ERR CONFIG SET failed (possibly related to argument 'dir') - %w", err)
	}
	return &dirMove{lock: lock, err: err}, false, nil
}

// swapLocked makes l dir's lock and returns the one it displaces, for the
// caller to release once writeMu is released. After the release it puts
// nothing in place and returns l itself. REQUIRES: configChanges.writeMu
// held.
func (d *dataDir) swapLocked(l *streamlog.DirLock) *streamlog.DirLock {
	if d.released {
		return l
	}
	old := d.lock
	d.lock = l
	return old
}

// releaseLocked takes dir's lock out, for good, and returns it for the
// caller to release once writeMu is released (configChanges.releaseDir).
// REQUIRES: configChanges.writeMu held.
func (d *dataDir) releaseLocked() *streamlog.DirLock {
	d.released = true
	l := d.lock
	d.lock = nil
	return l
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

package proxy

import (
	"errors"
	"fmt"

	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/streamlog"
)

// dir's lock (streamlog.LockDir: the lock file, its flock, its refusal)
// is held for the server's whole life, whatever the stream log's setting.
// New takes it before it touches any file in dir (the stream log, the
// snapshot on disk, spill leftovers), so that a second proxy on the same
// dir refuses to start instead of removing the files the first one serves
// from. CONFIG SET dir (only with the log off) moves it: the new dir's lock
// is taken first, with no lock held (prepareDir), and a dir another proxy
// holds is refused; publishing the change swaps it in under writeMu, and
// the old dir's is released by the change's finish, with no lock held.

// dirMove is dir's lock moving with a change of dir.
type dirMove struct {
	lock *streamlog.DirLock // the new dir's; nil when it could not be locked
	err  error              // why not; logged once the change is published
}

// prepareDir takes next's dir's lock when dir moves to another directory
// (the same dir by another name keeps the lock it has); one that cannot be
// locked (read-only) is taken unlocked, as at start. A dir locked already
// is refused with Redis's reply text, and conflict set: the holder may be
// a sibling change, or the change before this one not yet finished.
// REQUIRES: no lock held; a change started (liveConfig.start).
func (s *Server) prepareDir(prev, next *config.Config) (m *dirMove, conflict bool, err error) {
	if next.Dir == prev.Dir {
		return nil, false, nil
	}
	s.io("stat dir")
	if sameDir(prev.Dir, next.Dir) {
		return nil, false, nil
	}
	s.io("lock dir")
	lock, err := streamlog.LockDir(next.Dir)
	if errors.Is(err, streamlog.ErrDirLocked) {
		return nil, true, fmt.Errorf("ERR CONFIG SET failed (possibly related to argument 'dir') - %w", err)
	}
	return &dirMove{lock: lock, err: err}, false, nil
}

// swapDirLockLocked makes l dir's lock and returns the one it displaces,
// for the caller to release once writeMu is released. After releaseDir it
// puts nothing in place and returns l itself. REQUIRES: conf.writeMu held.
func (s *Server) swapDirLockLocked(l *streamlog.DirLock) *streamlog.DirLock {
	if s.conf.dirReleased {
		return l
	}
	old := s.dirLock
	s.dirLock = l
	return old
}

// releaseDir releases dir's lock, once everything that writes in dir has
// stopped (Run's end, or Close on a server that never ran); no change puts
// one in place after it. The flock is released with no lock held.
func (s *Server) releaseDir() {
	s.conf.writeMu.Lock()
	s.conf.dirReleased = true
	l := s.dirLock
	s.dirLock = nil
	s.conf.writeMu.Unlock()
	if l != nil {
		s.io("unlock dir")
		l.Close()
	}
}

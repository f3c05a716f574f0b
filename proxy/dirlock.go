package proxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// dir's lock: replproxy.lock, flock'ed for the server's whole life, whatever
// the stream log's setting. New takes it before it touches any file in dir
// (the stream log, the snapshot on disk, spill leftovers), so that a second
// proxy on the same dir refuses to start instead of removing the files the
// first one serves from. CONFIG SET dir (only with the log off) moves it: the
// new dir's lock is taken first, and a dir another proxy holds is refused.
// Redis has no such lock; replproxy needs one because its file names are
// fixed and a start removes what it does not adopt.

// errDirLocked refuses a start on a dir another proxy holds.
var errDirLocked = errors.New("dir is in use by another replproxy")

// lockDir takes dir's lock, without waiting: errDirLocked when another
// process holds it. The file stays open as long as the lock is held.
func lockDir(dir string) (*os.File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open dir: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(lockFileName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", lockFileName, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (it holds %s)", errDirLocked, dir, filepath.Join(dir, lockFileName))
		}
		return nil, fmt.Errorf("lock %s: %w", lockFileName, err)
	}
	return f, nil
}

// swapDirLock makes f dir's lock and releases the one held before.
// REQUIRES: conf.writeMu held, or New before the server is shared.
func (s *Server) swapDirLock(f *os.File) {
	if s.dirLock != nil {
		s.dirLock.Close()
	}
	s.dirLock = f
}

// releaseDir releases dir's lock, once everything that writes in dir has
// stopped (Run's end, or Close on a server that never ran).
func (s *Server) releaseDir() {
	s.conf.writeMu.Lock()
	defer s.conf.writeMu.Unlock()
	s.swapDirLock(nil)
}

package streamlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// The directory's lock: LockName, flock'ed for as long as the proxy serves
// from the directory, whatever the stream log's setting. The proxy takes it
// before it touches any file there (the stream log's directory, the
// snapshot on disk, spill leftovers), so that a second proxy on the same
// directory refuses to start instead of removing the files the first one
// serves from. Redis has no such lock; replproxy needs one because its file
// names are fixed and a start removes what it does not adopt. The lock is
// the file's open description: it is held until DirLock.Close, or the
// process's end, and is not inherited by a process the proxy starts
// (O_CLOEXEC, as Go opens every file).

// LockName is the lock file LockDir takes in a directory.
const LockName = "replproxy.lock"

// ErrDirLocked refuses a directory another process holds. Its text is what
// a refused start and a refused CONFIG SET dir say, as it always has, and
// so carries no package prefix.
var ErrDirLocked = errors.New("dir is in use by another replproxy")

// A DirLock is a directory's lock, held until Close.
type DirLock struct{ f *os.File }

// LockDir takes dir's lock without waiting: ErrDirLocked when another
// process (or another DirLock of this one) holds it. The lock file is
// created if need be, through an os.Root on dir, so that a link planted
// under its name cannot reach outside dir.
func LockDir(dir string) (*DirLock, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open dir: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(LockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", LockName, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (it holds %s)", ErrDirLocked, dir, filepath.Join(dir, LockName))
		}
		return nil, fmt.Errorf("lock %s: %w", LockName, err)
	}
	return &DirLock{f: f}, nil
}

// Close releases the lock. The file stays, for the next LockDir.
func (d *DirLock) Close() error { return d.f.Close() }

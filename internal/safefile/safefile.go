package safefile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// tempTries bounds the temporary names Create draws when some exist.
const tempTries = 100

// ErrChanged is a name that no longer refers to the file expected: not a
// regular file any more, or another file than the one seen or written.
var ErrChanged = errors.New("safefile: file changed")

// FS is the file layer the mechanisms work through: a directory in which
// names are opened, renamed and removed.
type FS interface {
	// OpenFile opens name in the directory.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Rename(oldName, newName string) error
	Remove(name string) error
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir() error
}

// File is an open file of an FS, as far as writing one needs.
type File interface {
	io.Writer
	io.Closer
	Sync() error
	Stat() (fs.FileInfo, error)
}

// RootFS is an FS on an os.Root: no name can reach outside the directory,
// by ".." or by a symbolic link.
type RootFS struct{ Root *os.Root }

var _ FS = RootFS{}

// OpenFile opens name under the root; the File is an *os.File.
func (r RootFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := r.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // no typed nil in the interface
	}
	return f, nil
}

func (r RootFS) Rename(oldName, newName string) error { return r.Root.Rename(oldName, newName) }

func (r RootFS) Remove(name string) error { return r.Root.Remove(name) }

func (r RootFS) SyncDir() error {
	d, err := r.Root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// OpenRegular opens name in root for reading, if it is a regular file: a
// link, a FIFO, a directory or a device is refused (ErrChanged) without
// being opened for long, and the open never blocks (O_NONBLOCK: a FIFO
// planted between the Lstat and the open returns at once, and the Fstat
// refuses it). The file opened must be the one the Lstat saw, and, when
// want is not nil, the same file as want with want's size (a file the
// caller wrote and recorded). It returns the file and its Fstat.
func OpenRegular(root *os.Root, name string, want os.FileInfo) (*os.File, os.FileInfo, error) {
	before, err := root.Lstat(name)
	if err != nil {
		return nil, nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %s is not a regular file (%s)", ErrChanged, name, before.Mode().Type())
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(before, fi) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s was replaced while it was opened", ErrChanged, name)
	}
	if want != nil && (!os.SameFile(want, fi) || fi.Size() != want.Size()) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s was replaced since it was written", ErrChanged, name)
	}
	return f, fi, nil
}

// Pending is a new file being written under a temporary name, until Commit
// puts it in place or Cancel removes it. Owned by one goroutine.
type Pending struct {
	fsys FS
	f    File
	tmp  string
	done bool // Commit or Cancel ran
}

// Create creates a pending file in fsys under a fresh temporary name,
// prefix + 16 random hex digits + suffix, with O_EXCL: a name that exists
// (a file, or a link planted there) is never opened, and another is drawn,
// up to 100 times. random draws the names; nil means crypto/rand.
func Create(fsys FS, prefix, suffix string, random io.Reader) (*Pending, error) {
	if random == nil {
		random = rand.Reader
	}
	var b [8]byte
	for range tempTries {
		if _, err := io.ReadFull(random, b[:]); err != nil {
			return nil, fmt.Errorf("temporary file name: %w", err)
		}
		name := prefix + hex.EncodeToString(b[:]) + suffix
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		return &Pending{fsys: fsys, f: f, tmp: name}, nil
	}
	return nil, fmt.Errorf("no free temporary file name after %d tries", tempTries)
}

// TempName is the pending file's temporary name in its FS.
func (p *Pending) TempName() string { return p.tmp }

// File is the open temporary file, for writers that want its own type (an
// *os.File from RootFS). It must not be closed.
func (p *Pending) File() File { return p.f }

// Write appends b to the pending file.
func (p *Pending) Write(b []byte) (int, error) { return p.f.Write(b) }

// Commit fsyncs and closes the pending file, renames it over name (a rename
// replaces whatever holds name, a planted link included, without following
// it) and fsyncs the directory. It returns the file's FileInfo as written,
// which OpenRegular's want can check later.
//
// A failure before the rename removes the temporary file, so nothing of it
// is left and name is untouched. A failure to sync the directory after the
// rename is returned with the file in place under name: the rename cannot
// be undone (the file it replaced is gone), and the caller decides whether
// to remove it. Commit after Commit or Cancel is an error.
func (p *Pending) Commit(name string) (os.FileInfo, error) {
	if p.done {
		return nil, errors.New("safefile: commit of a finished file")
	}
	p.done = true
	err := p.f.Sync()
	var fi os.FileInfo
	if err == nil {
		fi, err = p.f.Stat()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		p.fsys.Remove(p.tmp)
		return nil, fmt.Errorf("write %s: %w", p.tmp, err)
	}
	if err := p.fsys.Rename(p.tmp, name); err != nil {
		p.fsys.Remove(p.tmp)
		return nil, fmt.Errorf("replace %s: %w", name, err)
	}
	if err := p.fsys.SyncDir(); err != nil {
		return fi, fmt.Errorf("sync the directory after replacing %s: %w", name, err)
	}
	return fi, nil
}

// Cancel closes and removes the pending file. It does nothing after Commit
// or a first Cancel.
func (p *Pending) Cancel() error {
	if p.done {
		return nil
	}
	p.done = true
	p.f.Close()
	if err := p.fsys.Remove(p.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p.tmp, err)
	}
	return nil
}

// WriteFile replaces name in fsys with data, atomically and durably: a
// pending file under a temporary name (prefix, random digits, suffix; see
// Create) written, then committed over name.
func WriteFile(fsys FS, name, prefix, suffix string, data []byte, random io.Reader) error {
	p, err := Create(fsys, prefix, suffix, random)
	if err != nil {
		return err
	}
	if _, err := p.Write(data); err != nil {
		p.Cancel()
		return fmt.Errorf("write %s: %w", p.tmp, err)
	}
	_, err = p.Commit(name)
	return err
}

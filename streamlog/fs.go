package streamlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/replproxy/replproxy/internal/safefile"
)

// FS is the file layer the log works through. RootFS is the real one; tests
// wrap it to inject faults.
type FS interface {
	// OpenFile opens name in the log's directory.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	Remove(name string) error
	Rename(oldName, newName string) error
	// Names lists the directory's entries.
	Names() ([]string, error)
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir() error
}

// File is an open file of an FS.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.Seeker
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
}

// RootFS is an FS on an os.Root: no name can reach outside the directory,
// by ".." or by a symbolic link.
type RootFS struct{ Root *os.Root }

// OpenFile opens name under the root. Files come back as *os.File, so
// Reader.WriteTo can hand them to sendfile.
func (r RootFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := r.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // no typed nil in the interface
	}
	return f, nil
}

func (r RootFS) Remove(name string) error { return r.Root.Remove(name) }

func (r RootFS) Rename(oldName, newName string) error { return r.Root.Rename(oldName, newName) }

func (r RootFS) Names() ([]string, error) {
	d, err := r.Root.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

func (r RootFS) SyncDir() error { return safefile.RootFS{Root: r.Root}.SyncDir() }

// removeIfExists removes name, and is not bothered if it is not there.
func removeIfExists(fsys FS, name string) error {
	if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// safeFS is an FS as internal/safefile's, whose File is a subset of ours.
type safeFS struct{ FS }

func (s safeFS) OpenFile(name string, flag int, perm fs.FileMode) (safefile.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // no typed nil in the interface
	}
	return f, nil
}

// DirFS is the RootFS of the directory name inside dir, made if it is not
// there: the log's own directory in the proxy's dir. The root stays open
// for as long as the log uses it.
func DirFS(dir, name string) (RootFS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return RootFS{}, fmt.Errorf("open dir: %w", err)
	}
	defer root.Close()
	if err := root.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return RootFS{}, err
	}
	sub, err := root.OpenRoot(name)
	if err != nil {
		return RootFS{}, err
	}
	return RootFS{Root: sub}, nil
}

package snapfile

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/replproxy/replproxy/internal/safefile"
)

// Names in dir. As with Redis's dbfilename, two instances must not share a
// dir: the second one to start removes the first one's file, and the first
// then fetches a new snapshot instead of serving the file (never a wrong
// one). Writes are serialised by the caller, so one fixed name is enough.
const (
	// FileName is the snapshot file.
	FileName = "replproxy-snapshot.rdb"
	// MetaName is the metadata beside FileName when the stream log is on:
	// what a restart needs to serve the file.
	MetaName = "replproxy-snapshot.meta"
	// tempPrefix and tempSuffix frame a file being written:
	// tempPrefix + 16 random hex digits + tempSuffix.
	tempPrefix = "replproxy-snapshot-"
	tempSuffix = ".tmp"
)

// A File is a snapshot written to FileName in Dir, from which full syncs
// are served with sendfile. The replication ID and offset stay here, beside
// the file, never in its name. A File is never changed once made.
type File struct {
	Dir     string      // the dir it was written to
	Info    os.FileInfo // the file as written: it is used only while the name refers to it
	ReplID  string
	Offset  int64
	Size    int64
	Created time.Time // when the snapshot was taken (INFO's age)
}

// Path is the file's path, for logs.
func (sp *File) Path() string { return filepath.Join(sp.Dir, FileName) }

// Open opens the file for sending, if dir still holds the file written: the
// name must be a regular file (not a link, not a FIFO), opened without
// blocking, and the same file, of the same size, as written.
func (sp *File) Open() (*os.File, error) {
	root, err := os.OpenRoot(sp.Dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, fi, err := openRegular(root, FileName, sp.Info)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp.Path(), err)
	}
	if fi.Size() != sp.Size {
		f.Close()
		return nil, fmt.Errorf("%s was replaced since it was written", sp.Path())
	}
	return f, nil
}

// Remove removes the file, if the name still refers to it (a newer file
// renamed into place meanwhile stays).
func (sp *File) Remove() error {
	root, err := os.OpenRoot(sp.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(FileName)
	if err != nil || !os.SameFile(sp.Info, fi) {
		return err
	}
	return root.Remove(FileName)
}

// openRegular opens name in root for reading if it is a regular file, and
// the file the Lstat saw (safefile.OpenRegular: Lstat, O_NONBLOCK open,
// Fstat); want, when not nil, is the file as written.
func openRegular(root *os.Root, name string, want os.FileInfo) (*os.File, os.FileInfo, error) {
	return safefile.OpenRegular(root, name, want)
}

package snapfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/replproxy/replproxy/internal/safefile"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replid"
)

// metaMax bounds the metadata file read at start.
const metaMax = 4 << 10

// Meta is MetaName's content (JSON).
type Meta struct {
	ReplID  string `json:"replid"`
	Offset  int64  `json:"offset"`
	Size    int64  `json:"size"`
	CRC64   uint64 `json:"crc64"`   // rdbcheck.CRC64 of the whole file
	Created int64  `json:"created"` // when the snapshot was taken, Unix nanoseconds
}

// ErrMetaInvalid is metadata that does not describe a snapshot.
var ErrMetaInvalid = errors.New("snapshot metadata invalid")

// writeMeta replaces MetaName in root with m, atomically and durably
// (safefile.WriteFile: a new temporary file, O_EXCL as a snapshot file's,
// fsynced, renamed over the name, and dir fsynced so that the rename
// survives a power loss).
func writeMeta(root *os.Root, m Meta, random io.Reader) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return safefile.WriteFile(safefile.RootFS{Root: root}, MetaName, tempPrefix, tempSuffix, append(data, '\n'), random)
}

// Load reads MetaName in dir and verifies the file it describes: a regular
// file of that size whose CRC64 matches and that the RDB walk accepts (read
// whole, once). An error that
// errors.Is fs.ErrNotExist means nothing to adopt (no metadata: nothing
// written, or a crash mid-write).
func Load(dir string) (*File, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	m, err := readMeta(root)
	if err != nil {
		return nil, err
	}
	sp := &File{Dir: dir, ReplID: m.ReplID, Offset: m.Offset, Size: m.Size, Created: time.Unix(0, m.Created)}
	f, fi, err := openRegular(root, FileName, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", FileName, err)
	}
	defer f.Close()
	if fi.Size() != m.Size {
		return nil, fmt.Errorf("%s holds %d bytes, its metadata says %d", FileName, fi.Size(), m.Size)
	}
	// One read checks both what was written (the metadata's CRC64 of the
	// file) and that it is an RDB a replica loads (the walk), as every
	// payload is checked before it is served.
	var sum crc64Writer
	walk := rdbcheck.NewWalker()
	n, err := io.Copy(io.MultiWriter(&sum, walk), f) // a byte the walk refuses ends it, with the walk's error
	var corrupt *rdbcheck.CorruptError
	if errors.As(err, &corrupt) {
		return nil, fmt.Errorf("%s: not an RDB a replica loads: %w", FileName, err)
	}
	if err != nil || n != m.Size {
		return nil, fmt.Errorf("reading %s: %d of %d bytes: %w", FileName, n, m.Size, err)
	}
	if sum.crc != m.CRC64 {
		return nil, fmt.Errorf("%s: CRC64 %016x, its metadata says %016x", FileName, sum.crc, m.CRC64)
	}
	if err := walk.Close(); err != nil {
		return nil, fmt.Errorf("%s: %w", FileName, err)
	}
	sp.Info = fi
	return sp, nil
}

// readMeta reads and checks MetaName in root.
func readMeta(root *os.Root) (Meta, error) {
	var m Meta
	fi, err := root.Lstat(MetaName)
	if err != nil {
		return m, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > metaMax {
		return m, fmt.Errorf("%w: %s is not a regular file of at most %d bytes", ErrMetaInvalid, MetaName, metaMax)
	}
	data, err := root.ReadFile(MetaName)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%w: %w", ErrMetaInvalid, err)
	}
	// Each figure in range before any arithmetic on it (offset+1, the age).
	if !replid.Valid(m.ReplID) || m.Offset < 0 || m.Offset > replid.MaxOffset || m.Size <= 0 || m.Size > replid.MaxOffset || m.Created < 0 {
		return m, fmt.Errorf("%w: replid %q, offset %d, size %d, created %d", ErrMetaInvalid, m.ReplID, m.Offset, m.Size, m.Created)
	}
	return m, nil
}

// crc64Writer sums what is written to it with rdbcheck.CRC64.
type crc64Writer struct{ crc uint64 }

func (w *crc64Writer) Write(p []byte) (int, error) {
	w.crc = rdbcheck.CRC64(w.crc, p)
	return len(p), nil
}

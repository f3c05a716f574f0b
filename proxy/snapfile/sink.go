package snapfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/replproxy/replproxy/internal/safefile"
	"github.com/replproxy/replproxy/rdbcheck"
	"github.com/replproxy/replproxy/replbuf"
)

// Options are a Sink's choices.
type Options struct {
	// Random names the temporary files; nil is crypto/rand (a test seam).
	Random io.Reader
	// WithMeta writes MetaName beside the file, with the CRC64 of the file
	// computed as it is written (the stream log is on: a restart may serve
	// it).
	WithMeta bool
}

// A Sink writes one snapshot file to dir, the one way every snapshot file is
// written: from memory (CopyFrom) or from the primary as a payload arrives
// (Write). The bytes go to a new temporary file through an os.Root on dir;
// Close fsyncs it and renames it to FileName, with MetaName beside it when
// Options.WithMeta; Cancel removes it. Owned by one goroutine; after Close
// or Cancel it is done with.
type Sink struct {
	root *os.Root
	p    *safefile.Pending // the temporary file
	dir  string
	opt  Options
	meta Meta   // the snapshot's identity; Size and CRC64 are completed by Close
	crc  uint64 // rdbcheck.CRC64 of what was written, when opt.WithMeta
}

// Create starts a snapshot file in dir for the snapshot taken at (replID,
// offset) at created: it creates the temporary file.
func Create(dir, replID string, offset int64, created time.Time, opt Options) (*Sink, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	p, err := safefile.Create(safefile.RootFS{Root: root}, tempPrefix, tempSuffix, opt.Random)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &Sink{root: root, p: p, dir: dir, opt: opt,
		meta: Meta{ReplID: replID, Offset: offset, Created: created.UnixNano()}}, nil
}

// Write appends p to the file.
func (w *Sink) Write(p []byte) (int, error) {
	if w.opt.WithMeta {
		w.crc = rdbcheck.CRC64(w.crc, p)
	}
	return w.p.Write(p)
}

// CopyFrom writes what rd reads, a reader of a complete snapshot, until its
// end, straight from the snapshot's blocks, or until ctx ends.
func (w *Sink) CopyFrom(ctx context.Context, rd *replbuf.Cursor) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		bufs, err := rd.Pending()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(*bufs) == 0 {
			if err := rd.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		if w.opt.WithMeta {
			for _, b := range *bufs {
				w.crc = rdbcheck.CRC64(w.crc, b)
			}
		}
		n, err := bufs.WriteTo(w.p)
		if err != nil {
			return err
		}
		if err := rd.Advance(n); err != nil {
			return err
		}
	}
}

// Cancel removes the temporary file.
func (w *Sink) Cancel() {
	w.p.Cancel()
	w.root.Close()
}

// Close fsyncs the file and renames it to FileName; with Options.WithMeta it
// writes the metadata, completed with the file's size and CRC64, beside it.
// It returns the record of the file as written; on failure nothing of it is
// left.
func (w *Sink) Close() (*File, error) {
	root := w.root
	defer root.Close()
	if w.opt.WithMeta {
		// The file's bytes are on disk before the old metadata goes, and the
		// old metadata goes before the rename: a crash in between leaves a
		// file without metadata, which is not adopted, never metadata
		// describing another file.
		if err := w.p.File().Sync(); err != nil {
			w.p.Cancel()
			return nil, err
		}
		if err := root.Remove(MetaName); err != nil && !errors.Is(err, fs.ErrNotExist) {
			w.p.Cancel()
			return nil, err
		}
	}
	// One rename into place (safefile: fsync, close, rename, fsync of dir);
	// a rename replaces whatever holds the name, a planted link included,
	// without following it.
	fi, err := w.p.Commit(FileName)
	if fi == nil {
		return nil, err
	}
	// err, with fi, is only dir's fsync after the rename: the file is in
	// place and served; with metadata, its write syncs dir again
	// and reports a failure then.
	if w.opt.WithMeta {
		m := w.meta
		m.Size, m.CRC64 = fi.Size(), w.crc
		if err := writeMeta(root, m, w.opt.Random); err != nil {
			root.Remove(FileName)
			return nil, fmt.Errorf("snapshot metadata: %w", err)
		}
	}
	return &File{Dir: w.dir, Info: fi, ReplID: w.meta.ReplID, Offset: w.meta.Offset, Size: fi.Size(),
		Created: time.Unix(0, w.meta.Created)}, nil
}

package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/replproxy/replproxy/replbuf"
)

// Snapshots spilled to dir (maxmemory-policy evict-snapshots).
//
// Every name is chosen by the proxy, never taken from the network: the
// replication ID and offset of the spilled snapshot stay in memory beside the
// file. Every file operation goes through an os.Root opened on dir, so no name
// can reach outside it, whether by ".." or by a symlink. The temporary file is
// created with O_EXCL under a random name (nothing planted there is ever
// opened or truncated) and renamed into place; a spilled file is sent only
// while dir still holds the very file the proxy wrote. Spills are serialised
// (history.mu.spilling), so one fixed name is enough: a spill only starts while
// no spilled file is recorded.
//
// As with Redis's dbfilename, two instances must not share a dir: the second
// one to start removes the first one's spilled file, and the first then
// fetches a new snapshot instead of serving the file (never a wrong one).
const (
	// spillFileName is the spilled snapshot.
	spillFileName = "replproxy-snapshot.rdb"
	// spillTempPrefix and spillTempSuffix frame a spill in progress:
	// spillTempPrefix + 16 random hex digits + spillTempSuffix.
	spillTempPrefix = "replproxy-snapshot-"
	spillTempSuffix = ".tmp"
	// spillTempTries bounds the names tried when some already exist.
	spillTempTries = 100
	// snapshotMetaName is the metadata beside spillFileName when the stream
	// log is on (snapshot_disk.go): what a restart needs to serve the file.
	snapshotMetaName = "replproxy-snapshot.meta"
)

// A spilledSnapshot is a snapshot evicted from memory to spillFileName in
// dir, from which full syncs are served with sendfile.
type spilledSnapshot struct {
	dir     string      // the dir it was written to
	file    os.FileInfo // the file as written: it is used only while the name refers to it
	replID  string
	offset  int64
	size    int64
	created time.Time // when the snapshot was taken (INFO's age)
}

// path is the spilled file's path, for logs.
func (sp *spilledSnapshot) path() string { return filepath.Join(sp.dir, spillFileName) }

// open opens the spilled file for sending, if dir still holds the file the
// proxy wrote: the name must be a regular file (not a link, not a FIFO),
// opened without blocking, and the same file, of the same size, as written.
func (sp *spilledSnapshot) open() (*os.File, error) {
	root, err := os.OpenRoot(sp.dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	before, err := root.Lstat(spillFileName)
	if err != nil {
		return nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is no longer a regular file (%s)", sp.path(), before.Mode().Type())
	}
	// O_NONBLOCK: should a FIFO appear between the Lstat and the open, the
	// open returns instead of waiting for a writer; the Fstat below refuses it.
	f, err := root.OpenFile(spillFileName, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !os.SameFile(before, fi) || !os.SameFile(sp.file, fi) || fi.Size() != sp.size {
		f.Close()
		return nil, fmt.Errorf("%s was replaced since it was written", sp.path())
	}
	return f, nil
}

// remove removes the spilled file, if the name still refers to it.
func (sp *spilledSnapshot) remove() error {
	root, err := os.OpenRoot(sp.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(spillFileName)
	if err != nil || !os.SameFile(sp.file, fi) {
		return err
	}
	return root.Remove(spillFileName)
}

// spill writes sn to a file in dir and serves it from there; if the file
// cannot be written the snapshot is dropped instead. Either way its memory is
// released once no replica reads it.
func (s *Server) spill(ctx context.Context, sn *replbuf.Snapshot, dir string) {
	s.writeSnapshot(ctx, sn, dir, true)
}

// writeSnapshot writes sn to dir, with its metadata when the stream log is
// on (so that a restart can serve it), and ends with spillDone. evicted says
// whether maxmemory asked for it (spill) or the stream log did (persist).
func (s *Server) writeSnapshot(ctx context.Context, sn *replbuf.Snapshot, dir string, evicted bool) {
	file, err := writeSpillFile(ctx, sn, dir, s.spillRand, s.durable != nil)
	s.hist.spillDone(sn, dir, file, err, evicted)
}

// writeSpillFile writes a complete snapshot to spillFileName in dir through
// a spillWriter (a new temporary file, fsynced, then renamed into place,
// with snapshotMetaName beside it when withMeta). It returns the file as
// written. random names the temporary files (nil: crypto/rand).
func writeSpillFile(ctx context.Context, sn *replbuf.Snapshot, dir string, random io.Reader, withMeta bool) (os.FileInfo, error) {
	rd, err := sn.NewReader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	w, err := newSpillWriter(dir, random, withMeta)
	if err != nil {
		return nil, err
	}
	if err := w.copyFrom(ctx, rd); err != nil {
		w.abort()
		return nil, err
	}
	return w.commit(snapshotMeta{ReplID: sn.ReplID(), Offset: sn.Offset(), Created: sn.Created().UnixNano()})
}

// A spillWriter writes one snapshot file to dir, the one way every snapshot
// file is written: from memory (writeSpillFile) or from the primary as a
// payload arrives (payloadFile). The bytes go to a new temporary file
// (createSpillTemp: O_EXCL, random name) through an os.Root on dir; commit
// fsyncs it and renames it to spillFileName, with snapshotMetaName beside it
// when withMeta (the CRC64 of the file is computed as it is written); abort
// removes it. Owned by one goroutine.
type spillWriter struct {
	root     *os.Root
	f        *os.File
	tmp      string    // the temporary file's name in root
	random   io.Reader // names temporary files (nil: crypto/rand)
	withMeta bool
	crc      uint64 // replbuf.CRC64 of what was written, when withMeta
}

// newSpillWriter creates the temporary file in dir.
func newSpillWriter(dir string, random io.Reader, withMeta bool) (*spillWriter, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	f, tmp, err := createSpillTemp(root, random)
	if err != nil {
		root.Close()
		return nil, err
	}
	return &spillWriter{root: root, f: f, tmp: tmp, random: random, withMeta: withMeta}, nil
}

// write appends p to the file.
func (w *spillWriter) write(p []byte) error {
	if w.withMeta {
		w.crc = replbuf.CRC64(w.crc, p)
	}
	_, err := w.f.Write(p)
	return err
}

// copyFrom writes what rd reads, a reader of a complete snapshot, until its
// end (writev from the snapshot's blocks).
func (w *spillWriter) copyFrom(ctx context.Context, rd *replbuf.Cursor) error {
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
		if w.withMeta {
			for _, b := range *bufs {
				w.crc = replbuf.CRC64(w.crc, b)
			}
		}
		n, err := bufs.WriteTo(w.f)
		if err != nil {
			return err
		}
		if err := rd.Advance(n); err != nil {
			return err
		}
	}
}

// abort removes the temporary file.
func (w *spillWriter) abort() {
	w.f.Close()
	w.root.Remove(w.tmp)
	w.root.Close()
}

// commit fsyncs the file and renames it to spillFileName; with withMeta it
// writes m, completed with the file's size and CRC64, beside it
// (writeSnapshotMeta). It returns the file as written; on failure nothing of
// it is left.
func (w *spillWriter) commit(m snapshotMeta) (os.FileInfo, error) {
	root := w.root
	defer root.Close()
	if err := w.f.Sync(); err != nil {
		w.f.Close()
		root.Remove(w.tmp)
		return nil, err
	}
	fi, err := w.f.Stat()
	if err != nil {
		w.f.Close()
		root.Remove(w.tmp)
		return nil, err
	}
	if err := w.f.Close(); err != nil {
		root.Remove(w.tmp)
		return nil, err
	}
	if w.withMeta {
		// The old metadata goes first: a crash before the new one is in
		// place leaves a file without metadata, which is not adopted, never
		// metadata describing another file.
		if err := root.Remove(snapshotMetaName); err != nil && !errors.Is(err, fs.ErrNotExist) {
			root.Remove(w.tmp)
			return nil, err
		}
	}
	// A rename replaces whatever holds the name, a planted link included,
	// without following it.
	if err := root.Rename(w.tmp, spillFileName); err != nil {
		root.Remove(w.tmp)
		return nil, err
	}
	if w.withMeta {
		m.Size, m.CRC64 = fi.Size(), w.crc
		if err := writeSnapshotMeta(root, m, w.random); err != nil {
			root.Remove(spillFileName)
			return nil, fmt.Errorf("snapshot metadata: %w", err)
		}
	}
	return fi, nil
}

// createSpillTemp creates a new temporary spill file in root with O_EXCL: a
// name that exists already (a file, or a link planted there) is never
// opened; another name is tried instead.
func createSpillTemp(root *os.Root, random io.Reader) (*os.File, string, error) {
	if random == nil {
		random = rand.Reader
	}
	var b [8]byte
	for range spillTempTries {
		if _, err := io.ReadFull(random, b[:]); err != nil {
			return nil, "", fmt.Errorf("temporary file name: %w", err)
		}
		name := spillTempPrefix + hex.EncodeToString(b[:]) + spillTempSuffix
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("no free temporary file name after %d tries", spillTempTries)
}

// removeSpillLeftovers removes, at start, the files earlier runs spilled to
// dir: a spilled snapshot cannot be served after a restart unless the stream
// log is on and New adopted it (adoptSnapshot: its metadata records its
// replid, offset and CRC64, and the log covers the stream after it), and a
// temporary file is a spill that never finished. The names of earlier versions (replproxy-<replid>-<offset>.rdb)
// go too. Nothing else is touched; a dir that cannot be read is only logged.
func (s *Server) removeSpillLeftovers(dir string) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		s.log.Debug("dir not readable: no spill leftovers removed", "dir", dir, "error", err)
		return
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		s.log.Warn("cannot list dir for spill leftovers", "dir", dir, "error", err)
		return
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		s.log.Warn("cannot list dir for spill leftovers", "dir", dir, "error", err)
		return
	}
	// With the stream log on, New adopted a snapshot it can serve (if any)
	// before this runs: its two files stay.
	adopted := s.hist.spilledSnapshot() != nil
	for _, name := range names {
		if !isSpillLeftover(name) || adopted && (name == spillFileName || name == snapshotMetaName) {
			continue
		}
		if fi, err := root.Lstat(name); err != nil || fi.IsDir() {
			continue
		}
		if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot remove a spill leftover", "path", filepath.Join(dir, name), "error", err)
			continue
		}
		s.log.Info("spill leftover removed", "path", filepath.Join(dir, name))
	}
}

// isSpillLeftover reports whether name is one the spill writes, or wrote in
// earlier versions.
func isSpillLeftover(name string) bool {
	if name == spillFileName || name == snapshotMetaName {
		return true
	}
	if strings.HasPrefix(name, spillTempPrefix) && strings.HasSuffix(name, spillTempSuffix) {
		return true
	}
	// Earlier versions: replproxy-<40 hex>-<offset>.rdb, and .rdb.tmp.
	rest, ok := strings.CutPrefix(name, "replproxy-")
	if !ok {
		return false
	}
	if r, ok := strings.CutSuffix(rest, ".tmp"); ok {
		rest = r
	}
	rest, ok = strings.CutSuffix(rest, ".rdb")
	if !ok || len(rest) < ReplIDSize+2 || rest[ReplIDSize] != '-' {
		return false
	}
	return strings.Trim(rest[:ReplIDSize], "0123456789abcdef") == "" &&
		strings.Trim(rest[ReplIDSize+1:], "0123456789") == ""
}

package proxy

import (
	"context"
	"errors"
	"io"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
)

// Snapshots spilled to dir (maxmemory-policy evict-snapshots), and written
// there for the stream log (snapshot_disk.go): the files themselves are
// package snapfile's; this file decides when one is written and hands it to
// the history.

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
	s.hist.SpillDone(sn, dir, file, err, evicted)
}

// writeSpillFile writes a complete snapshot to dir through a snapfile.Sink
// (a new temporary file, fsynced, then renamed into place, with its
// metadata beside it when withMeta). It returns the file as written. random
// names the temporary files (nil: crypto/rand).
func writeSpillFile(ctx context.Context, sn *replbuf.Snapshot, dir string, random io.Reader, withMeta bool) (*snapfile.File, error) {
	rd, err := sn.NewReader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	w, err := snapfile.Create(dir, sn.ReplID(), sn.Offset(), sn.Created(), snapfile.Options{Random: random, WithMeta: withMeta})
	if err != nil {
		return nil, err
	}
	if err := w.CopyFrom(ctx, rd); err != nil {
		w.Cancel()
		return nil, err
	}
	return w.Close()
}

// removeSpillLeftovers removes, at start, the files earlier runs spilled to
// dir: a spilled snapshot cannot be served after a restart unless the stream
// log is on and New adopted it (adoptSnapshot: its metadata records its
// replid, offset and CRC64, and the log covers the stream after it), and a
// temporary file is a spill that never finished. The names of earlier versions (replproxy-<replid>-<offset>.rdb)
// go too. Nothing else is touched; a dir that cannot be read is only logged.
func (s *Server) removeSpillLeftovers(dir string) {
	// With the stream log on, New adopted a snapshot it can serve (if any)
	// before this runs: its two files stay.
	done, err := snapfile.RemoveLeftovers(dir, s.hist.SpilledSnapshot() != nil)
	switch {
	case errors.Is(err, snapfile.ErrDirUnreadable):
		s.log.Debug("dir not readable: no spill leftovers removed", "dir", dir, "error", err)
	case err != nil:
		s.log.Warn("cannot list dir for spill leftovers", "dir", dir, "error", err)
	}
	for _, r := range done {
		if r.Err != nil {
			s.log.Warn("cannot remove a spill leftover", "path", r.Path, "error", r.Err)
			continue
		}
		s.log.Info("spill leftover removed", "path", r.Path)
	}
}

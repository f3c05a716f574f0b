package snapshots

import (
	"context"
	"errors"
	"io"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
)

// Snapshots written to dir: spilled by maxmemory-policy evict-snapshots
// (Evict), and persisted for the stream log (Persist). The files themselves
// are package snapfile's; this file writes one and hands it to the history.

// Evict evicts the snapshot id names, as eviction's plan asks: a retired
// one is released; the newest is spilled to dir in the background (dropped
// if dir cannot be written) and served from there. Either way its memory is
// released once no replica reads it. From the monitor.
func (k *Keeper) Evict(id, dir string) {
	if sn := k.hist.Evict(id); sn != nil {
		k.startWrite(sn, dir, true)
	}
}

// startWrite writes sn to dir on the work group (writeSnapshot), or tells
// the history it never started.
func (k *Keeper) startWrite(sn *replbuf.Snapshot, dir string, evicted bool) {
	k.start(job{
		run:  func(ctx context.Context) { k.writeSnapshot(ctx, sn, dir, evicted) },
		undo: func() { k.hist.SpillNotStarted(sn) },
	})
}

// writeSnapshot writes sn to dir, with its metadata when the stream log is
// on (so that a restart can serve it), and tells the history how it went.
// evicted says whether maxmemory asked for it (a spill) or the stream log
// did (a persist).
func (k *Keeper) writeSnapshot(ctx context.Context, sn *replbuf.Snapshot, dir string, evicted bool) {
	file, err := writeFile(ctx, sn, dir, k.random, k.durable)
	k.hist.SpillDone(sn, dir, file, err, evicted)
}

// writeFile writes a complete snapshot to dir through a snapfile.Sink (a
// new temporary file, fsynced, then renamed into place, with its metadata
// beside it when withMeta). It returns the file as written. random names
// the temporary files (nil: crypto/rand).
func writeFile(ctx context.Context, sn *replbuf.Snapshot, dir string, random io.Reader, withMeta bool) (*snapfile.File, error) {
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

// RemoveLeftovers removes, at start, the files earlier runs wrote to dir
// that cannot serve: a snapshot is served after a restart only when the
// stream log is on and Adopt took it (its metadata records its replid,
// offset and CRC64, and the log covers the stream after it), and a
// temporary file is a write that never finished. Older file names
// (replproxy-<replid>-<offset>.rdb) go too. Nothing else is touched; a dir
// that cannot be read is only logged. Call it after Adopt, in a dir this
// proxy holds the lock of.
func (k *Keeper) RemoveLeftovers(dir string) {
	done, err := snapfile.RemoveLeftovers(dir, k.hist.SpilledSnapshot() != nil)
	switch {
	case errors.Is(err, snapfile.ErrDirUnreadable):
		k.log.Debug("dir not readable: no spill leftovers removed", "dir", dir, "error", err)
	case err != nil:
		k.log.Warn("cannot list dir for spill leftovers", "dir", dir, "error", err)
	}
	for _, r := range done {
		if r.Err != nil {
			k.log.Warn("cannot remove a spill leftover", "path", r.Path, "error", r.Err)
			continue
		}
		k.log.Info("spill leftover removed", "path", r.Path)
	}
}

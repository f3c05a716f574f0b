package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
)

// The snapshot on disk (stream log on: repl-log-size > 0).
//
//   - Writing: the monitor hands every complete newest snapshot (an upstream
//     full sync's, a side-link fetch's) to persistNewest, which writes it to
//     dir as a spill does (spill.go: spillFileName, O_EXCL temporary file,
//     fsync, rename, all through an os.Root) with snapshotMetaName beside it:
//     replid, offset, size and the CRC64 of the whole file, computed while
//     writing, replaced atomically (temporary file, fsync, rename, fsync of
//     dir). spillDone then retires the snapshot from memory (released once
//     no replica reads it), so memory holds a snapshot only while it still
//     arrives; full syncs are served from the file with sendfile. This is
//     not an eviction: evicted_snapshots counts only maxmemory's spills.
//   - Serving: planFull sends the file, then the stream after its offset:
//     from memory when memory still holds it, else from the stream log.
//   - Restart: New adopts the file (adoptSnapshot) when its metadata is
//     sound, the file is the regular file it describes, with that CRC64 (the
//     file is read once), and the recovered log continues the stream from
//     offset+1 under a matching replid. Otherwise removeSpillLeftovers
//     removes both files, and the log line says why.
//   - Refetch: a snapshot stays servable while the log covers the stream
//     after it; the log keeps at most repl-log-size bytes (plus a segment)
//     and drops the oldest first. By default nothing more: the proxy never
//     makes the primary fork more often than the same replicas attached
//     directly would, so a new snapshot is fetched only when a replica needs
//     one the proxy cannot serve (planFull; every replica arriving meanwhile
//     shares it). With repl-snapshot-refresh set, an eager refresh: once the
//     stream written since the snapshot reaches refetchFraction of
//     repl-log-size (or the log or the replid no longer continue it), the
//     monitor starts one side-link fetch in the background, with no replica
//     waiting, so that the next full sync finds a fresh snapshot instead of
//     waiting for a fork. At most one fetch runs (history.mu.fetch), a
//     background one is tried once (fetchLoop does not retry a fetch no
//     replica waits for), and at most once per repl-snapshot-refresh, so a
//     primary that is down costs one attempt per interval, not a storm.

const (
	// snapshotMetaMax bounds the metadata file read at start.
	snapshotMetaMax = 4 << 10
	// refetchNumerator/refetchDenominator is refetchFraction: the share
	// of repl-log-size written since the snapshot that starts a background
	// fetch. A quarter of the log is left for the fetch to finish in.
	refetchNumerator, refetchDenominator = 3, 4
)

// snapshotMeta is snapshotMetaName's content (JSON).
type snapshotMeta struct {
	ReplID  string `json:"replid"`
	Offset  int64  `json:"offset"`
	Size    int64  `json:"size"`
	CRC64   uint64 `json:"crc64"`   // replbuf.CRC64 of the whole file
	Created int64  `json:"created"` // when the snapshot was taken, Unix nanoseconds
}

// writeSnapshotMeta replaces snapshotMetaName in root with m, atomically:
// a new temporary file (O_EXCL, as a spill's), fsynced, renamed over the
// name, and dir fsynced so that the rename survives a power loss.
func writeSnapshotMeta(root *os.Root, m snapshotMeta, random io.Reader) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	f, tmp, err := createSpillTemp(root, random)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		root.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		root.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, snapshotMetaName); err != nil {
		root.Remove(tmp)
		return err
	}
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// persistSnapshot writes the newest complete snapshot to dir when the stream
// log is on (see the top of the file). From the monitor.
func (s *Server) persistSnapshot() {
	if s.durable == nil {
		return
	}
	dir := s.config().Dir
	s.hist.persistNewest(func(sn *replbuf.Snapshot) bool {
		return s.goBackground(func(ctx context.Context) { s.writeSnapshot(ctx, sn, dir, false) })
	})
}

// refetchBeforeStale starts a background fetch, under repl-snapshot-refresh
// only, when the snapshot on disk is about to outlive the stream log's cover
// (see the top of the file). From the monitor, which owns refetchAfter.
func (s *Server) refetchBeforeStale(now time.Time) {
	d := s.durable
	every := s.config().ReplSnapshotRefresh
	if d == nil || every <= 0 || now.Before(s.refetchAfter) || s.up.State() != upstream.StateConnected || d.down.Load() {
		return
	}
	first, last := d.log.Bounds()
	limit := s.config().ReplLogSize / refetchDenominator * refetchNumerator
	started := s.hist.refetchSpilled(first, last, limit, func(f *fetch) bool {
		return s.goBackground(func(ctx context.Context) { s.runFetch(ctx, f) })
	})
	if started != nil {
		s.refetchAfter = now.Add(every)
		s.log.Info("fetching a fresh snapshot: the stream log will soon no longer cover the one on disk",
			"snapshot-offset", started.offset, "log-first-offset", first, "log-last-offset", last)
	}
}

// refetchSpilled starts a fetch (start, as planFull's) when the snapshot on
// disk is the newest, no fetch runs, and either the stream written since it
// (to logLast) reaches limit or the log (from logFirst) or the replid no
// longer continues it. It returns the snapshot it replaces, or nil.
func (h *history) refetchSpilled(logFirst, logLast, limit int64, start func(*fetch) bool) *spilledSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	sp := h.mu.spilled
	if sp == nil || h.mu.snapshot != nil || h.mu.fetch != nil || h.mu.spilling != nil || !h.mu.synced {
		return nil
	}
	if logLast-sp.offset < limit && logFirst <= sp.offset+1 && h.matchesLocked(sp.replID, sp.offset+1) {
		return nil
	}
	f := &fetch{ready: make(chan struct{}), reason: fetchRefresh}
	h.mu.fetch = f
	if !start(f) {
		h.mu.fetch = nil
		return nil
	}
	return sp
}

// adoptSnapshot makes the snapshot a previous run left in dir the spilled
// one, if it can serve (see the top of the file); otherwise it says why, and
// removeSpillLeftovers removes it. In New, after the stream log is
// recovered.
func (s *Server) adoptSnapshot(dir string) {
	sp, err := loadSnapshot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return // nothing left, or a file without metadata (a crash mid-write)
	}
	if err == nil {
		first, last := s.durable.log.Bounds()
		err = s.hist.adoptSpilled(sp, first, last)
	}
	if err != nil {
		s.log.Warn("snapshot on disk not adopted: removing it", "dir", dir, "error", err)
		return
	}
	s.log.Info("snapshot on disk adopted", "path", sp.path(), "replid", sp.replID, "offset", sp.offset,
		"size", humanize.IBytes(uint64(sp.size)))
}

// errMetaInvalid is metadata that does not describe a snapshot.
var errMetaInvalid = errors.New("snapshot metadata invalid")

// loadSnapshot reads snapshotMetaName in dir and checks the file it
// describes: a regular file of that size whose CRC64 matches (read whole).
func loadSnapshot(dir string) (*spilledSnapshot, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	m, err := readSnapshotMeta(root)
	if err != nil {
		return nil, err
	}
	sp := &spilledSnapshot{dir: dir, replID: m.ReplID, offset: m.Offset, size: m.Size, created: time.Unix(0, m.Created)}
	before, err := root.Lstat(spillFileName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", spillFileName, err)
	}
	if !before.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", spillFileName, before.Mode().Type())
	}
	f, err := root.OpenFile(spillFileName, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !os.SameFile(before, fi) || fi.Size() != m.Size {
		return nil, fmt.Errorf("%s holds %d bytes, its metadata says %d", spillFileName, fi.Size(), m.Size)
	}
	var sum crc64Writer
	if n, err := io.Copy(&sum, f); err != nil || n != m.Size {
		return nil, fmt.Errorf("reading %s: %d of %d bytes: %w", spillFileName, n, m.Size, err)
	}
	if sum.crc != m.CRC64 {
		return nil, fmt.Errorf("%s: CRC64 %016x, its metadata says %016x", spillFileName, sum.crc, m.CRC64)
	}
	sp.file = fi
	return sp, nil
}

// readSnapshotMeta reads and checks snapshotMetaName in root.
func readSnapshotMeta(root *os.Root) (snapshotMeta, error) {
	var m snapshotMeta
	fi, err := root.Lstat(snapshotMetaName)
	if err != nil {
		return m, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > snapshotMetaMax {
		return m, fmt.Errorf("%w: %s is not a regular file of at most %d bytes", errMetaInvalid, snapshotMetaName, snapshotMetaMax)
	}
	data, err := root.ReadFile(snapshotMetaName)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("%w: %w", errMetaInvalid, err)
	}
	// Each figure in range before any arithmetic on it (offset+1, the age).
	if !replid.Valid(m.ReplID) || m.Offset < 0 || m.Offset > replid.MaxOffset || m.Size <= 0 || m.Size > replid.MaxOffset || m.Created < 0 {
		return m, fmt.Errorf("%w: replid %q, offset %d, size %d, created %d", errMetaInvalid, m.ReplID, m.Offset, m.Size, m.Created)
	}
	return m, nil
}

// crc64Writer sums what is written to it with replbuf.CRC64.
type crc64Writer struct{ crc uint64 }

func (w *crc64Writer) Write(p []byte) (int, error) {
	w.crc = replbuf.CRC64(w.crc, p)
	return len(p), nil
}

// adoptSpilled makes sp the spilled snapshot if the recovered stream, whose
// log holds logFirst to logLast, continues it: its replid matches at
// offset+1 and the log holds offset+1 (or ends at offset). Before Run only.
func (h *history) adoptSpilled(sp *spilledSnapshot, logFirst, logLast int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.mu.synced:
		return errors.New("the stream log holds no history")
	case !h.matchesLocked(sp.replID, sp.offset+1):
		return fmt.Errorf("replid %s at offset %d is not the stream log's (%s)", sp.replID, sp.offset, h.mu.replID)
	case sp.offset+1 < logFirst || sp.offset > logLast:
		return fmt.Errorf("the stream log holds offsets %d to %d, not the stream after offset %d", logFirst, logLast, sp.offset)
	}
	h.mu.spilled = sp
	return nil
}

package streamlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"
)

// openForAppend opens s's files for appending.
func (l *Log) openForAppend(s *segment) error {
	seg, err := l.fsys.OpenFile(segName(s.first, segExt), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", segName(s.first, segExt), err)
	}
	crc, err := l.fsys.OpenFile(segName(s.first, crcExt), os.O_RDWR, 0)
	if err != nil {
		seg.Close()
		return fmt.Errorf("open %s: %w", segName(s.first, crcExt), err)
	}
	if _, err := seg.Seek(s.size(), io.SeekStart); err != nil {
		seg.Close()
		crc.Close()
		return err
	}
	if _, err := crc.Seek(int64(len(crcMagic))+s.entries*entrySize, io.SeekStart); err != nil {
		seg.Close()
		crc.Close()
		return err
	}
	l.seg, l.crc, l.vec = seg, crc, newVecWriter(seg)
	// The rest of the segment allocated ahead too, as a new one is.
	l.prealloc = preallocate(seg, l.segBytes)
	return nil
}

// fail records err as the sticky error and returns it (the first one,
// when there was one already). REQUIRES: wmu or smu held (the writer's
// failure, or a Sync's).
func (l *Log) fail(err error) error {
	l.status.Lock()
	defer l.status.Unlock()
	if l.status.err == nil {
		l.status.err = err
	}
	return l.status.err
}

// stickyErr is the sticky error, or nil.
func (l *Log) stickyErr() error {
	l.status.Lock()
	defer l.status.Unlock()
	return l.status.err
}

// Append adds p to the stream, as the bytes after the last one held.
// boundary says that p ends where a command ends (see Recovery.Unfinished).
func (l *Log) Append(p []byte, boundary bool) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.one[0] = p
	err := l.appendLocked(l.one[:], boundary)
	l.one[0] = nil
	return err
}

// AppendBuffers adds the bytes of bufs, in order, to the stream: as Append
// of their concatenation, without copying it. Records are cut from them up
// to RecordMax bytes each, and each record's slices go to the segment file
// in one writev, so that a batch of the stream's shared blocks costs a
// system call or two per record rather than per block. bufs and its
// slices are neither modified nor kept.
func (l *Log) AppendBuffers(bufs [][]byte, boundary bool) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.appendLocked(bufs, boundary)
}

// appendLocked is AppendBuffers. REQUIRES: wmu held.
func (l *Log) appendLocked(bufs [][]byte, boundary bool) error {
	if err := l.usableLocked(); err != nil {
		return err
	}
	var left int64
	for _, b := range bufs {
		left += int64(len(b))
	}
	defer func() { clear(l.rec); l.rec = l.rec[:0] }() // keep no reference to the caller's bytes
	i, skip := 0, 0                                    // the next byte is bufs[i][skip]
	for left > 0 {
		if l.seg == nil || l.curSize() >= l.segBytes {
			// The entries held belong to the segment being sealed.
			if err := l.writeEntries(); err != nil {
				return err
			}
			if err := l.roll(); err != nil {
				return l.fail(err)
			}
		}
		// A record never crosses the segment size, so segments are at most
		// SegmentBytes and retention keeps what it promises.
		n := min(left, RecordMax, l.segBytes-l.curSize())
		l.rec = l.rec[:0]
		var sum uint32
		for want := n; want > 0; {
			b := bufs[i][skip:]
			take := min(int64(len(b)), want)
			if take > 0 {
				l.rec = append(l.rec, b[:take])
				sum = crc32.Update(sum, castagnoli, b[:take])
			}
			want -= take
			if skip += int(take); skip == len(bufs[i]) {
				i, skip = i+1, 0
			}
		}
		if err := l.writeRecord(l.rec); err != nil {
			return l.fail(fmt.Errorf("write the stream log: %w", err))
		}
		mark := boundary && n == left
		field := uint32(n)
		if mark {
			field |= boundaryFlag
		}
		if len(l.entries) == cap(l.entries) {
			if err := l.writeEntries(); err != nil {
				return err
			}
		}
		l.entries = binary.LittleEndian.AppendUint32(l.entries, field)
		l.entries = binary.LittleEndian.AppendUint32(l.entries, sum)
		// Published before its entry is written: readers verify against
		// the index, and a Sync, which takes the end under wmu, never
		// sees the end of a call whose entries are still held.
		l.mu.Lock()
		l.segs[len(l.segs)-1].add(l.rec, n, sum, mark)
		l.total += n
		l.mu.Unlock()
		left -= n
	}
	return l.writeEntries()
}

// writeEntries writes the CRC entries held, those of records whose bytes
// are written already (bytes before entries), to the newest segment's CRC
// file in one write: a batch's records cost one write of their entries,
// not one write of 8 bytes each. REQUIRES: wmu held.
func (l *Log) writeEntries() error {
	if len(l.entries) == 0 {
		return nil
	}
	_, err := l.crc.Write(l.entries)
	l.entries = l.entries[:0]
	if err != nil {
		return l.fail(fmt.Errorf("write the stream log's checksums: %w", err))
	}
	return nil
}

// writeRecord writes a record's slices to the newest segment: by one
// writev when the file allows, else one write per slice.
// REQUIRES: wmu held.
func (l *Log) writeRecord(rec [][]byte) error {
	if l.vec != nil {
		return l.vec.writeBuffers(rec)
	}
	for _, b := range rec {
		if _, err := l.seg.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if err := l.stickyErr(); err != nil {
		return err
	}
	if l.id.ReplID == "" {
		return errors.New("streamlog: append before Reset gave the stream an identity")
	}
	return nil
}

// curSize is the newest segment's size. REQUIRES: wmu held (the writer is
// the only one changing it).
func (l *Log) curSize() int64 { return l.segs[len(l.segs)-1].size() }

// roll seals the newest segment and starts one at the next offset, then
// drops the oldest segments over MaxBytes. REQUIRES: wmu held.
func (l *Log) roll() error {
	if l.seg != nil {
		if err := l.seal(); err != nil {
			return err
		}
		if err := l.retire(); err != nil {
			return err
		}
	}
	first := l.endLocked() + 1
	seg, reused, err := l.createSegment(segName(first, segExt))
	if err != nil {
		return err
	}
	crc, err := l.fsys.OpenFile(segName(first, crcExt), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		seg.Close()
		return fmt.Errorf("create %s: %w", segName(first, crcExt), err)
	}
	l.seg, l.crc, l.vec, l.reused = seg, crc, newVecWriter(seg), reused
	magic := crcMagic
	if reused {
		magic = crcMagicReused
	}
	if _, err := crc.Write([]byte(magic)); err != nil {
		return fmt.Errorf("write %s: %w", segName(first, crcExt), err)
	}
	// Synced before meta.json lists the segment: its CRC file's header,
	// the one thing in it recovery reads. The segment file holds no byte
	// of it yet (what is written to it later is synced with it, by Sync or
	// retire), and both names are made durable by meta.json's directory sync.
	if err := datasync(crc); err != nil {
		return fmt.Errorf("sync %s: %w", segName(first, crcExt), err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, &segment{first: first})
	drop := l.dropLocked()
	m := l.metaLocked()
	l.mu.Unlock()
	// One replacement of meta.json per new segment: it lists the new one
	// and unlists those retention drops, before their files are removed.
	if err := l.writeMeta(m); err != nil {
		return err
	}
	if err := l.removeDropped(drop); err != nil {
		return err
	}
	l.prepareSpare()
	return nil
}

// seal cuts the newest segment's file to what was written before a new one
// starts or the log closes: a recycled file, and a preallocated one, whose
// blocks past its end would otherwise stay allocated. Making it durable is
// retire's (or Close's). REQUIRES: wmu held.
func (l *Log) seal() error {
	if l.reused || l.prealloc {
		if err := l.seg.Truncate(l.curSize()); err != nil {
			return fmt.Errorf("cut the recycled segment to size: %w", err)
		}
		l.reused, l.prealloc = false, false
	}
	return nil
}

// sealedFiles are a sealed segment's files, open until they are synced.
type sealedFiles struct{ seg, crc File }

func (f sealedFiles) close() {
	f.seg.Close()
	f.crc.Close()
}

// retire hands the sealed newest segment's files to the next Sync, which
// fsyncs them before the newest one's, so that sealing waits for no fsync:
// the syncer, woken at once (SealedReady), makes them durable under
// everysec, the follower's Sync after the batch under always. Up to
// maxSealed segments wait so; past that (a log nobody syncs, repl-log-fsync
// no, or segments sealed faster than the syncer syncs them) the writer
// syncs the oldest itself, as sealing did before, so that every segment
// is durable by the time maxSealed more are sealed. The writer is the
// follower: an fdatasync of a whole segment (20-170 ms measured at 350
// MB/s) holds it while the stream goes on, and the blocks it pins
// meanwhile were most of the proxy's peak memory with the log on, when
// one segment waited and the writer synced the one before at nearly every
// roll. REQUIRES: wmu held.
func (l *Log) retire() error {
	l.sealedMu.Lock()
	l.sealed = append(l.sealed, sealedFiles{l.seg, l.crc})
	var oldest sealedFiles
	if len(l.sealed) > maxSealed {
		oldest = l.sealed[0]
		n := copy(l.sealed, l.sealed[1:])
		l.sealed[n] = sealedFiles{}
		l.sealed = l.sealed[:n]
	}
	l.sealedMu.Unlock()
	l.seg, l.crc, l.vec = nil, nil, nil
	select {
	case l.sealedReady <- struct{}{}:
	default:
	}
	if oldest.seg == nil {
		return nil
	}
	// Taken out under sealedMu, so no Sync takes it from the list; but a
	// Sync under way may have taken it as its newest segment, before the
	// rolls since: under smu, it is closed only once that Sync is done.
	l.smu.Lock()
	defer l.smu.Unlock()
	err := syncFiles(oldest.seg, oldest.crc)
	oldest.close()
	return err
}

// SealedReady is signalled (one value, never blocking the writer) when a
// sealed segment waits for a Sync: the syncer syncs at once rather than
// at its next period, so that the writer does not sync it itself.
func (l *Log) SealedReady() <-chan struct{} { return l.sealedReady }

// syncSealed syncs and closes the files retire handed over, oldest first,
// and reports whether newest's were among them: a Sync's newest segment,
// taken before a roll sealed it, is synced (and closed) here then, and
// must not be synced again. REQUIRES: smu held.
func (l *Log) syncSealed(newest File) (newestSynced bool, err error) {
	var take [maxSealed]sealedFiles
	l.sealedMu.Lock()
	k := copy(take[:], l.sealed)
	clear(l.sealed)
	l.sealed = l.sealed[:0]
	l.sealedMu.Unlock()
	for _, f := range take[:k] {
		if err == nil {
			err = syncFiles(f.seg, f.crc)
		}
		newestSynced = newestSynced || (newest != nil && f.seg == newest)
		// Closed even when a sync failed: a failed fsync is never retried
		// on the same file (the log's error is sticky).
		f.close()
	}
	return newestSynced, err
}

// syncFiles syncs the newest segment's bytes, then its checksums.
// REQUIRES: wmu held.
func (l *Log) syncFiles() error { return syncFiles(l.seg, l.crc) }

// syncFiles syncs a segment's bytes, then its checksums (datasync: their
// bytes and sizes, which is all recovery reads of them).
func syncFiles(seg, crc File) error {
	if err := datasync(seg); err != nil {
		return fmt.Errorf("sync the stream log: %w", err)
	}
	if err := datasync(crc); err != nil {
		return fmt.Errorf("sync the stream log's checksums: %w", err)
	}
	return nil
}

// Sync makes everything appended so far durable. It may be called from
// another goroutine than the one appending (a syncer once a second), and
// the writer does not wait for it: under wmu it only takes the newest
// segment's files and the stream's end, then fsyncs them holding smu alone,
// so that Append goes on meanwhile; a segment sealed since the last Sync
// (retire) is fsynced first, earlier ones are durable already. Synced
// advances to the end taken, what was written before the fsync began. The
// writer takes smu only to hand over or close the files (a roll, Reset,
// Close), so it waits for an fsync only then. A failed sync is sticky, as
// a failed write is: the log accepts nothing more until Reset, and
// Stats.Err and Err report it.
func (l *Log) Sync() error {
	l.wmu.Lock()
	if err := l.usableLocked(); err != nil {
		l.wmu.Unlock()
		return err
	}
	seg, crc := l.seg, l.crc
	l.mu.RLock()
	end := l.endLocked()
	l.mu.RUnlock()
	l.smu.Lock() // under wmu: the files cannot be closed before it is held
	l.wmu.Unlock()
	defer l.smu.Unlock()
	newestSynced, err := l.syncSealed(seg)
	if err != nil {
		return l.fail(err)
	}
	if seg != nil && !newestSynced {
		if err := syncFiles(seg, crc); err != nil {
			return l.fail(err)
		}
	}
	// Under smu still: a Reset, which closes the files first, sets its own
	// Synced only after this.
	l.status.Lock()
	if end > l.status.synced {
		l.status.synced = end
	}
	l.status.lastSync = time.Now()
	l.status.Unlock()
	return nil
}

// Reset starts a new generation: the stream from start+1 on, under id.
// Everything held before is dropped, and a sticky error is cleared: Reset
// is how the writer tries again after a failure.
func (l *Log) Reset(id Identity, start int64) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed {
		return ErrClosed
	}
	l.closeFiles()
	l.entries = l.entries[:0] // a failed call's, for files no longer listed
	l.mu.Lock()
	old := l.segs
	l.id, l.start, l.segs, l.total = id, start, nil, 0
	l.gen++
	m := l.metaLocked()
	l.mu.Unlock()
	l.status.Lock()
	l.status.err, l.status.synced = nil, start
	l.status.Unlock()
	if err := l.writeMeta(m); err != nil {
		return l.fail(err)
	}
	for _, s := range old {
		for _, ext := range []string{segExt, crcExt} {
			if err := removeIfExists(l.fsys, segName(s.first, ext)); err != nil {
				return l.fail(fmt.Errorf("remove %s: %w", segName(s.first, ext), err))
			}
		}
	}
	return nil
}

// SetIdentity records a change of replid at the stream's current end (an
// upstream +CONTINUE with a new replid).
func (l *Log) SetIdentity(id Identity) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	l.mu.Lock()
	l.id = id
	m := l.metaLocked()
	l.mu.Unlock()
	if err := l.writeMeta(m); err != nil {
		return l.fail(err)
	}
	return nil
}

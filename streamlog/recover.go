package streamlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/replproxy/replproxy/replid"
)

// Recovery reports what Open found.
type Recovery struct {
	Verified   int64  // stream bytes verified and kept
	Cut        int64  // bytes found and cut: after a bad record, or without an entry
	Unfinished int64  // verified bytes cut because no command boundary follows them
	Problem    string // why bytes were cut or the metadata ignored; "" when all was well
}

// recover loads meta.json and verifies the segments it lists.
func (l *Log) recover() (Recovery, error) {
	var rec Recovery
	m, err := l.readMeta()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return rec, l.removeUnlisted(nil)
	case err != nil:
		rec.Problem = err.Error()
		if err := l.writeMeta(l.metaLocked()); err != nil {
			return rec, err
		}
		return rec, l.removeUnlisted(nil)
	}
	l.id = Identity{ReplID: m.ReplID, ReplID2: m.ReplID2, SecondOffset: m.SecondOffset}
	l.start = m.Start
	// The first segment starts after Start (retention drops the oldest);
	// each other one where the one before it ends.
	next := m.Start + 1
	for i, first := range m.Segments {
		if (i > 0 && first != next) || first < next {
			rec.Problem = fmt.Sprintf("segment %s starts at %d, the stream before it ends at %d", segName(first, segExt), first, next-1)
			rec.Cut += l.sizeOf(m.Segments[i:])
			break
		}
		s, cut, problem := l.verify(first)
		if s.size() == 0 && problem != "" {
			// Nothing usable in it (its files missing or bad from the
			// first record): the log ends before it.
			rec.Cut += cut
			rec.Problem = problem
			rec.Cut += l.sizeOf(m.Segments[i+1:])
			break
		}
		l.segs = append(l.segs, s)
		l.total += s.size()
		rec.Verified += s.size()
		next = first + s.size()
		if cut > 0 || problem != "" {
			rec.Cut += cut
			rec.Problem = problem
			if i+1 < len(m.Segments) {
				rec.Cut += l.sizeOf(m.Segments[i+1:])
			}
			break
		}
	}
	rec.Unfinished = l.cutToBoundary()
	rec.Verified -= rec.Unfinished
	if len(l.segs) != len(m.Segments) {
		if err := l.writeMeta(l.metaLocked()); err != nil {
			return rec, err
		}
	}
	if err := l.removeUnlisted(l.segs); err != nil {
		return rec, err
	}
	if n := len(l.segs); n > 0 {
		if err := l.openForAppend(l.segs[n-1]); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// verify reads a segment's CRC file and checks each record against its
// bytes, cutting both files after the last good record. cut counts the bytes
// dropped; problem says why, when a record was bad.
func (l *Log) verify(first int64) (s *segment, cut int64, problem string) {
	s = &segment{first: first}
	name := segName(first, segExt)
	data, err := l.fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return s, 0, fmt.Sprintf("open %s: %v", name, err)
	}
	defer data.Close()
	crcs, err := l.fsys.OpenFile(segName(first, crcExt), os.O_RDWR, 0)
	if err != nil {
		return s, fileSize(data), fmt.Sprintf("open %s: %v", segName(first, crcExt), err)
	}
	defer crcs.Close()
	// Streamed, entry by entry: a CRC file of any size costs one buffer,
	// and the index only what the data verified against it holds.
	entries := bufio.NewReaderSize(crcs, 64<<10)
	var header [len(crcMagic)]byte
	reused := false
	if _, err := io.ReadFull(entries, header[:]); err != nil || (string(header[:]) != crcMagic && string(header[:]) != crcMagicReused) {
		problem = fmt.Sprintf("%s: no valid header", segName(first, crcExt))
		entries = nil
	} else {
		reused = string(header[:]) == crcMagicReused
	}
	// The data is read in order too, through a buffer: one read per
	// chunk would cost a system call per command under small writes.
	seq := bufio.NewReaderSize(io.NewSectionReader(data, 0, fileSize(data)), 256<<10)
	buf := make([]byte, RecordMax)
	var pos int64
	var e [entrySize]byte
	one := [][]byte{nil}
	for entries != nil {
		if _, err := io.ReadFull(entries, e[:]); err != nil {
			break // the end, or a torn entry: the bytes it described are cut
		}
		field := binary.LittleEndian.Uint32(e[:])
		n := int64(field &^ boundaryFlag)
		sum := binary.LittleEndian.Uint32(e[4:])
		if n == 0 || n > RecordMax {
			problem = fmt.Sprintf("%s: record at %d has length %d", name, first+pos, n)
			break
		}
		if first+pos+n-1 > replid.MaxOffset {
			problem = fmt.Sprintf("%s: record at %d ends past the largest offset, %d", name, first+pos, int64(replid.MaxOffset))
			break
		}
		if k, err := io.ReadFull(seq, buf[:n]); int64(k) != n {
			problem = fmt.Sprintf("%s: record at %d is short (%d of %d bytes): %v", name, first+pos, k, n, err)
			break
		}
		if crc32.Checksum(buf[:n], castagnoli) != sum {
			problem = fmt.Sprintf("%s: record at %d does not match its checksum", name, first+pos)
			break
		}
		pos += n
		one[0] = buf[:n]
		s.add(one, n, sum, field&boundaryFlag != 0)
	}
	cut = max(fileSize(data)-pos, 0)
	if reused && problem == "" {
		cut = 0 // a recycled file's older bytes, past what was written
	}
	// Cut what is not verified, so appends continue right after the last
	// good record. A failed cut leaves bytes past the index, never read.
	data.Truncate(pos)
	crcs.Truncate(int64(len(crcMagic)) + s.entries*entrySize)
	if problem == "" && cut > 0 {
		problem = fmt.Sprintf("%s: %d bytes after the last checksum entry", name, cut)
	}
	return s, cut, problem
}

// cutToBoundary drops the records after the last one that ends at a command
// boundary, and the segments left empty but the first, cutting the files to
// match, and returns the bytes dropped. A log with no boundary at all
// becomes empty, starting where its first segment did.
func (l *Log) cutToBoundary() (cut int64) {
	for i := len(l.segs) - 1; i >= 0; i-- {
		s := l.segs[i]
		if s.mark.pos < s.size() {
			cut += s.size() - s.mark.pos
			l.total -= s.size() - s.mark.pos
			s.cutToMark()
			l.truncate(s)
		}
		if s.size() > 0 {
			l.segs = l.segs[:i+1] // the ones after it are empty now
			return cut
		}
		if i == 0 {
			l.start = s.first - 1
		}
	}
	l.segs = nil
	return cut
}

// truncate cuts s's files to its index. A failed cut leaves bytes past the
// index, never read, and cut again at the next recovery.
func (l *Log) truncate(s *segment) {
	if f, err := l.fsys.OpenFile(segName(s.first, segExt), os.O_RDWR, 0); err == nil {
		f.Truncate(s.size())
		f.Close()
	}
	if f, err := l.fsys.OpenFile(segName(s.first, crcExt), os.O_RDWR, 0); err == nil {
		f.Truncate(int64(len(crcMagic)) + s.entries*entrySize)
		f.Close()
	}
}

// sizeOf adds up the sizes of the segment files named by firsts, for the
// Recovery report.
func (l *Log) sizeOf(firsts []int64) int64 {
	var n int64
	for _, first := range firsts {
		if f, err := l.fsys.OpenFile(segName(first, segExt), os.O_RDONLY, 0); err == nil {
			n += fileSize(f)
			f.Close()
		}
	}
	return n
}

func fileSize(f File) int64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return fi.Size()
}

// removeUnlisted removes the log's files that segs does not list: cut
// segments, segments created before a crash kept them from being listed,
// and a metadata replacement that never happened.
func (l *Log) removeUnlisted(segs []*segment) error {
	names, err := l.fsys.Names()
	if err != nil {
		return fmt.Errorf("list the log directory: %w", err)
	}
	keep := map[string]bool{metaName: true}
	for _, s := range segs {
		keep[segName(s.first, segExt)] = true
		keep[segName(s.first, crcExt)] = true
	}
	for _, name := range names {
		ours := isMetaTemp(name) || name == spareName || isSegFile(name)
		if ours && !keep[name] {
			if err := removeIfExists(l.fsys, name); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
	}
	return nil
}

// isMetaTemp reports whether name is a replacement of meta.json being
// written, by this version or an earlier one.
func isMetaTemp(name string) bool {
	return name == metaTemp || strings.HasPrefix(name, metaTempPrefix) && strings.HasSuffix(name, metaTempSuffix)
}

func isSegFile(name string) bool {
	base, ok := strings.CutSuffix(name, segExt)
	if !ok {
		base, ok = strings.CutSuffix(name, crcExt)
	}
	if !ok || len(base) != 20 {
		return false
	}
	_, err := strconv.ParseUint(base, 10, 63)
	return err == nil
}

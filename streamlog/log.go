package streamlog

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/replproxy/replproxy/replid"
)

const (
	// RecordMax is the most stream bytes one record (one CRC) covers: what
	// a reader reads and verifies before it sends.
	RecordMax = 64 << 10
	// entrySize is a CRC file entry: length, CRC-32C.
	entrySize = 8
	// boundaryFlag, in an entry's length, marks a record that ends where a
	// command ends: recovery keeps the log up to the last such record, so
	// that a PSYNC from its end asks for whole commands.
	boundaryFlag = 1 << 31
	// crcMagic starts every CRC file; crcMagicReused one whose segment file
	// was recycled, so that bytes past its last entry are an older
	// segment's, not a torn write (same length: both are the header).
	crcMagic       = "RPLCRC1\n"
	crcMagicReused = "RPLCRC1R"
	// spareName is a retired segment file kept for the next segment to
	// overwrite: writing over a file's allocated blocks costs the kernel a
	// fraction of extending a new one (block allocation on every page).
	spareName = "spare.seg"
	// metaName and metaTemp are the metadata file and its replacement.
	metaName = "meta.json"
	metaTemp = "meta.json.tmp"
	// segExt and crcExt name a segment's two files.
	segExt = ".seg"
	crcExt = ".crc"
	// metaVersion is the layout's version.
	metaVersion = 1
	// minSegmentBytes bounds how small SegmentBytes may make a segment.
	minSegmentBytes = 64 << 10
	// maxSegmentBytes is the default size of a segment, when MaxBytes allows.
	maxSegmentBytes = 64 << 20
	// mergeBelow is the size under which a record of the in-memory index
	// takes in the next chunk appended (or recovered) instead of being
	// followed by a new one: under small writes the stream comes in chunks
	// of one command (measured: 197 bytes on average, each 13 bytes of
	// index), so a 1 GB log held 70 to 135 MB of index outside any
	// accounting. Two records together hold at least mergeBelow bytes, so
	// the index is at most 12 bytes per mergeBelow/2 of stream: about 1.5
	// MB per GB. The CRC file keeps one entry per chunk.
	mergeBelow = 16 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var (
	// ErrCorrupt is a record whose bytes no longer match their CRC.
	ErrCorrupt = errors.New("streamlog: record does not match its checksum")
	// ErrNotHeld is an offset the log does not hold (any more).
	ErrNotHeld = errors.New("streamlog: offset not in the log")
	// ErrClosed is the log after Close.
	ErrClosed = errors.New("streamlog: closed")
)

// Identity is the replication identity the stream is under.
type Identity struct {
	ReplID       string // "" before any sync
	ReplID2      string // replid.None when there is none
	SecondOffset int64  // second_repl_offset, -1 with no replid2
}

// Options configure a Log.
type Options struct {
	FS FS
	// MaxBytes bounds the segments kept: the oldest is removed while the
	// others hold MaxBytes or more, so at most MaxBytes + SegmentBytes are
	// kept. At least one segment is kept.
	MaxBytes int64
	// SegmentBytes is the size at which a new segment is started; 0 picks
	// MaxBytes/8, between 64 KiB and 64 MiB.
	SegmentBytes int64
}

// Recovery reports what Open found.
type Recovery struct {
	Verified   int64  // stream bytes verified and kept
	Cut        int64  // bytes found and cut: after a bad record, or without an entry
	Unfinished int64  // verified bytes cut because no command boundary follows them
	Problem    string // why bytes were cut or the metadata ignored; "" when all was well
}

// segment is one segment's index: where each record ends and its CRC. A
// record of the index is one or more chunks of the CRC file (mergeBelow):
// what a reader reads and verifies at once.
type segment struct {
	first int64    // offset of its first byte
	ends  []int64  // position after each record, within the segment
	crcs  []uint32 // each record's CRC-32C
	// entries counts the CRC file's entries, one per chunk.
	entries int64
	// mark is where the last chunk that ends at a command boundary ends,
	// with what recovery needs to cut the log there (cutToBoundary).
	mark struct {
		pos     int64  // position within the segment; 0: none
		rec     int    // the record it ends in
		crc     uint32 // that record's CRC-32C up to pos
		entries int64  // the CRC file's entries up to pos
	}
}

// add indexes chunk b, whose CRC-32C is sum, after the segment's end: the
// last record takes it in while shorter than mergeBelow (and the two fit in
// RecordMax), else it is a new record. mark says it ends at a command
// boundary. REQUIRES: mu held, or the segment not yet listed.
func (s *segment) add(b []byte, sum uint32, mark bool) {
	n := int64(len(b))
	if k := len(s.ends); k > 0 && s.ends[k-1]-s.recordStart(k-1) < mergeBelow && s.ends[k-1]-s.recordStart(k-1)+n <= RecordMax {
		s.ends[k-1] += n
		s.crcs[k-1] = crc32.Update(s.crcs[k-1], castagnoli, b)
	} else {
		s.ends = append(s.ends, s.size()+n)
		s.crcs = append(s.crcs, sum)
	}
	s.entries++
	if mark {
		s.mark.pos, s.mark.rec, s.mark.crc, s.mark.entries = s.size(), len(s.ends)-1, s.crcs[len(s.crcs)-1], s.entries
	}
}

// recordStart is where record j starts within the segment.
func (s *segment) recordStart(j int) int64 {
	if j == 0 {
		return 0
	}
	return s.ends[j-1]
}

// cutToMark drops what follows the last command boundary (all of it when
// there is none).
func (s *segment) cutToMark() {
	if s.mark.pos == 0 {
		s.ends, s.crcs, s.entries = s.ends[:0], s.crcs[:0], 0
		return
	}
	j := s.mark.rec
	s.ends, s.crcs = s.ends[:j+1], s.crcs[:j+1]
	s.ends[j], s.crcs[j], s.entries = s.mark.pos, s.mark.crc, s.mark.entries
}

// indexBytes is the memory the segment's index holds.
func (s *segment) indexBytes() int64 {
	return int64(unsafe.Sizeof(*s)) + int64(cap(s.ends))*8 + int64(cap(s.crcs))*4
}

func (s *segment) size() int64 {
	if len(s.ends) == 0 {
		return 0
	}
	return s.ends[len(s.ends)-1]
}

func segName(first int64, ext string) string { return fmt.Sprintf("%020d%s", first, ext) }

// meta is meta.json.
type meta struct {
	Version      int     `json:"version"`
	ReplID       string  `json:"replid"`
	ReplID2      string  `json:"replid2"`
	SecondOffset int64   `json:"second_offset"`
	Start        int64   `json:"start"`    // the stream starts after this offset
	Segments     []int64 `json:"segments"` // first offsets, oldest first
}

// Log is a replication stream on disk. See the package comment.
type Log struct {
	fsys     FS
	maxBytes int64
	segBytes int64

	// wmu serialises the writer's operations and guards seg, crc, err,
	// synced, lastSync and closed. mu is taken under it.
	wmu      sync.Mutex
	seg, crc File // the newest segment's files, open for appending
	err      error
	synced   int64 // the last offset a Sync made durable
	lastSync time.Time
	closed   bool
	entry    [entrySize]byte // scratch for one CRC entry, so that Append allocates nothing
	spare    bool            // spareName holds a retired segment file
	reused   bool            // the newest segment's file is a recycled one: cut it to size when sealed

	// mu guards the index; readers take it shared.
	mu    sync.RWMutex
	gen   uint64 // counts Resets: a reader's offsets belong to one generation
	id    Identity
	start int64
	segs  []*segment
	total int64 // bytes in segs
	// readers counts the readers with a segment's file open, by its first
	// offset: retention recycles only a file no reader has open, so that
	// what a reader verified is what sendfile sends.
	readers map[int64]int
}

// Open opens the log in opts.FS, recovering and verifying what it holds.
// A directory without a log gives an empty one with no identity.
func Open(opts Options) (*Log, Recovery, error) {
	seg := opts.SegmentBytes
	if seg == 0 {
		seg = min(max(opts.MaxBytes/8, minSegmentBytes), maxSegmentBytes)
	}
	l := &Log{fsys: opts.FS, maxBytes: opts.MaxBytes, segBytes: max(seg, minSegmentBytes), readers: map[int64]int{}}
	l.id = Identity{ReplID2: replid.None, SecondOffset: -1}
	rec, err := l.recover()
	if err != nil {
		l.closeFiles()
		return nil, rec, err
	}
	l.synced = l.endLocked()
	return l, rec, nil
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
		s.add(buf[:n], sum, field&boundaryFlag != 0)
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
		ours := name == metaTemp || name == spareName || isSegFile(name)
		if ours && !keep[name] {
			if err := removeIfExists(l.fsys, name); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
		}
	}
	return nil
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

// readMeta reads and checks meta.json.
func (l *Log) readMeta() (meta, error) {
	var m meta
	f, err := l.fsys.OpenFile(metaName, os.O_RDONLY, 0)
	if err != nil {
		return m, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return m, fmt.Errorf("read %s: %w", metaName, err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", metaName, err)
	}
	if m.Version != metaVersion {
		return m, fmt.Errorf("%s: version %d, want %d", metaName, m.Version, metaVersion)
	}
	if (m.ReplID != "" && !replid.Valid(m.ReplID)) || (m.ReplID2 != replid.None && !replid.Valid(m.ReplID2)) ||
		m.Start < 0 || m.Start > replid.MaxOffset || m.SecondOffset < -1 || m.SecondOffset > replid.MaxOffset {
		return m, fmt.Errorf("%s: identity or offsets out of range", metaName)
	}
	if (m.ReplID2 == replid.None) != (m.SecondOffset == -1) {
		return m, fmt.Errorf("%s: replid2 %q with second_offset %d", metaName, m.ReplID2, m.SecondOffset)
	}
	if m.ReplID == "" && len(m.Segments) > 0 {
		return m, fmt.Errorf("%s: segments without a replid", metaName)
	}
	// Every first offset in range and after the one before it: a segment's
	// end (first + size, checked as it is verified) then cannot overflow.
	prev := m.Start
	for _, first := range m.Segments {
		if first <= prev || first > replid.MaxOffset {
			return m, fmt.Errorf("%s: segment at offset %d out of range (after %d, at most %d)", metaName, first, prev, int64(replid.MaxOffset))
		}
		prev = first
	}
	return m, nil
}

// metaLocked is the metadata for the current index. REQUIRES: mu or wmu.
func (l *Log) metaLocked() meta {
	m := meta{
		Version: metaVersion, ReplID: l.id.ReplID, ReplID2: l.id.ReplID2,
		SecondOffset: l.id.SecondOffset, Start: l.start, Segments: []int64{},
	}
	for _, s := range l.segs {
		m.Segments = append(m.Segments, s.first)
	}
	return m
}

// writeMeta replaces meta.json atomically and durably.
func (l *Log) writeMeta(m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	f, err := l.fsys.OpenFile(metaTemp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", metaTemp, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", metaTemp, err)
	}
	if err := l.fsys.Rename(metaTemp, metaName); err != nil {
		return fmt.Errorf("replace %s: %w", metaName, err)
	}
	if err := l.fsys.SyncDir(); err != nil {
		return fmt.Errorf("sync the log directory: %w", err)
	}
	return nil
}

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
	l.seg, l.crc = seg, crc
	return nil
}

func (l *Log) closeFiles() {
	if l.seg != nil {
		l.seg.Close()
		l.crc.Close()
		l.seg, l.crc = nil, nil
	}
}

// Identity returns the replication identity the log's stream is under.
func (l *Log) Identity() Identity {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.id
}

// Bounds returns the first and last offsets the log holds; first is last+1
// when it holds none (last is then the offset its stream starts after).
func (l *Log) Bounds() (first, last int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.firstLocked(), l.endLocked()
}

// bounds is Bounds with the generation.
func (l *Log) bounds() (gen uint64, first, last int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.gen, l.firstLocked(), l.endLocked()
}

func (l *Log) firstLocked() int64 {
	if len(l.segs) == 0 {
		return l.start + 1
	}
	return l.segs[0].first
}

func (l *Log) endLocked() int64 {
	if n := len(l.segs); n > 0 {
		return l.segs[n-1].first + l.segs[n-1].size() - 1
	}
	return l.start
}

// Stats are the log's figures, for INFO.
type Stats struct {
	First, Last int64 // as Bounds
	Bytes       int64 // stream bytes held
	Segments    int
	IndexBytes  int64     // the memory the in-memory index holds
	Synced      int64     // the last offset made durable by Sync
	LastSync    time.Time // when; zero before the first
	Err         error     // the sticky error, if any
}

// Stats returns the log's figures.
func (l *Log) Stats() Stats {
	l.wmu.Lock()
	st := Stats{Synced: l.synced, LastSync: l.lastSync, Err: l.err}
	l.wmu.Unlock()
	l.mu.RLock()
	defer l.mu.RUnlock()
	st.First, st.Last, st.Bytes, st.Segments = l.firstLocked(), l.endLocked(), l.total, len(l.segs)
	st.IndexBytes = l.indexBytesLocked()
	return st
}

// IndexBytes returns the memory the in-memory index holds. It waits for no
// write or fsync, only for the index's lock.
func (l *Log) IndexBytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.indexBytesLocked()
}

// indexBytesLocked is IndexBytes. REQUIRES: mu.
func (l *Log) indexBytesLocked() int64 {
	n := int64(cap(l.segs)) * int64(unsafe.Sizeof(l.segs[0]))
	for _, s := range l.segs {
		n += s.indexBytes()
	}
	return n
}

// Err returns the sticky error, or nil.
func (l *Log) Err() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.err
}

// fail records err as the sticky error and returns it.
// REQUIRES: wmu held.
func (l *Log) fail(err error) error {
	if l.err == nil {
		l.err = err
	}
	return l.err
}

// Append adds p to the stream, as the bytes after the last one held.
// boundary says that p ends where a command ends (see Recovery.Unfinished).
func (l *Log) Append(p []byte, boundary bool) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	for len(p) > 0 {
		if l.seg == nil || l.curSize() >= l.segBytes {
			if err := l.roll(); err != nil {
				return l.fail(err)
			}
		}
		// A record never crosses the segment size, so segments are at most
		// SegmentBytes and retention keeps what it promises.
		n := min(len(p), RecordMax, int(l.segBytes-l.curSize()))
		if _, err := l.seg.Write(p[:n]); err != nil {
			return l.fail(fmt.Errorf("write the stream log: %w", err))
		}
		sum := crc32.Checksum(p[:n], castagnoli)
		mark := boundary && n == len(p)
		field := uint32(n)
		if mark {
			field |= boundaryFlag
		}
		e := l.entry[:]
		binary.LittleEndian.PutUint32(e, field)
		binary.LittleEndian.PutUint32(e[4:], sum)
		if _, err := l.crc.Write(e); err != nil {
			return l.fail(fmt.Errorf("write the stream log's checksums: %w", err))
		}
		l.mu.Lock()
		l.segs[len(l.segs)-1].add(p[:n], sum, mark)
		l.total += int64(n)
		l.mu.Unlock()
		p = p[n:]
	}
	return nil
}

func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return l.err
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
		l.closeFiles()
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
	l.seg, l.crc, l.reused = seg, crc, reused
	magic := crcMagic
	if reused {
		magic = crcMagicReused
	}
	if _, err := crc.Write([]byte(magic)); err != nil {
		return fmt.Errorf("write %s: %w", segName(first, crcExt), err)
	}
	if err := l.syncFiles(); err != nil {
		return err
	}
	l.mu.Lock()
	l.segs = append(l.segs, &segment{first: first})
	m := l.metaLocked()
	l.mu.Unlock()
	if err := l.writeMeta(m); err != nil {
		return err
	}
	return l.retain()
}

// createSegment opens a new segment file under name: the spare, renamed,
// when there is one, else a new file. REQUIRES: wmu held.
func (l *Log) createSegment(name string) (f File, reused bool, err error) {
	if l.spare {
		l.spare = false
		if err := l.fsys.Rename(spareName, name); err == nil {
			if f, err := l.fsys.OpenFile(name, os.O_RDWR, 0); err == nil {
				return f, true, nil
			}
		}
		// The spare is gone or unusable: a new file, as without one.
	}
	f, err = l.fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("create %s: %w", name, err)
	}
	return f, false, nil
}

// seal makes the newest segment's files durable before a new one starts
// or the log closes, first cutting a recycled file to what was written.
// REQUIRES: wmu held.
func (l *Log) seal() error {
	if l.reused {
		if err := l.seg.Truncate(l.curSize()); err != nil {
			return fmt.Errorf("cut the recycled segment to size: %w", err)
		}
		l.reused = false
	}
	return l.syncFiles()
}

// retain drops the oldest segments while the others hold MaxBytes. The
// first one dropped that no reader has open becomes the spare.
// REQUIRES: wmu held.
func (l *Log) retain() error {
	for {
		l.mu.Lock()
		if len(l.segs) < 2 || l.total-l.segs[0].size() < l.maxBytes {
			l.mu.Unlock()
			return nil
		}
		old := l.segs[0]
		l.segs = l.segs[1:]
		l.total -= old.size()
		m := l.metaLocked()
		// Decided under mu: a reader opens a file only while its segment
		// is listed, so none can open this one from here on.
		recycle := !l.spare && l.readers[old.first] == 0
		l.mu.Unlock()
		// Unlisted first: a crash in between leaves files recovery removes.
		if err := l.writeMeta(m); err != nil {
			return err
		}
		if recycle && l.fsys.Rename(segName(old.first, segExt), spareName) == nil {
			l.spare = true
		}
		for _, ext := range []string{segExt, crcExt} {
			if err := removeIfExists(l.fsys, segName(old.first, ext)); err != nil {
				return fmt.Errorf("remove %s: %w", segName(old.first, ext), err)
			}
		}
	}
}

// syncFiles syncs the newest segment's bytes, then its checksums.
// REQUIRES: wmu held.
func (l *Log) syncFiles() error {
	if err := l.seg.Sync(); err != nil {
		return fmt.Errorf("sync the stream log: %w", err)
	}
	if err := l.crc.Sync(); err != nil {
		return fmt.Errorf("sync the stream log's checksums: %w", err)
	}
	return nil
}

// Sync makes everything appended so far durable.
func (l *Log) Sync() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if l.seg != nil {
		if err := l.syncFiles(); err != nil {
			return l.fail(err)
		}
	}
	l.mu.RLock()
	l.synced = l.endLocked()
	l.mu.RUnlock()
	l.lastSync = time.Now()
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
	l.mu.Lock()
	old := l.segs
	l.id, l.start, l.segs, l.total = id, start, nil, 0
	l.gen++
	m := l.metaLocked()
	l.mu.Unlock()
	l.err = nil
	l.synced = start
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

// Close syncs and closes the log. Readers may go on reading.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed {
		return nil
	}
	var err error
	if l.seg != nil && l.err == nil {
		err = l.seal()
	}
	l.closeFiles()
	l.closed = true
	return err
}

// locate finds the record holding off in generation gen: its segment's
// first offset, the record's start and end within the segment, and its CRC.
func (l *Log) locate(gen uint64, off int64) (first, start, end int64, sum uint32, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if gen != l.gen || off < l.firstLocked() || off > l.endLocked() {
		return 0, 0, 0, 0, ErrNotHeld
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].first > off }) - 1
	s := l.segs[i]
	pos := off - s.first
	j := sort.Search(len(s.ends), func(j int) bool { return s.ends[j] > pos })
	if j > 0 {
		start = s.ends[j-1]
	}
	return s.first, start, s.ends[j], s.crcs[j], nil
}

// acquire counts a reader of generation gen opening the file of the segment
// starting at first, if the log still lists it; release undoes it.
func (l *Log) acquire(gen uint64, first int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.gen || !slices.ContainsFunc(l.segs, func(s *segment) bool { return s.first == first }) {
		return false
	}
	l.readers[first]++
	return true
}

func (l *Log) release(first int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers[first]--; l.readers[first] <= 0 {
		delete(l.readers, first)
	}
}

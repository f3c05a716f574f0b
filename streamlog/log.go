package streamlog

import (
	"errors"
	"hash/crc32"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/replproxy/replproxy/replid"
)

const (
	// RecordMax is the most stream bytes one record (one CRC) covers: what
	// a reader reads and verifies before it sends.
	RecordMax = 256 << 10
	// entrySize is a CRC file entry: length, CRC-32C.
	entrySize = 8
	// entryBatch is the most CRC entries the writer holds before writing
	// them at once (a call's records' entries go in one write at its end).
	entryBatch = 64
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
	// metaName is the metadata file. Its replacement is written under
	// metaTempPrefix + 16 random hex digits + metaTempSuffix
	// (internal/safefile), and earlier versions wrote it to metaTemp:
	// recovery removes any of them, a replacement that never happened.
	metaName       = "meta.json"
	metaTempPrefix = "meta.json."
	metaTempSuffix = ".tmp"
	metaTemp       = "meta.json.tmp"
	// segExt and crcExt name a segment's two files.
	segExt = ".seg"
	crcExt = ".crc"
	// metaVersion is the layout's version.
	metaVersion = 1
	// minSegmentBytes bounds how small SegmentBytes may make a segment.
	minSegmentBytes = 64 << 10
	// maxSegmentBytes is the default size of a segment, when MaxBytes allows.
	maxSegmentBytes = 64 << 20
	// maxSealed is how many sealed segments may wait for a Sync before
	// the writer syncs the oldest itself (Log.retire).
	maxSealed = 4
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

// Log is a replication stream on disk. See the package comment.
type Log struct {
	fsys     FS
	maxBytes int64
	segBytes int64

	// wmu serialises the operations that touch the files (Append, Reset,
	// SetIdentity, Close, and the start of a Sync), from whichever
	// goroutine, and guards seg, crc, closed and the fields below them. It
	// is held across writes and the fsync of a sealed segment no Sync took
	// (retire), not a Sync's (smu), so nothing that reports (Stats, Err)
	// takes it. smu, mu and status are taken under it.
	wmu      sync.Mutex
	seg, crc File       // the newest segment's files, open for appending
	vec      *vecWriter // writes seg's records by writev; nil: slice by slice
	closed   bool
	spare    bool      // spareName holds a retired segment file
	reused   bool      // the newest segment's file is a recycled one: cut it to size when sealed
	prealloc bool      // the newest segment's blocks were allocated ahead: cut it to size when sealed
	one      [1][]byte // Append's one slice, as AppendBuffers takes them
	rec      [][]byte  // scratch: one record's slices, cleared after each append
	// entries are the CRC entries of records whose bytes are written but
	// not yet they (writeEntries), at most entryBatch: made once, so that
	// appending allocates nothing.
	entries []byte

	// smu is held by a Sync across its fsync of the newest segment's files,
	// which it takes under wmu and fsyncs after releasing wmu, so that
	// appends go on meanwhile; closing those files (closeFiles, and retire
	// past maxSealed, under wmu) takes it, so no fsync runs on a closed
	// file. Taken under wmu, or alone; status is taken under it.
	smu sync.Mutex
	// sealed are the files of the segments sealed and not yet synced,
	// oldest first, at most maxSealed (retire): appended by the writer,
	// taken by a Sync (under smu) or by the writer past maxSealed. The
	// last lock but status: taken under wmu or smu, or alone, for no I/O.
	sealedMu    sync.Mutex
	sealed      []sealedFiles
	sealedReady chan struct{} // SealedReady's

	// status is the writer's figures: written under wmu once the I/O they
	// report is done, read by Stats and Err without wmu, so that INFO and
	// /metrics never wait behind a write or an fsync. The last lock
	// taken: nothing is taken under it, and no I/O is done holding it.
	status struct {
		sync.Mutex
		err      error     // the sticky error
		synced   int64     // the last offset a Sync made durable
		lastSync time.Time // when; zero before the first
	}

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
	l := &Log{fsys: opts.FS, maxBytes: opts.MaxBytes, segBytes: max(seg, minSegmentBytes), readers: map[int64]int{},
		entries: make([]byte, 0, entryBatch*entrySize), sealed: make([]sealedFiles, 0, maxSealed+1),
		sealedReady: make(chan struct{}, 1)}
	l.id = Identity{ReplID2: replid.None, SecondOffset: -1}
	rec, err := l.recover()
	if err != nil {
		l.closeFiles()
		return nil, rec, err
	}
	l.status.synced = l.endLocked() // recovery verified what it kept; not shared yet
	return l, rec, nil
}

// closeFiles closes the newest segment's files, and a sealed segment's
// still waiting for a Sync (unsynced: Close syncs them first, Reset drops
// them), once no Sync is fsyncing them. REQUIRES: wmu held (or the log not
// yet shared).
func (l *Log) closeFiles() {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.seg != nil {
		l.seg.Close()
		l.crc.Close()
		l.seg, l.crc, l.vec = nil, nil, nil
	}
	l.sealedMu.Lock()
	for _, f := range l.sealed {
		f.close()
	}
	clear(l.sealed)
	l.sealed = l.sealed[:0]
	l.sealedMu.Unlock()
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

// Close syncs and closes the log. Readers may go on reading.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.closed {
		return nil
	}
	var err error
	if l.stickyErr() == nil {
		// The sealed segments no Sync took first: the older bytes
		// durable before the newer.
		l.smu.Lock()
		_, err = l.syncSealed(nil)
		l.smu.Unlock()
		if err == nil && l.seg != nil {
			if err = l.seal(); err == nil {
				err = l.syncFiles()
			}
		}
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

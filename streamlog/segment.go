package streamlog

import (
	"fmt"
	"hash/crc32"
	"unsafe"
)

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

// add indexes a chunk of n bytes, whose CRC-32C is sum and whose bytes are
// the slices of b, after the segment's end: the last record takes it in
// while shorter than mergeBelow (and the two fit in RecordMax), else it is
// a new record. mark says it ends at a command boundary. REQUIRES: mu held,
// or the segment not yet listed.
func (s *segment) add(b [][]byte, n int64, sum uint32, mark bool) {
	if k := len(s.ends); k > 0 && s.ends[k-1]-s.recordStart(k-1) < mergeBelow && s.ends[k-1]-s.recordStart(k-1)+n <= RecordMax {
		s.ends[k-1] += n
		for _, p := range b {
			s.crcs[k-1] = crc32.Update(s.crcs[k-1], castagnoli, p)
		}
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

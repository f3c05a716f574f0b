package streamlog

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/replproxy/replproxy/internal/safefile"
	"github.com/replproxy/replproxy/replid"
)

// meta is meta.json.
type meta struct {
	Version      int     `json:"version"`
	ReplID       string  `json:"replid"`
	ReplID2      string  `json:"replid2"`
	SecondOffset int64   `json:"second_offset"`
	Start        int64   `json:"start"`    // the stream starts after this offset
	Segments     []int64 `json:"segments"` // first offsets, oldest first
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

// writeMeta replaces meta.json atomically and durably: a new file under a
// fresh temporary name, synced, renamed over it, the directory synced
// (safefile.WriteFile).
func (l *Log) writeMeta(m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return safefile.WriteFile(safeFS{l.fsys}, metaName, metaTempPrefix, metaTempSuffix, append(b, '\n'), nil)
}

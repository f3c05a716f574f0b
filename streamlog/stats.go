package streamlog

import (
	"time"
	"unsafe"
)

// Stats are the log's figures, for INFO.
type Stats struct {
	First, Last int64 // as Bounds
	Bytes       int64 // stream bytes held
	Segments    int
	IndexBytes  int64     // the memory the in-memory index holds
	Synced      int64     // the last offset made durable by Sync
	LastSync    time.Time // when; zero before the first
	Err         error     // the sticky error, if any: a failed write or Sync, until Reset
}

// Stats returns the log's figures. It waits for no write or fsync in
// progress (only for the index's lock and status, neither held across I/O),
// so that INFO and /metrics never stall behind the disk; Synced and Err are
// those of the last operation that finished.
func (l *Log) Stats() Stats {
	l.status.Lock()
	st := Stats{Synced: l.status.synced, LastSync: l.status.lastSync, Err: l.status.err}
	l.status.Unlock()
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

// Err returns the sticky error, or nil: the first failed write or sync
// since Open or the last Reset. Like Stats, it waits for no I/O.
func (l *Log) Err() error { return l.stickyErr() }

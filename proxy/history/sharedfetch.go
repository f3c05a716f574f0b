package history

import (
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/snapfile"
	"github.com/replproxy/replproxy/replbuf"
)

// A Fetch is one snapshot taken from the primary over a side link
// (REPLCONF rdb-only 1, PSYNC ? -1) for replicas that need a full sync when
// no held snapshot is servable. Every replica waiting meanwhile shares it,
// and the proxy's fetch loop tries again while one waits.
type Fetch struct {
	ready chan struct{} // closed once sn is set (the +FULLRESYNC arrived) or err is (the fetch was given up)
	sn    *replbuf.Snapshot
	err   error

	// A fetch whose payload may go to dir as it arrives (package snapshots: the
	// stream log is on, or maxmemory under evict-snapshots, and its size is
	// not known to fit) is not followed in memory while it arrives: memory
	// keeps only a window of it, which no reader could follow. Its waiters
	// take the stream from just after it at once (the stream is pinned from
	// there while it arrives, invariant 7), send +FULLRESYNC and then
	// keepalive newlines until done, and then the payload: from the file in
	// dir (sendfile, as any snapshot on disk), or from memory when it stayed
	// there (small, or dir could not take it). All of them set by
	// FetchStarted under History.mu before ready is closed, and spilled and
	// doneErr by FetchEnded before done is closed; read after the channel.
	file    Payload        // where the payload goes; nil: followed in memory as it arrives
	done    chan struct{}  // with file: closed once the payload ended
	spilled *snapfile.File // with file, once done: the payload on disk; nil when it stayed in memory
	doneErr error          // with file, once done: why the payload failed, or nil
	// arriving: with file, the payload is still arriving, counted in
	// mem_snapshots (history.snapshotBytes); guarded by History.mu.
	arriving bool
	// gen: with file, the stream's generation at FetchStarted; a payload
	// that ends in another one (an upstream full sync meanwhile, which may
	// keep the replid) does not displace that sync's snapshot. Set under
	// History.mu.
	gen uint64

	reason FetchReason // why it was started; set at creation

	// pin, for a seed (BeginAt), holds the stream from just after the
	// snapshot until the fetch ends, so that however long the payload takes
	// the bytes it needs stay in memory (or the stream log) without a
	// replica waiting to pin them. Guarded by History.mu.
	pin *replbuf.Cursor

	// waiters counts the replicas whose plan joined this fetch and that are
	// still connected; guarded by History.mu. PlanFull counts a replica before
	// it is registered, so a fetch that fails at once still sees it.
	waiters int
}

// A FetchReason says why a snapshot fetch (a fork on the primary) was
// started. Each completed fetch is counted per reason in INFO's proxy
// section (snapshot_fetches_<reason>) and in
// replproxy_snapshot_fetches_by_reason_total{reason}; together they add up to
// snapshot_fetches.
type FetchReason int32

const (
	FetchReplicaNeeded FetchReason = iota // a replica needed a snapshot the proxy could not serve
	FetchRefresh                          // repl-snapshot-refresh: the log was about to stop covering the snapshot on disk
	FetchBackup                           // a backup (rdb-only) needed a snapshot fresher than backup-max-stream-since allows of the held one
	FetchFiltered                         // a replica asked for a filtered RDB (rdb-filter-only), which only the primary makes; never the history's
	FetchProxySync                        // the proxy's own sync: its first, or after its history was lost or cut, from the snapshot source (BeginAt)
	NumFetchReasons
)

// String returns the reason as INFO and the metrics name it.
func (r FetchReason) String() string {
	switch r {
	case FetchReplicaNeeded:
		return "replica_needed"
	case FetchRefresh:
		return "refresh"
	case FetchBackup:
		return "backup"
	case FetchFiltered:
		return "filtered"
	case FetchProxySync:
		return "proxy_sync"
	}
	return "unknown"
}

// NewSeed returns the fetch of a seed (reason FetchProxySync): a snapshot
// from the snapshot source for the proxy's own sync, which the history
// records once the primary continues its position (BeginAt) and which is
// then ended as any fetch (FetchStarted, FetchEnded, FetchGaveUp).
func NewSeed() *Fetch { return &Fetch{ready: make(chan struct{}), reason: FetchProxySync} }

// FetchCounts counts completed fetches per reason.
type FetchCounts [NumFetchReasons]atomic.Int64

// Ready is closed once the fetch started (Snapshot is set: the +FULLRESYNC
// arrived) or gave up (Err is set).
func (f *Fetch) Ready() <-chan struct{} { return f.ready }

// Err is why the fetch gave up before it started; read after Ready.
func (f *Fetch) Err() error { return f.err }

// Snapshot is the fetched snapshot; read after Ready.
func (f *Fetch) Snapshot() *replbuf.Snapshot { return f.sn }

// ToDisk reports whether the payload may go to dir as it arrives, so that
// its waiters wait for Done before they send it; read after Ready.
func (f *Fetch) ToDisk() bool { return f.file != nil }

// Done is closed, for a fetch whose payload may go to dir, once the payload
// ended; read after Ready.
func (f *Fetch) Done() <-chan struct{} { return f.done }

// DoneErr is why a payload that may go to dir failed, or nil; read after
// Done.
func (f *Fetch) DoneErr() error { return f.doneErr }

// Reason is why the fetch was started.
func (f *Fetch) Reason() FetchReason { return f.reason }

// A Payload is where an arriving payload goes when the proxy's payload rule
// sent it to dir; the history reads it under its lock once the payload
// ended.
type Payload interface {
	// Spilled is the record of the committed file, or nil for a payload
	// held in memory.
	Spilled() *snapfile.File
	// Evicted reports whether maxmemory sent it to dir (counted as an
	// evicted snapshot, as a spill is).
	Evicted() bool
}

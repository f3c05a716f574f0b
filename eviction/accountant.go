package eviction

import (
	"fmt"

	"github.com/replproxy/replproxy/replbuf"
)

// Figures are the proxy's memory at one moment, every value in bytes at the
// usable size of its allocations.
type Figures struct {
	// Stream is the shared stream's memory as replbuf counts it, Redis's
	// replication-buffer figures included. Its blocks filled and not yet
	// published are the upstream link's query buffer: a normal client.
	Stream replbuf.Usage
	// Replicas is the number of replicas connected, those still waiting for
	// a snapshot included (Redis's server.slaves): with any, the buffer
	// beyond repl-backlog-size is reported as theirs (replbuf.Usage.Split).
	Replicas int
	// Snapshots is the snapshots held in memory.
	Snapshots int64
	// SnapshotsOnDisk is the snapshots spilled to disk: reported, not in used_memory.
	SnapshotsOnDisk int64
	// FreeBlocks is the blocks kept for reuse, with the free list itself.
	FreeBlocks int64
	// NormalClients is the query and reply buffers of admin clients.
	NormalClients int64
	// ReplicaClients is the query buffers of replicas (their output is the stream).
	ReplicaClients int64
	// Runtime is everything else the Go heap holds: the runtime's and the
	// proxy's own structures, measured as a baseline.
	Runtime int64
	// LogIndex is the stream log's in-memory index.
	LogIndex int64
	// LinkCompression is the encoders of the compressed links to
	// downstream proxies, one per link. Replica memory: not counted for
	// eviction, as replicas' output buffers are not.
	LinkCompression int64
}

// Report is the accounting of Figures with Redis 7's names (INFO memory).
type Report struct {
	UsedMemory              int64 // used_memory
	NotCountedForEvict      int64 // mem_not_counted_for_evict
	ReplicationBacklog      int64 // mem_replication_backlog
	ClientsSlaves           int64 // mem_clients_slaves
	ClientsNormal           int64 // mem_clients_normal
	TotalReplicationBuffers int64 // mem_total_replication_buffers
	Snapshots               int64 // mem_snapshots (replproxy)
	SnapshotsOnDisk         int64 // mem_snapshots_on_disk (replproxy; not in used_memory)
	FreeBlocks              int64 // mem_free_blocks (replproxy)
	Runtime                 int64 // mem_runtime (replproxy)
	LogIndex                int64 // mem_repl_log_index (replproxy)
	LinkCompression         int64 // mem_link_compression (replproxy)
	Counted                 int64 // used_memory - mem_not_counted_for_evict
}

// Account adds up the categories. The replication buffer figures are
// replbuf's (Redis 7's formulas, src/object.c getMemoryOverheadData and
// src/evict.c freeMemoryGetNotCountedMemory): the backlog part is counted up
// to repl-backlog-size plus its blocks' overhead; whatever replicas pin beyond
// that is not, nor are the free blocks, nor the compressed links' encoders:
// like a replica's output buffer in Redis, they are the replicas' memory,
// which evicting cannot shrink, so counting them would let downstream
// proxies connecting evict snapshots (invariant 8).
func Account(f Figures) Report {
	u := f.Stream
	r := Report{
		TotalReplicationBuffers: u.Total,
		Snapshots:               f.Snapshots,
		SnapshotsOnDisk:         f.SnapshotsOnDisk,
		FreeBlocks:              f.FreeBlocks,
		Runtime:                 f.Runtime,
		LogIndex:                f.LogIndex,
		LinkCompression:         f.LinkCompression,
		ClientsNormal:           f.NormalClients + u.Unpublished,
	}
	r.UsedMemory = u.Allocated() + f.Snapshots + f.FreeBlocks +
		f.NormalClients + f.ReplicaClients + f.Runtime + f.LogIndex + f.LinkCompression
	r.ReplicationBacklog, r.ClientsSlaves = u.Split(f.Replicas > 0)
	r.ClientsSlaves += f.ReplicaClients
	r.NotCountedForEvict = u.NotCountedForEvict + f.FreeBlocks + f.LinkCompression
	r.Counted = r.UsedMemory - r.NotCountedForEvict
	return r
}

// Policy is maxmemory-policy.
type Policy string

const (
	// NoEviction never evicts: over maxmemory the proxy says so (INFO
	// mem_over_maxmemory, a rate-limited warning) and goes on serving, new
	// snapshots included.
	NoEviction Policy = "noeviction"
	// EvictSnapshots gives free blocks back, then evicts snapshots that no
	// replica is receiving (replaced ones before the newest, larger before
	// smaller; spilled to disk where the proxy can write, else dropped) until
	// counted memory is back under maxmemory.
	EvictSnapshots Policy = "evict-snapshots"
)

// A Candidate is a snapshot that might be evicted.
type Candidate struct {
	ID    string // how the proxy names it
	Bytes int64  // its memory
	Busy  bool   // a replica is receiving it: never evicted
	// Newest marks the snapshot the next full sync would be served from;
	// it goes last among the candidates.
	Newest bool
}

// ActionKind says what to do.
type ActionKind int

const (
	// DropFreeBlocks gives Bytes of free blocks back to the runtime.
	DropFreeBlocks ActionKind = iota
	// EvictSnapshot spills the snapshot ID to disk, or drops it.
	EvictSnapshot
)

func (k ActionKind) String() string {
	switch k {
	case DropFreeBlocks:
		return "drop-free-blocks"
	case EvictSnapshot:
		return "evict-snapshot"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// An Action is one step of an eviction plan.
type Action struct {
	Kind  ActionKind
	ID    string // the snapshot, for EvictSnapshot
	Bytes int64
}

// Plan decides what to evict to bring counted memory under maxmemory (0: no
// limit). It returns the actions in order and whether counted memory is
// still over the limit once they are done.
func Plan(rep Report, maxmemory int64, policy Policy, candidates []Candidate) (actions []Action, over bool) {
	if maxmemory <= 0 || rep.Counted <= maxmemory {
		return nil, false
	}
	if policy == NoEviction {
		return nil, true
	}
	need := rep.Counted - maxmemory
	// Free blocks first: they cost nothing to give back. They are not
	// counted, so dropping them frees memory without lowering the need.
	if rep.FreeBlocks > 0 {
		actions = append(actions, Action{Kind: DropFreeBlocks, Bytes: rep.FreeBlocks})
	}
	order := make([]Candidate, 0, len(candidates))
	for _, c := range candidates {
		if !c.Busy && c.Bytes > 0 {
			order = append(order, c)
		}
	}
	// Older snapshots before the newest, then larger before smaller.
	sortCandidates(order)
	for _, c := range order {
		if need <= 0 {
			break
		}
		actions = append(actions, Action{Kind: EvictSnapshot, ID: c.ID, Bytes: c.Bytes})
		need -= c.Bytes
	}
	return actions, need > 0
}

func sortCandidates(c []Candidate) {
	less := func(a, b Candidate) bool {
		if a.Newest != b.Newest {
			return !a.Newest
		}
		return a.Bytes > b.Bytes
	}
	for i := 1; i < len(c); i++ { // insertion sort: a handful of snapshots
		for j := i; j > 0 && less(c[j], c[j-1]); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

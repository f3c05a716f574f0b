package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The checkers' names, as violations and the report give them.
const (
	CheckConverge = "converge"  // every replica at the primary's DEBUG DIGEST within the bound
	CheckReplID   = "replid"    // every replica's replid in the primary's history
	CheckOffsets  = "offsets"   // no offset backwards within one replid
	CheckFullSync = "full-sync" // full syncs within the fault's expected cost
	CheckLogs     = "logs"      // no panic, no data race in a proxy's log
	CheckMemory   = "memory"    // a proxy's memory within its limits
	CheckBaseline = "baseline"  // a proxy's goroutines and descriptors back to their baseline after a heal
	CheckCert     = "cert"      // a rotated certificate served to new handshakes
)

// NodeState is what one node reported at one moment.
type NodeState struct {
	Name   string
	Digest string // DEBUG DIGEST; "" when not asked
	ReplID string // master_replid
	Offset int64  // master_repl_offset
	LinkUp bool   // master_link_status:up (a replica)
	// Epoch is the node's incarnation when the sample was asked for
	// ([OffsetTracker.Epoch]): a sample taken before a kill and recorded
	// after the restart's Forget is dropped, not compared.
	Epoch int
}

// Converged reports whether every replica has the primary's digest and its
// link up, and names those that do not.
func Converged(primaryDigest string, replicas []NodeState) (ok bool, behind []string) {
	for _, r := range replicas {
		if !r.LinkUp || r.Digest != primaryDigest {
			behind = append(behind, fmt.Sprintf("%s (digest %s, link up %v)", r.Name, r.Digest, r.LinkUp))
		}
	}
	return len(behind) == 0, behind
}

// AtOffset reports whether every replica's link is up and its offset has
// reached the primary's, end: the cheap precondition of comparing digests,
// which walk the whole keyspace. It names those not there yet.
func AtOffset(end int64, replicas []NodeState) (ok bool, behind []string) {
	for _, r := range replicas {
		if !r.LinkUp || r.Offset < end {
			behind = append(behind, fmt.Sprintf("%s (offset %d of the primary's %d, link up %v)", r.Name, r.Offset, end, r.LinkUp))
		}
	}
	return len(behind) == 0, behind
}

// CheckReplIDs returns a violation for each node whose replid is neither the
// primary's replid nor its replid2: a node on a history the primary does not
// share.
func CheckReplIDs(at time.Time, replid, replid2 string, nodes []NodeState) []Violation {
	var vs []Violation
	for _, n := range nodes {
		if n.ReplID != replid && n.ReplID != replid2 {
			vs = append(vs, Violation{At: at, Checker: CheckReplID,
				Detail: fmt.Sprintf("%s has replid %s; the primary has %s and %s", n.Name, n.ReplID, replid, replid2)})
		}
	}
	return vs
}

// OffsetTracker keeps each node's last offset per replid and reports an
// offset that went backwards. A node killed and restarted is a new
// incarnation, which [OffsetTracker.Forget] starts afresh: a restarted
// redis-server has lost its data by design. It is safe for concurrent use.
type OffsetTracker struct {
	mu     sync.Mutex
	last   map[string]map[string]int64 // node → replid → highest offset seen; guarded by mu
	epochs map[string]int              // node → incarnation, bumped by Forget; guarded by mu
}

// Epoch returns node's incarnation, for the sample about to be taken.
func (o *OffsetTracker) Epoch(node string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epochs[node]
}

// Observe records a sample and returns a violation if the offset is below
// one seen earlier for the same node and replid.
func (o *OffsetTracker) Observe(at time.Time, s NodeState) *Violation {
	if s.ReplID == "" {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s.Epoch != o.epochs[s.Name] {
		return nil // taken from an incarnation since forgotten
	}
	if o.last == nil {
		o.last = map[string]map[string]int64{}
	}
	byID := o.last[s.Name]
	if byID == nil {
		byID = map[string]int64{}
		o.last[s.Name] = byID
	}
	prev, seen := byID[s.ReplID]
	if seen && s.Offset < prev {
		return &Violation{At: at, Checker: CheckOffsets,
			Detail: fmt.Sprintf("%s went back from offset %d to %d on replid %s", s.Name, prev, s.Offset, s.ReplID)}
	}
	if !seen || s.Offset > prev {
		byID[s.ReplID] = s.Offset
	}
	return nil
}

// Forget starts node's record afresh (a new incarnation).
func (o *OffsetTracker) Forget(node string) {
	o.mu.Lock()
	delete(o.last, node)
	if o.epochs == nil {
		o.epochs = map[string]int{}
	}
	o.epochs[node]++
	o.mu.Unlock()
}

// SyncDelta is the increase of a node's sync_full across a fault: after
// minus before, or after alone when the counter went down (the node
// restarted, and its counter with it).
func SyncDelta(before, after int64) int64 {
	if after < before {
		return after
	}
	return after - before
}

// CheckCost returns a violation for each tier whose full syncs exceed the
// fault's expected cost.
func CheckCost(at time.Time, f Fault, want, got Cost) []Violation {
	var vs []Violation
	if got.Primary > want.Primary {
		vs = append(vs, Violation{At: at, Checker: CheckFullSync,
			Detail: fmt.Sprintf("%s: %d full syncs at the primary, expected at most %d", f.Name(), got.Primary, want.Primary)})
	}
	if got.Proxies > want.Proxies {
		vs = append(vs, Violation{At: at, Checker: CheckFullSync,
			Detail: fmt.Sprintf("%s: %d full syncs behind the proxies, expected at most %d", f.Name(), got.Proxies, want.Proxies)})
	}
	return vs
}

func orWAN(target string) string {
	if target == "" {
		return "the WAN"
	}
	return target
}

// logMarks are what a Go program writes to its stderr or log when it
// panics, dies of a runtime error, or (built with -race) races.
var logMarks = [][]byte{[]byte("panic: "), []byte("fatal error: "), []byte("WARNING: DATA RACE")}

// ScanLog returns a violation for each line of a proxy's log that shows a
// panic, a fatal runtime error or a data race.
func ScanLog(at time.Time, name string, log []byte) []Violation {
	var vs []Violation
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if slices.ContainsFunc(logMarks, func(m []byte) bool { return bytes.Contains(sc.Bytes(), m) }) {
			vs = append(vs, Violation{At: at, Checker: CheckLogs,
				Detail: fmt.Sprintf("%s line %d: %s", name, line, bytes.TrimSpace(sc.Bytes()))})
		}
	}
	return vs
}

// Memory is what a proxy reported of its memory at one moment.
type Memory struct {
	Name       string
	Used       int64 // used_memory
	NotCounted int64 // mem_not_counted_for_evict: held for replicas, never evicted
	MaxMemory  int64 // maxmemory; 0 is no limit
	// Bound is the most used_memory the proxy's limits allow: maxmemory
	// plus what is never counted for eviction at its most (the stream
	// log's window, the memory backlog, each replica's output buffer hard
	// limit). 0 is no bound.
	Bound int64
}

// MemoryTracker reports a proxy whose memory stays over its limits for
// longer than a moment: maxmemory is enforced by the proxy's monitor, on a
// tick, so a single sample over it is the moment before an eviction, and
// only a run of overLimitSamples samples is a violation. It is safe for
// concurrent use.
type MemoryTracker struct {
	mu   sync.Mutex
	over map[string]int // node → consecutive samples over a limit; guarded by mu
}

// overLimitSamples is how many samples in a row (one a second) a proxy may
// be over a limit before it is a violation.
const overLimitSamples = 3

// Observe records a sample and returns a violation when m is the
// overLimitSamples-th sample in a row over one of its limits.
func (mt *MemoryTracker) Observe(at time.Time, m Memory) *Violation {
	var why string
	switch counted := m.Used - m.NotCounted; {
	case m.MaxMemory > 0 && counted > m.MaxMemory:
		why = fmt.Sprintf("%d bytes counted for eviction, over maxmemory %d", counted, m.MaxMemory)
	case m.Bound > 0 && m.Used > m.Bound:
		why = fmt.Sprintf("used_memory %d, over the %d its limits allow", m.Used, m.Bound)
	}
	mt.mu.Lock()
	defer mt.mu.Unlock()
	if mt.over == nil {
		mt.over = map[string]int{}
	}
	if why == "" {
		delete(mt.over, m.Name)
		return nil
	}
	mt.over[m.Name]++
	if mt.over[m.Name] != overLimitSamples {
		return nil
	}
	return &Violation{At: at, Checker: CheckMemory,
		Detail: fmt.Sprintf("%s for %d samples in a row: %s", m.Name, overLimitSamples, why)}
}

// Resources are a proxy's goroutines and open descriptors at one moment
// (its /metrics: go_goroutines, process_open_fds).
type Resources struct {
	Goroutines, FDs int
}

// Within reports whether r is back to base, give or take slack: what a
// healed deployment runs is what it ran before the fault, so a proxy
// holding more is holding what the fault left behind.
func (r Resources) Within(base, slack Resources) bool {
	return r.Goroutines <= base.Goroutines+slack.Goroutines && r.FDs <= base.FDs+slack.FDs
}

// CheckBaselineOf returns a violation when got is not back within slack of
// the proxy's baseline after a heal.
func CheckBaselineOf(at time.Time, name string, base, got, slack Resources) *Violation {
	if got.Within(base, slack) {
		return nil
	}
	return &Violation{At: at, Checker: CheckBaseline,
		Detail: fmt.Sprintf("%s holds %d goroutines and %d descriptors after the heal; its baseline is %d and %d (slack %d and %d)",
			name, got.Goroutines, got.FDs, base.Goroutines, base.FDs, slack.Goroutines, slack.FDs)}
}

// CheckServedCert returns a violation when a new handshake with a proxy
// whose certificate was rotated got another certificate than the new one
// (both by serial number, as decimal text).
func CheckServedCert(at time.Time, name, want, got string) *Violation {
	if got == want {
		return nil
	}
	return &Violation{At: at, Checker: CheckCert,
		Detail: fmt.Sprintf("%s served certificate serial %s after its rotation to serial %s", name, got, want)}
}

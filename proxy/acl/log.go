package acl

import (
	"slices"
	"sync"
	"time"

	"github.com/replproxy/replproxy/proxy/wire"
)

// Context is where a refused command ran, as ACL LOG names it.
type Context uint8

// The contexts of a refusal (Redis's ACL_LOG_CTX_*).
const (
	ContextToplevel Context = 0 // a command of its own
	ContextLua      Context = 1 // inside a script
	ContextMulti    Context = 2 // queued in MULTI, or AUTH inside MULTI
	ContextModule   Context = 3 // from a module
)

// String returns the context as ACL LOG shows it.
func (c Context) String() string {
	switch c {
	case ContextToplevel:
		return "toplevel"
	case ContextLua:
		return "lua"
	case ContextMulti:
		return "multi"
	case ContextModule:
		return "module"
	}
	return "unknown"
}

// DefaultLogMaxLen is Redis's acllog-max-len default.
const DefaultLogMaxLen = 128

// logGroupWindow is how close in time two like refusals must be for ACL
// LOG to count them in one entry.
const logGroupWindow = 60 * time.Second

// logScan is how many of the newest entries a new refusal is compared with.
const logScan = 10

// Event is one refusal for the ACL LOG, as the server reports it.
type Event struct {
	Reason  Reason
	Context Context
	// Object is what was refused: the command's full name ([Denied.Object])
	// for ReasonCommand, the key or channel for ReasonKey and
	// ReasonChannel, the command as the client typed it ("AUTH", "hello")
	// for ReasonAuth.
	Object string
	// Username is the client's user, or for ReasonAuth the user name
	// AUTH or HELLO tried.
	Username string
	// ClientInfo is the client's CLIENT LIST line (without its newline), as
	// Redis records it at the refusal.
	ClientInfo string
}

// logEntry is one entry of the log: an Event, how many times it happened,
// and when it last did.
type logEntry struct {
	Event
	count int64
	last  time.Time
}

// Log is the ACL LOG: the most recent refusals, newest first, like ones
// within a minute of each other counted in one entry, at most a maximum
// number of entries (acllog-max-len). It is safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	entries []*logEntry // guarded by mu; newest first
	maxLen  int         // guarded by mu
}

// NewLog returns an empty log keeping at most maxLen entries.
func NewLog(maxLen int) *Log { return &Log{maxLen: maxLen} }

// SetMaxLen sets acllog-max-len. As in Redis, a shorter log is trimmed at
// the next new entry, not at once.
func (l *Log) SetMaxLen(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxLen = n
}

// Add records a refusal at time now. When one of the 10 newest entries has
// the same reason, context, object and user, and was updated within a
// minute of now, that entry counts it, takes e's client info and time, and
// becomes the newest; otherwise e is a new entry, and the oldest ones go
// beyond the maximum length.
func (l *Log) Add(e Event, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, old := range l.entries[:min(logScan, len(l.entries))] {
		delta := now.UnixMilli() - old.last.UnixMilli()
		if delta < 0 {
			delta = -delta
		}
		if old.Reason != e.Reason || old.Context != e.Context || delta > logGroupWindow.Milliseconds() ||
			old.Object != e.Object || old.Username != e.Username {
			continue
		}
		old.count++
		old.ClientInfo, old.last = e.ClientInfo, now
		copy(l.entries[1:i+1], l.entries[:i])
		l.entries[0] = old
		return
	}
	l.entries = slices.Insert(l.entries, 0, &logEntry{Event: e, count: 1, last: now})
	for len(l.entries) > max(l.maxLen, 0) {
		l.entries[len(l.entries)-1] = nil
		l.entries = l.entries[:len(l.entries)-1]
	}
}

// Reset empties the log (ACL LOG RESET).
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

// Len returns the number of entries.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

// Command is ACL LOG [count | RESET] (args: what follows LOG), at time now:
// the newest count entries (10 when absent; a negative count is 0), each
// a map of count, reason, context, object, username, age-seconds (a
// double: seconds since the entry's last refusal, to the millisecond) and
// client-info; or OK after RESET; or Redis's error for a count that is not
// an integer.
func (l *Log) Command(args [][]byte, now time.Time) Value {
	count := int64(10)
	if len(args) > 0 {
		if wire.EqualFold(wire.CString(string(args[0])), "reset") {
			l.Reset()
			return okValue
		}
		n, ok := parseInt64(string(args[0]))
		if !ok {
			return errorValue(errNotInteger)
		}
		count = max(n, 0)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(count, int64(len(l.entries)))
	v := Value{Kind: KindArray, Elems: make([]Value, n)}
	for i, e := range l.entries[:n] {
		age := float64(now.UnixMilli()-e.last.UnixMilli()) / 1000
		v.Elems[i] = Value{Kind: KindMap, Elems: []Value{
			bulk("count"), integer(e.count),
			bulk("reason"), bulk(e.Reason.String()),
			bulk("context"), bulk(e.Context.String()),
			bulk("object"), bulk(e.Object),
			bulk("username"), bulk(e.Username),
			bulk("age-seconds"), {Kind: KindDouble, Double: age},
			bulk("client-info"), bulk(e.ClientInfo),
		}}
	}
	return v
}

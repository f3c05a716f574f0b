package downstream

import (
	"sync/atomic"
	"time"
)

// Settings are the directives in force that a replica reads as it goes.
type Settings struct {
	// ReplTimeout is repl-timeout: a write's deadline, read when the
	// write loop starts.
	ReplTimeout time.Duration
	// SyncRateLimit is repl-link-sync-rate-limit in bytes per second (0:
	// unlimited): the pace of a full-sync payload to a downstream proxy
	// (ratelimit.go), read as the payload goes.
	SyncRateLimit int64
	// MemoryWindow is how far behind the stream's end a replica may be and
	// still be sent from memory while the stream log runs.
	MemoryWindow int64
	// LinkCoalesce is repl-link-compression-coalesce-usec: how long a
	// compressed link's chunk of live stream under linkChunkMin may wait
	// for more before it goes (writer.flushStream), read as each chunk
	// starts; 0: it goes as soon as the stream has no more.
	LinkCoalesce time.Duration
}

// LiveSettings holds the Settings in force for every replica: the server
// stores a new value after each change of its configuration, and the
// replicas' loops load it, so that no replica asks the server for a
// directive. Any goroutine.
type LiveSettings struct{ p atomic.Pointer[Settings] }

// Store puts s in force.
func (l *LiveSettings) Store(s Settings) { l.p.Store(&s) }

// Load returns the Settings in force; the zero Settings before the first
// Store.
func (l *LiveSettings) Load() Settings {
	if s := l.p.Load(); s != nil {
		return *s
	}
	return Settings{}
}

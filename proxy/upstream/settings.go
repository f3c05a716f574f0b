package upstream

import "time"

// Settings are the directives in force that the link reads as it goes. The
// server stores new ones after every change of its configuration
// (Configure), and Retargets the link when the primary or its credentials
// changed, so that the link never asks the server for a directive.
type Settings struct {
	// Target is the primary replicaof names (Addr "" for none), its
	// credentials and TLS material: read at every connection, the main
	// link's and every side link's.
	Target Target
	// ListeningPort is the port announced with REPLCONF listening-port.
	ListeningPort int
	// QueryLimit is master-query-buffer-limit: the most stream bytes the
	// main link may hold unpublished (0: no limit). Read at every read of
	// the stream, so that a change applies at once.
	QueryLimit int64
	// ReadCoalesce is repl-read-coalesce-usec: how long a fast stream may
	// gather in the primary's socket before the main link reads it (0:
	// never; see coalescer). Read before every wait of a plain TCP link.
	ReadCoalesce time.Duration
	// SnapshotSource is the source snapshot-from names, "" for the
	// primary: with one, the main link syncs a history its primary cannot
	// continue from the source (seed.go).
	SnapshotSource string
}

// Configure puts s in force: the next connection, read and wait use it.
// Any goroutine; before Run, the link has no primary.
func (l *Link) Configure(s Settings) { l.settings.Store(&s) }

// set returns the Settings in force (read-only): New stores empty ones, so
// that a link not yet configured has no primary.
func (l *Link) set() *Settings { return l.settings.Load() }

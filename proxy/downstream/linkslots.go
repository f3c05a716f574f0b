package downstream

import (
	"strconv"
	"sync/atomic"
)

// Compressed links to downstream proxies are capped
// (repl-link-compression-max-links): each holds an encoder of up to
// linkzstd.WriterMemory from its PSYNC to its end. A connection takes a
// slot when its REPLCONF link-compression zstd is agreed to, before it has
// an encoder, so that connections asking at once cannot all pass the cap
// before any of them streams, and gives it back at its end, or when it
// says link-compression no.

// LinkSlots counts the connections whose handshake agreed to compress their
// link: one slot each. Safe for concurrent use (an atomic): the clients'
// goroutines take and give back slots, INFO may read them.
type LinkSlots struct{ held atomic.Int64 }

// take holds one more slot unless max (0: no cap) are held already.
func (s *LinkSlots) take(max int64) bool {
	for {
		n := s.held.Load()
		if max > 0 && n >= max {
			return false
		}
		if s.held.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives one slot back.
func (s *LinkSlots) release() { s.held.Add(-1) }

// Held returns the slots held now: the connections agreed to compression
// and not yet ended.
func (s *LinkSlots) Held() int64 { return s.held.Load() }

// A CompressionPolicy is what REPLCONF link-compression zstd is agreed to
// under: the directives in force, and the proxy's slots.
type CompressionPolicy struct {
	Allow    bool       // repl-link-compression-allow
	MaxLinks int64      // repl-link-compression-max-links: 0 is no cap
	Slots    *LinkSlots // the proxy's; nil: no cap
}

// LinkCompressionCapped is the reply to REPLCONF link-compression zstd
// when max links are compressed already: the link stays plain.
func LinkCompressionCapped(max int64) string {
	return "ERR link-compression refused: repl-link-compression-max-links (" + strconv.FormatInt(max, 10) + ") reached"
}

// EndCompression gives back the slot h holds, if its handshake agreed to
// compression under slots: the connection has ended. Called once, by the
// goroutine that owns h.
func (h *Handshake) EndCompression(slots *LinkSlots) {
	if h.Compression == "zstd" && slots != nil {
		slots.release()
	}
	h.Compression = ""
}

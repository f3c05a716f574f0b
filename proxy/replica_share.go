package proxy

import (
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
)

// replicaShare is what every replica shares: the inline fan-out the link's
// goroutine writes through (a leaf lock), the slots of compressed links (an
// atomic) each client's goroutine takes at REPLCONF and gives back at its
// end, and the directives in force they read (stored by applyConfig after
// every change, and by New).
type replicaShare struct {
	fanout    downstream.Fanout
	linkSlots downstream.LinkSlots
	settings  downstream.LiveSettings
}

// replicaSettings are the directives of cfg a replica reads as it goes.
func replicaSettings(cfg *config.Config) downstream.Settings {
	return downstream.Settings{ReplTimeout: cfg.ReplTimeout, SyncRateLimit: cfg.ReplLinkSyncRateLimit,
		MemoryWindow: memoryWindow(cfg), LinkCoalesce: cfg.ReplLinkCompressionCoalesce}
}

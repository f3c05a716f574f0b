package downstream

import (
	"context"
	"sync/atomic"

	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/replbuf"
)

// Snapshots is the snapshot work as a replica uses it: planning a full sync
// (which may start the one snapshot fetch), being told how a full sync
// ended, and a filtered RDB from the primary. *snapshots.Keeper satisfies
// it; the replica reaches it without the server in between.
type Snapshots interface {
	// PlanFull plans a replica's full sync (snapshots.Keeper.PlanFull).
	PlanFull() (history.Plan, error)
	// PlanBackup plans a backup's (REPLCONF rdb-only 1): a held snapshot
	// within maxSince bytes of the stream's end, else a fresh fetch.
	PlanBackup(maxSince int64) (history.Plan, error)
	// FullSyncEnded is told when a full sync completed (ok) or failed
	// for a cause of its own (a failure holds back the next fetch).
	FullSyncEnded(ok bool)
	// FetchFiltered gets from the primary, over a side link, the RDB it
	// makes under REPLCONF rdb-filter-only filter: a snapshot of its own,
	// complete and checked, which the caller releases. The primary's own
	// refusal is an error errors.As finds as a *wire.RefusedError.
	FetchFiltered(ctx context.Context, filter string) (*replbuf.Snapshot, error)
}

// PrimaryLink is the upstream link as a new replica's plan asks it: whether
// it is up. *upstream.Link satisfies it.
type PrimaryLink interface {
	Connected() bool
}

// SyncRequest is what a client's PSYNC or SYNC asks for.
type SyncRequest struct {
	ReplID string // "?" for none (SYNC, PSYNC ? -1)
	Offset int64
	Legacy bool // SYNC
	// BackupMaxStreamSince is backup-max-stream-since in force: how far
	// behind the stream's end a held snapshot may be for a backup.
	BackupMaxStreamSince int64
}

// SyncCounters are the server's counters of the syncs it planned (INFO's
// sync_full, sync_partial_ok, sync_partial_err, and the proxy section's).
type SyncCounters struct {
	Full       *atomic.Int64
	PartialOK  *atomic.Int64
	PartialErr *atomic.Int64
	FromLog    *atomic.Int64           // partial resyncs that start from the stream log
	ByReason   *history.FullSyncCounts // full syncs by reason
}

// NoMasterLink is Redis's refusal of a sync while the link to the primary
// is down.
const NoMasterLink = "NOMASTERLINK Can't SYNC while not connected with my master"

// Accept plans the sync req asks for and makes the replica that serves it
// (New): a partial resync from memory or the stream log when the replid
// and offset allow, even with the link to the primary down; else a full
// sync, planned by the snapshot work (cfg.Snapshots), which a link that is
// down refuses. The plan is counted in cfg.Counters.Syncs and logged, by
// cfg.Log naming the replica's address. A
// refusal makes no replica: refused is the error line the client is sent,
// without its "-" and CRLF. cfg.Plan is ignored.
func Accept(cfg Config, req SyncRequest) (r *Replica, refused string) {
	hs := &cfg.Handshake
	if hs.Filtered && !hs.CapaEOF {
		// Redis's rule: it makes a filtered RDB for a socket only; it
		// checks the link first.
		if !cfg.Link.Connected() {
			return nil, NoMasterLink
		}
		return nil, "ERR Filtered replica requires EOF capability"
	}
	plan, reason := cfg.Hist.PlanPartial(req.ReplID, req.Offset, req.Legacy)
	sc := cfg.Counters.Syncs
	if reason != history.PartialAccepted {
		if !cfg.Link.Connected() {
			return nil, NoMasterLink
		}
		var err error
		switch {
		case hs.Filtered:
			// No held snapshot is filtered: the writer gets one from the
			// primary (writer.filtered).
			plan = cfg.Hist.PlanFiltered()
		case hs.RDBOnly && hs.CapaSource:
			// A peer proxy seeding from this one (snapshot-from): any
			// snapshot this history serves, however far behind its
			// stream's end, as a replica's full sync would get; its
			// position is the peer's to check against the primary.
			plan, err = cfg.Snapshots.PlanFull()
		case hs.RDBOnly:
			plan, err = cfg.Snapshots.PlanBackup(req.BackupMaxStreamSince)
		default:
			plan, err = cfg.Snapshots.PlanFull()
		}
		if err != nil {
			return nil, "ERR " + err.Error()
		}
		add(sc.Full)
		if sc.ByReason != nil {
			sc.ByReason[reason].Add(1)
		}
		if !req.Legacy && req.ReplID != "?" {
			add(sc.PartialErr)
		}
	} else {
		add(sc.PartialOK)
		if plan.FromLog != nil {
			add(sc.FromLog)
		}
	}
	cfg.Plan = plan
	if cfg.Log != nil {
		// The replica's identity in logs is the one metrics label it by:
		// INFO's ip (ip-address, else the connection's) and its
		// listening-port, beside the connection's address the client's
		// logger already names.
		cfg.Log = cfg.Log.With("replica-address", hs.Address(cfg.Addr))
	}
	r = New(cfg)
	if plan.Partial {
		r.log.Info("partial resync accepted", "replid", plan.ReplID, "offset", req.Offset,
			"backlog-bytes", cfg.Hist.Stream().Offset()+1-req.Offset, "from-log", plan.FromLog != nil)
	} else {
		r.log.Info("full sync", "reason", reason.String(), "replid", plan.ReplID, "offset", plan.Offset,
			"fetching", plan.Fetch != nil, "asked-replid", req.ReplID)
	}
	return r, ""
}

func add(c *atomic.Int64) {
	if c != nil {
		c.Add(1)
	}
}

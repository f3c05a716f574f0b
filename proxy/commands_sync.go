package proxy

import (
	"context"
	"time"

	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/proxy/wire"
)

// cmdReplconf is REPLCONF before PSYNC: its options go into the client's
// handshake (downstream.Handshake reads them), and only ACK and GETACK are
// not answered. A replica's own REPLCONFs never come here: its read loop
// reads them. link-compression is agreed to under
// repl-link-compression-allow and repl-link-compression-max-links as they
// are now; past the cap it is refused (the link stays plain, as a refusal
// by repl-link-compression-allow no leaves it) and logged, at most once a
// second. The slot an agreement takes is the client's until its end
// (serveClient).
func (s *Server) cmdReplconf(c *client, args [][]byte) bool {
	cfg := s.config()
	pol := downstream.CompressionPolicy{Allow: cfg.ReplLinkCompressionAllow, MaxLinks: cfg.ReplLinkCompressionMaxLinks, Slots: &s.linkSlots}
	answer, errReply, capped := c.hs.ReplconfAllowing(args, pol)
	if capped {
		if ok, n := s.protect.linkLog.allow(time.Now(), logEvery); ok {
			c.log.Warn("compressed link refused: repl-link-compression-max-links reached; the link stays plain",
				"repl-link-compression-max-links", pol.MaxLinks, "suppressed", n)
		}
	}
	switch {
	case !answer:
	case errReply != "":
		c.out = wire.AppendError(c.out, errReply)
	default:
		c.out = wire.AppendSimple(c.out, "OK")
	}
	return false
}

// cmdPSync is PSYNC <replid> <offset>, checked in the order of Redis's
// syncCommand: FAILOVER (an argument after the offset that says so; any
// other is ignored, as Redis ignores it), then the link (an offset that is
// no integer can serve no partial resync, so a proxy whose link is down
// answers NOMASTERLINK first, as a Redis replica would), then the offset.
func (s *Server) cmdPSync(c *client, args [][]byte) bool {
	if c.replicaSet() {
		return false // already a replica: ignored without a reply, as in Redis
	}
	if len(args) > 3 && wire.EqualFold(args[3], "failover") {
		if string(args[1]) != s.hist.Identity().ReplID {
			c.out = wire.AppendError(c.out, "ERR PSYNC FAILOVER replid must match my replid.")
		} else {
			c.out = wire.AppendError(c.out, "ERR PSYNC FAILOVER is not supported by replproxy")
		}
		return false
	}
	off, ok := wire.ParseInt(args[2])
	if !ok {
		if s.up.State() != upstream.StateConnected {
			c.out = wire.AppendError(c.out, noMasterLink)
		} else {
			c.out = wire.AppendError(c.out, "ERR value is not an integer or out of range")
		}
		return false
	}
	s.beginSync(c, string(args[1]), off, false)
	return false
}

// noMasterLink is Redis's refusal of a sync while the link to the primary
// is down.
const noMasterLink = "NOMASTERLINK Can't SYNC while not connected with my master"

func (s *Server) cmdSync(c *client, _ [][]byte) bool {
	if c.replicaSet() {
		return false
	}
	s.beginSync(c, "?", -1, true)
	return false
}

// beginSync decides how a new replica is served: a partial resync from the
// backlog when its replid and offset allow (even with the upstream link
// down), else a full sync from a snapshot. It registers the replica; the
// client goroutine then runs it (runReplica).
func (s *Server) beginSync(c *client, replID string, off int64, legacy bool) {
	if err := c.flush(); err != nil {
		return
	}
	if c.hs.Filtered && !c.hs.CapaEOF {
		// Redis's rule: it makes a filtered RDB for a socket only; it
		// checks the link first.
		if s.up.State() != upstream.StateConnected {
			c.out = wire.AppendError(c.out, noMasterLink)
		} else {
			c.out = wire.AppendError(c.out, "ERR Filtered replica requires EOF capability")
		}
		return
	}
	plan, refused := s.hist.PlanPartial(replID, off, legacy)
	if refused != history.PartialAccepted {
		if s.up.State() != upstream.StateConnected {
			c.out = wire.AppendError(c.out, noMasterLink)
			return
		}
		var err error
		switch {
		case c.hs.Filtered:
			// No held snapshot is filtered: the replica's writer gets one
			// from the primary (downstream's writer.filtered).
			plan = s.hist.PlanFiltered()
		case c.hs.RDBOnly && c.hs.CapaSource:
			// A peer proxy seeding from this one (snapshot-from): any
			// snapshot this history serves, however far behind its
			// stream's end, as a replica's full sync would get; its
			// position is the peer's to check against the primary.
			plan, err = s.snaps.PlanFull()
		case c.hs.RDBOnly:
			plan, err = s.snaps.PlanBackup(s.config().BackupMaxStreamSince)
		default:
			plan, err = s.snaps.PlanFull()
		}
		if err != nil {
			c.out = wire.AppendError(c.out, "ERR "+err.Error())
			return
		}
		s.stats.SyncFull.Add(1)
		s.stats.FullSyncs[refused].Add(1)
		if !legacy && replID != "?" {
			s.stats.SyncPartialErr.Add(1)
		}
	} else {
		s.stats.SyncPartialOK.Add(1)
		if plan.FromLog != nil {
			s.stats.LogPartialSyncs.Add(1)
		}
	}
	// The replica's identity in logs is the one metrics label it by: INFO's
	// ip (ip-address, else the connection's) and its listening-port, beside
	// the connection's address the client's logger already names.
	lg := c.log.With("replica-address", c.hs.Address(c.addr))
	r := downstream.New(downstream.Config{ID: c.id, Conn: c.conn, Reader: c.rd, Addr: c.addr,
		Handshake: c.hs, Legacy: legacy, Plan: plan, Hist: s.hist, Counters: s.replicaCounters(), Log: lg,
		Fanout: &s.fanout, Host: &replicaHost{s: s, c: c, replconf: s.commands.byName["replconf"].name}})
	c.asReplica.Store(r)
	s.clients.addReplica(r)
	if plan.Partial {
		lg.Info("partial resync accepted", "replid", plan.ReplID, "offset", off,
			"backlog-bytes", s.hist.Stream().Offset()+1-off, "from-log", plan.FromLog != nil)
	} else {
		lg.Info("full sync", "reason", refused.String(), "replid", plan.ReplID, "offset", plan.Offset, "fetching", plan.Fetch != nil, "asked-replid", replID)
	}
}

// runReplica serves a client that became a replica, on the client's
// goroutine, until the replica ends (downstream.Replica.Run).
func (s *Server) runReplica(ctx context.Context, c *client) {
	c.asReplica.Load().Run(ctx)
}

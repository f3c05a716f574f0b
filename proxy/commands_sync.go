package proxy

import (
	"context"
	"time"

	"github.com/replproxy/replproxy/proxy/downstream"
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
	pol := downstream.CompressionPolicy{Allow: cfg.ReplLinkCompressionAllow, MaxLinks: cfg.ReplLinkCompressionMaxLinks, Slots: &s.replicas.linkSlots}
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
			c.out = wire.AppendError(c.out, downstream.NoMasterLink)
		} else {
			c.out = wire.AppendError(c.out, "ERR value is not an integer or out of range")
		}
		return false
	}
	s.beginSync(c, string(args[1]), off, false)
	return false
}

func (s *Server) cmdSync(c *client, _ [][]byte) bool {
	if c.replicaSet() {
		return false
	}
	s.beginSync(c, "?", -1, true)
	return false
}

// beginSync hands the client to package downstream, which plans its sync
// (a partial resync from what the history holds, even with the upstream
// link down, else a full sync from a snapshot) and makes the replica that
// serves it; the replica is registered, and the client goroutine then runs
// it (runReplica). A refused sync is answered with the refusal, and the
// client stays a client.
func (s *Server) beginSync(c *client, replID string, off int64, legacy bool) {
	if err := c.flush(); err != nil {
		return
	}
	r, refused := downstream.Accept(downstream.Config{ID: c.id, Conn: c.conn, Reader: c.rd, Addr: c.addr,
		Handshake: c.hs, Legacy: legacy, Hist: s.hist, Snapshots: s.snaps, Link: s.up, Settings: &s.replicas.settings,
		Counters: s.replicaCounters(), Log: c.log, Fanout: &s.replicas.fanout,
		Host: &replicaHost{s: s, c: c, replconf: s.commands.byName["replconf"].name}},
		downstream.SyncRequest{ReplID: replID, Offset: off, Legacy: legacy, BackupMaxStreamSince: s.config().BackupMaxStreamSince})
	if refused != "" {
		c.out = wire.AppendError(c.out, refused)
		return
	}
	c.asReplica.Store(r)
	s.clients.addReplica(r)
}

// runReplica serves a client that became a replica, on the client's
// goroutine, until the replica ends (downstream.Replica.Run).
func (s *Server) runReplica(ctx context.Context, c *client) {
	c.asReplica.Load().Run(ctx)
}

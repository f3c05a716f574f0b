package proxy

import (
	"net"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/sysmem"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
)

// newUpstream builds the server's link to its primary (package upstream),
// which reaches the rest of the server through upstreamHost, and the
// snapshot work directly (newSnapshots hands it the Keeper).
func newUpstream(s *Server) *upstream.Link {
	st := &s.stats
	return upstream.New(upstreamHost{s}, upstream.Options{
		Pool: s.pool,
		Log:  s.log.Named("upstream"),
		Counters: upstream.Counters{
			Connects:       &st.UpstreamConnects,
			FullSyncs:      &st.UpstreamFullSyncs,
			PartialSyncs:   &st.UpstreamPartialSyncs,
			LinkFailures:   &st.UpstreamLinkFailures,
			RDBBytes:       &st.UpstreamRDBBytes,
			ChecksumFails:  &st.UpstreamChecksumFails,
			RDBCheckFails:  &st.UpstreamRDBCheckFails,
			StreamErrors:   &st.UpstreamStreamErrors,
			QueryLimits:    &st.UpstreamQueryLimits,
			ReplInputBytes: &st.ReplInputBytes,
			FetchBytes:     &st.SnapshotFetchBytes,
			LinkCorrupt:    &st.UpstreamLinkCorrupt,
		},
	})
}

// upstreamHost is the server as the upstream link sees it (upstream.Host):
// the history, and the replicas a change of the history's identity
// disconnects. The directives in force the link is given (upstreamSettings). It holds no lock of its own; each
// method takes what the part it calls takes.
type upstreamHost struct{ s *Server }

func (h upstreamHost) Stream() *replbuf.Stream { return h.s.hist.Stream() }

func (h upstreamHost) ResumeID() (string, bool) {
	id := h.s.hist.Identity()
	return id.ReplID, id.History
}

// Install makes sn the newest snapshot and starts a new generation of the
// stream at its offset: the primary's bytes from offset+1 on. The replicas
// of the old generation are disconnected after the change.
func (h upstreamHost) Install(sn *replbuf.Snapshot) { h.s.closeReplicasBefore(h.s.hist.Install(sn)) }

// ContinueAs records the replid of a +CONTINUE; when it is new, the replicas
// of the old one are disconnected, to continue through replid2 after they
// reconnect (PROTOCOL §5).
func (h upstreamHost) ContinueAs(newID string) (oldID string, secondOffset int64, changed bool) {
	oldID, secondOffset, c := h.s.hist.ContinueAs(newID)
	h.s.closeReplicasBefore(c)
	return oldID, secondOffset, c.Kind != history.NoChange
}

// AckOffset applies the ack-policy (ackOffset, below).
func (h upstreamHost) AckOffset(applied int64) upstream.Ack { return h.s.ackOffset(applied) }

// Published sends the new bytes to the caught-up replicas from the link's
// goroutine (downstream.Fanout), instead of waking their write loops, and
// tells the stream log's follower how far the stream has come, so that it
// wakes for a record's worth rather than for every publish.
func (h upstreamHost) Published() {
	h.s.replicas.fanout.Flush()
	if d := h.s.durable; d != nil {
		d.follow.Nudge(h.s.hist.Stream().Offset())
	}
	h.s.cron.wakeIfMoved()
}

// upstreamSettings are the directives of cfg the link reads (Link.Configure),
// with the TLS material in force and the port replicas of the proxy reach
// it on: tls-port under tls-replication when there is one, as Redis
// announces it. After the listeners of cfg are in place.
func (s *Server) upstreamSettings(cfg *config.Config) upstream.Settings {
	t := upstream.Target{User: cfg.MasterUser, Pass: cfg.MasterAuth, Timeout: cfg.ReplTimeout,
		Compress: cfg.ReplLinkCompression == config.LinkCompressionZstd, BindSource: cfg.BindSourceAddr}
	if st := s.tlsNow(); cfg.TLSReplication && st != nil {
		t.TLS = st.Client // the material in force at this dial
	}
	if cfg.MasterHost != "" {
		t.Addr = net.JoinHostPort(cfg.MasterHost, strconv.Itoa(cfg.MasterPort))
	}
	port := s.Port()
	if a := s.TLSAddr(); a != nil && (cfg.TLSReplication || cfg.Port == 0) {
		port = a.(*net.TCPAddr).Port
	}
	return upstream.Settings{Target: t, ListeningPort: port, QueryLimit: cfg.MasterQueryBufferLimit,
		ReadCoalesce: cfg.ReplReadCoalesce, SnapshotSource: cfg.SnapshotFromAddr()}
}

// closeReplicasBefore acts on c, a change of the history's identity made
// already (an install and a new replid, from upstreamHost; a seed's begin,
// from snapshotHost), with no lock held: every replica planned before it is
// disconnected, for the close reason of what changed. Before a new
// generation's, the replicas parked on the fan-out are woken, to see it as
// a cursor's Wait would. A NoChange closes nothing.
func (s *Server) closeReplicasBefore(c history.Change) {
	switch c.Kind {
	case history.NewGeneration:
		s.replicas.fanout.Wake()
		s.clients.disconnectReplicas(downstream.CloseGenerationChanged, c.Epoch)
	case history.NewReplID:
		s.clients.disconnectReplicas(downstream.CloseReplIDChanged, c.Epoch)
	}
}

// newSnapshots builds the server's snapshot work (package snapshots), which
// fetches over the upstream link's side links and reads the rest of the
// server through snapshotHost and the settings it is given (here, then by
// applyConfig after every change), and hands it to the link, whose main
// link's payloads and seeds go to it (upstream.Snapshots). After the stream
// log was opened (or not), before Run.
func newSnapshots(s *Server, opts Options) *snapshots.Keeper {
	machine := opts.machineMemory
	if machine == nil {
		machine = sysmem.Machine
	}
	k := snapshots.New(snapshots.Options{
		History:       s.hist,
		Source:        s.up,
		Host:          snapshotHost{s},
		Log:           s.log,
		Durable:       s.durable != nil,
		Backoff:       upstream.NextBackoff,
		MachineMemory: machine,
		Random:        opts.spillRand,
		Settings:      s.snapshotSettings(s.config()),
	})
	s.up.DeliverTo(k)
	return k
}

// snapshotSettings are the directives of cfg the snapshot work reads.
func (s *Server) snapshotSettings(cfg *config.Config) snapshots.Settings {
	set := snapshots.Settings{Dir: cfg.Dir, MaxMemory: cfg.MaxMemory, EvictSnapshots: cfg.MaxMemoryPolicy == eviction.EvictSnapshots,
		Refresh: cfg.ReplSnapshotRefresh, MaxStreamSince: cfg.ReplSnapshotMaxStreamSince, LogSize: cfg.ReplLogSize}
	if cfg.MasterHost != "" {
		set.Primary = net.JoinHostPort(cfg.MasterHost, strconv.Itoa(cfg.MasterPort))
	}
	set.Source, set.Fallback = cfg.SnapshotFromAddr(), cfg.SnapshotFromFallback
	return set
}

// snapshotHost is the server as the snapshot work sees it (snapshots.Host).
type snapshotHost struct{ s *Server }

// HistoryChanged disconnects the replicas of the generation a seed's Begin
// replaced, as an install's are.
func (h snapshotHost) HistoryChanged(c history.Change) { h.s.closeReplicasBefore(c) }

func (h snapshotHost) CountedMemory() int64 { return h.s.mem.report().Counted }

func (h snapshotHost) LogBounds() (first, last int64, live bool) {
	d := h.s.durable
	if d == nil {
		return 0, 0, false
	}
	first, last = d.log.Bounds()
	return first, last, !d.follow.Down()
}

// ackOffset is upstream.Host.AckOffset: applied under ack-policy received,
// else the quorum of the replicas that count (upstream.QuorumAck): online
// ones, not rdb-only ones, of the history's current epoch (a replica planned
// before an upstream full resync or a new replid acknowledged offsets of
// another history; it is being disconnected). Under ack-policy replicas
// every ACK that raises a replica's offset nudges the link
// (upstream.Link.AckChanged), whose ACK goroutine then walks the registry
// once (merged nudges: at most one walk in flight).
func (s *Server) ackOffset(applied int64) upstream.Ack {
	n := s.config().AckReplicas
	if n == 0 {
		return upstream.Ack{Off: applied}
	}
	offs, times := s.clients.ackOffsets(s.hist.Epoch())
	return upstream.QuorumAck(offs, times, n, applied, time.Now())
}

// replicaAcked is called after a replica's ACK raised its offset: under
// ack-policy replicas the upstream link may now acknowledge more.
func (s *Server) replicaAcked() {
	if s.config().AckReplicas > 0 {
		s.up.AckChanged()
	}
}

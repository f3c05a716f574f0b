package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/commanddocs"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/pubsub"
	"github.com/replproxy/replproxy/proxy/report"
	"github.com/replproxy/replproxy/proxy/tlsconf"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// The assembly: New builds each owner of the server's state, hands it what
// it needs of the others, and undoes what it made when a step fails;
// applyConfig is what a published change of configuration puts in force,
// owner by owner (configChanges calls it).

// New validates cfg, opens the listeners and returns a server ready to Run.
// cfg is cloned: later changes to it have no effect. When it fails, it has
// closed whatever it had opened.
func New(cfg *config.Config, opts Options) (_ *Server, err error) {
	if cfg == nil {
		cfg = config.DefaultConfig()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FollowsAllShards() {
		// One server follows one shard; every shard is a set of servers.
		return nil, errors.New("cluster-shard all is served by a set of servers, one per shard (package proxy/clusterset), not by one")
	}
	cfg = cfg.Clone()
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if len(cfg.ClusterSeeds) > 0 && cfg.MasterHost != "" {
		// The cluster follower names the primary once it has confirmed it:
		// a replicaof left by CONFIG REWRITE may be a node that has since
		// become a replica, or left the shard (cluster_follow.go).
		log.Info("replicaof ignored: replicaof-cluster finds the shard's primary", "host", cfg.MasterHost,
			"port", cfg.MasterPort)
		cfg.MasterHost, cfg.MasterPort = "", 0
	}
	if opts.FileLimit != nil {
		n := opts.FileLimit(cfg.MaxClients)
		if n < 1 {
			return nil, fmt.Errorf("the open file limit leaves no room for clients (maxclients %d)", cfg.MaxClients)
		}
		if n < cfg.MaxClients {
			log.Warn("maxclients lowered to fit the open file limit", "maxclients", cfg.MaxClients, "effective-maxclients", n)
			cfg.MaxClients = n
		}
	}
	pool := replbuf.NewPool(0)
	s := &Server{
		log:  log,
		pool: pool,
		process: report.Process{Version: Version, RedisVersion: redisCompatVersion,
			PID: os.Getpid(), RunID: replid.New(), Started: time.Now(), ConfigFile: opts.ConfigFile},
	}
	// Each part that holds a resource pushes its closer on made once it
	// is made; a step that fails after it has them all closed, the last
	// made first. Once the server is whole, its lifecycle keeps them for
	// Close.
	var made undoStack
	defer func() {
		if err != nil {
			made.run()
		}
	}()
	s.hist = history.New(pool, cfg.ReplBacklogSize, history.Counters{
		EvictedSnapshots: &s.stats.EvictedSnapshots, EvictedBytes: &s.stats.EvictedBytes}, log)
	s.protect = newProtection(opts.FileLimit)
	docs, err := commanddocs.LoadEmbedded()
	if err != nil {
		return nil, err // only a broken build: its test checks the file
	}
	s.commands = newCommandTable(commandEntries(s), docs)
	s.commands.clusterMap = opts.ClusterMap
	s.access, err = newAccess(cfg, &s.stats, func(msg string) { log.Warn("ACL user left off", "problem", msg) })
	if err != nil {
		return nil, err
	}
	baseline := measureRuntimeBaseline()
	s.clients = newRegistry()
	s.pubsub = pubsub.New[*client]()
	s.up = newUpstream(s)
	s.supervision = newSupervision(opts.Supervisor, s.readiness, s.up.State)
	tlsst, err := tlsconf.Load(cfg) // before any socket: bad material fails the start
	if err != nil {
		return nil, err
	}
	lns, port, err := listen.Open(cfg.Bind, cfg.Port, cfg.TLSPort, nil, log)
	if err != nil {
		return nil, err
	}
	cfg.Port = port // port 0 picks a free port (unless TLS only)
	s.listeners = newListenerSet(lns, listenerTLS(&s.conf), log)
	made.push(s.listeners.close)
	if err := s.listenMetrics(cfg, opts.MetricsLabels); err != nil {
		return nil, err
	}
	made.push(s.closeMetricsListener)
	s.conf.cur.Store(newSettings(cfg, tlsst)) // after listen, which settles the port
	s.replicas.settings.Store(replicaSettings(cfg))
	s.up.Configure(s.upstreamSettings(cfg))
	s.dir = &dataDir{}
	s.changes = newConfigChanges(&s.conf, s.listeners, s.dir, log, s.applyConfig)
	if err := s.openDir(cfg, opts, &made); err != nil {
		return nil, err
	}
	s.mem = newMemory(baseline, &s.conf, s.hist, pool, s.clients, s.durable, s.snaps, log, opts.OnMaxMemory)
	s.cron = newCron(&s.conf, s.hist, &s.stats, s.up, s.clients, s.durable, s.mem, s.snaps, s.supervision)
	if opts.OnMaxMemory != nil {
		opts.OnMaxMemory(cfg.MaxMemory)
	}
	s.life = newLifecycle(made, &s.conf, log, s.listeners, s.hist, s.clients, s.supervision)
	return s, nil
}

// openDir takes dir's lock, opens the stream log when it is configured and
// recovers the history from it, then builds the snapshot work, which adopts
// the snapshot on disk and removes the leftovers of earlier runs. In New,
// after the listeners: only a dir another proxy holds fails it.
func (s *Server) openDir(cfg *config.Config, opts Options, made *undoStack) error {
	log := s.log
	// Before anything touches dir, whatever the log's setting: the lock
	// refuses a second proxy on it, before it removes the files the first
	// serves from (dirlock.go).
	lock, err := streamlog.LockDir(cfg.Dir)
	switch {
	case errors.Is(err, streamlog.ErrDirLocked):
		return err
	case err != nil:
		// A dir that cannot be locked (missing, read-only) never stops
		// relaying; nothing in it is touched, the log is not opened.
		log.Warn("dir not locked: its files are left alone and the stream log is off", "dir", cfg.Dir, "error", err)
		if cfg.ReplLogSize > 0 {
			s.dir.logOpenErr = "stream log: " + err.Error()
		}
	default:
		s.dir.lock = lock
		made.push(s.changes.releaseDir)
	}
	if cfg.ReplLogSize > 0 && s.dir.lock != nil {
		d, err := openDurable(cfg, log, opts.logFS)
		if err != nil {
			// A dir the log cannot use never stops relaying: the proxy runs
			// as without a log, and says so.
			log.Warn("stream log unavailable: running with the history in memory only", "error", err)
			msg := err.Error()
			s.dir.logOpenErr = msg
		} else {
			made.push(d.close)
			d.follow = history.NewFollower(s.hist, d.log, d.lg, d.followerConfig(&s.conf, cmp.Or(opts.logRetry, logRetryInterval)))
			s.durable = d
			s.hist.SetLog(d.log)
			d.recover(s.hist, s.up)
		}
	}
	s.snaps = newSnapshots(s, opts)
	made.push(func() { s.snaps.Close() })
	s.snaps.Adopt(cfg.Dir) // with the log only; before RemoveLeftovers, which keeps what it adopts
	if s.dir.lock != nil {
		s.snaps.RemoveLeftovers(cfg.Dir) // only in a dir this proxy holds
	}
	return nil
}

// applyConfig puts the effects of a newly published configuration into
// force. REQUIRES: no lock held, called in publication order
// (configChanges.finish).
func (s *Server) applyConfig(prev, next *config.Config) {
	if next.MaxMemory != prev.MaxMemory && s.mem.onMaxMemory != nil {
		s.changes.io("memory limit") // cmd/replproxy's logs
		s.mem.onMaxMemory(next.MaxMemory)
	}
	s.snaps.Configure(s.snapshotSettings(next))
	s.replicas.settings.Store(replicaSettings(next))
	if next.LogLevel != prev.LogLevel {
		s.log.SetLevel(HCLogLevel(next.LogLevel))
	}
	s.up.Configure(s.upstreamSettings(next))
	if next.MasterHost != prev.MasterHost || next.MasterPort != prev.MasterPort ||
		next.MasterAuth != prev.MasterAuth || next.MasterUser != prev.MasterUser ||
		next.TLSReplication != prev.TLSReplication {
		s.up.Retarget()
	}
	if next.RequirePass != prev.RequirePass {
		// requirepass is the default user's password, as in Redis.
		s.access.users.SetDefaultPassword(next.RequirePass)
	}
	if next.ACLLogMaxLen != prev.ACLLogMaxLen {
		s.access.aclLog.SetMaxLen(int(min(next.ACLLogMaxLen, 1<<31-1)))
	}
	if next.ReplBacklogSize != prev.ReplBacklogSize {
		// Under the history's lock; in publication order, so next's is the
		// value published last of those applied yet.
		s.hist.SetBacklogSize(func() int64 { return next.ReplBacklogSize })
	}
}

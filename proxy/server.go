package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/oklog/run"
	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/commanddocs"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
	"github.com/replproxy/replproxy/proxy/listen"
	"github.com/replproxy/replproxy/proxy/metrics"
	"github.com/replproxy/replproxy/proxy/pubsub"
	"github.com/replproxy/replproxy/proxy/report"
	"github.com/replproxy/replproxy/proxy/snapshots"
	"github.com/replproxy/replproxy/proxy/tlsconf"
	"github.com/replproxy/replproxy/proxy/upstream"
	"github.com/replproxy/replproxy/replbuf"
	"github.com/replproxy/replproxy/replid"
	"github.com/replproxy/replproxy/streamlog"
)

// Version is replproxy's version, shown in INFO server.
const Version = "0.1.0"

// redisCompatVersion is what INFO server reports as redis_version: the Redis
// release whose replication protocol replproxy speaks on both sides.
const redisCompatVersion = "7.0.15"

// A Server is one replproxy: the upstream link to a primary, the shared
// stream, and the listener that serves replicas and admin clients. Build one
// with New, run it with Run; several can run in one process.
type Server struct {
	log  hclog.Logger
	pool *replbuf.Pool
	hist *history.History // replication identity, stream, snapshots, fetch, sync plans (history.go)
	// process is who this server is to INFO and the logs: its run ID, pid,
	// start time and configuration file. Set by New, read-only.
	process report.Process

	stats report.Stats
	up    *upstream.Link // the link to the primary (package upstream; its Host in primary.go)
	// snaps carries out the snapshot work the history decides (package
	// snapshots, primary.go): fetches, payloads, spills, persists. Set by
	// New, run by Run.
	snaps   *snapshots.Keeper
	durable *durable // the stream log (durable.go); nil with repl-log-size 0
	// dir is dir's lock and why the stream log could not be opened there
	// (dirlock.go). Set by New.
	dir      *dataDir
	commands map[string]command
	cmdDocs  *commanddocs.Docs // COMMAND's entries; read-only
	// access is the ACL users, the ACL LOG and the failed AUTHs' log
	// (auth.go). Set by New.
	access *access
	// mem is the server's memory bookkeeping, eviction and returns to the
	// OS (memory.go); cron is the monitor (cron.go). Set by New.
	mem  *memory
	cron *cron

	// listeners are the client listeners and the TLS configuration of
	// their handshakes (listener_set.go): opened by New, replaced by CONFIG
	// SET port or bind, closed by Run's end, a drain or Close.
	listeners *listenerSet
	// monitoring is metrics-port's server (metrics_port.go); nil when off. Set
	// by New, served by Run, closed at its end or by Close.
	monitoring *metrics.Server

	// conf is the configuration in force (settings.go), published
	// copy-on-write; changes are its writers, CONFIG SET, REPLICAOF and
	// CONFIG REWRITE. Set by New.
	conf    liveConfig
	changes *configChanges

	// clients is the client registry (registry.go), under its own lock,
	// never held together with hist's.
	clients *registry
	// pubsub is the channels subscribed to and their subscribers
	// (package pubsub), under its own lock.
	pubsub *pubsub.Channels[*client]

	// fanout is the set of replicas the upstream link sends to inline after
	// each publish (downstream.Fanout), under its own lock, a leaf.
	fanout downstream.Fanout
	// linkSlots are the connections agreed to a compressed link, against
	// repl-link-compression-max-links (an atomic): each client's goroutine
	// takes its slot at REPLCONF and gives it back at its end.
	linkSlots downstream.LinkSlots

	// protect is the open file limit's check and the rate-limited logs of
	// what strangers can repeat (protect.go). Set by New.
	protect *protection

	// life is the server's life (drain.go): Run, Close, Shutdown's graceful
	// stop, and what New made. Set by New, last.
	life *lifecycle
	// supervision tells Options.Supervisor of the server's life
	// (supervise.go). Set by New.
	supervision *supervision
}

// Options are what New needs besides the configuration.
type Options struct {
	// Logger is the root logger; nil discards logs.
	Logger hclog.Logger

	// logFS, when set, wraps the stream log's file layer (tests inject
	// faults with it).
	logFS func(streamlog.FS) streamlog.FS
	// logRetry, when set, replaces logRetryInterval (tests).
	logRetry time.Duration
	// machineMemory, when set, replaces the machine's memory (tests).
	machineMemory func() int64
	// spillRand, when set, names the snapshot work's temporary files
	// instead of crypto/rand (tests).
	spillRand io.Reader
	// ConfigFile is the path the configuration was read from, for INFO and
	// CONFIG REWRITE (which writes over it); "" means none, and CONFIG
	// REWRITE then fails as in Redis.
	ConfigFile string
	// OnMaxMemory, when not nil, is called with maxmemory at start and
	// whenever CONFIG SET changes it (the program sets GOMEMLIMIT from it).
	OnMaxMemory func(maxmemory int64)
	// FileLimit, when not nil, is asked at start and by CONFIG SET maxclients
	// how many clients the process's open file limit allows, after raising
	// it if it can; it returns maxclients when they fit. At start a smaller
	// answer lowers maxclients (with a warning), one below 1 fails New; CONFIG
	// SET refuses a maxclients that does not fit. The program passes one
	// built on RLIMIT_NOFILE; tests fake it.
	FileLimit func(maxclients int) int
	// Supervisor, when not nil, is told when Run serves, how its readiness
	// changes and when it stops (supervise.go); the program passes one that
	// writes to systemd's notify socket under supervised systemd.
	Supervisor Supervisor
}

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
	cfg = cfg.Clone()
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
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
	s.commands = commandTable()
	docs, err := commanddocs.LoadEmbedded()
	if err != nil {
		return nil, err // only a broken build: its test checks the file
	}
	s.cmdDocs = docs
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
	if err := s.listenMetrics(cfg); err != nil {
		return nil, err
	}
	made.push(s.closeMetricsListener)
	s.conf.cur.Store(newSettings(cfg, tlsst)) // after listen, which settles the port
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
// force. REQUIRES: no lock held, called in publication order (finish).
func (s *Server) applyConfig(prev, next *config.Config) {
	if next.MaxMemory != prev.MaxMemory && s.mem.onMaxMemory != nil {
		s.changes.io("memory limit") // cmd/replproxy's logs
		s.mem.onMaxMemory(next.MaxMemory)
	}
	s.snaps.Configure(s.snapshotSettings(next))
	if next.LogLevel != prev.LogLevel {
		s.log.SetLevel(HCLogLevel(next.LogLevel))
	}
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

// ErrServerClosed is returned by Run on a server that was closed or has run
// already.
var ErrServerClosed = errors.New("proxy: server closed")

// Run serves until ctx is done, Close is called, a graceful stop (Shutdown)
// has drained or one of its actors fails, then stops every actor in order
// (see actors) and returns once all have stopped. It returns nil after a
// clean stop, else the error of each actor that failed. A server runs once.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !s.life.begin(cancel) {
		return ErrServerClosed
	}
	defer s.life.ended()
	s.log.Info("replproxy started", "version", Version, "address", s.Addr().String(), "pid", s.process.PID)
	// New opened the listeners: a connection waits in their queue for the
	// accept loops, which start with the actors.
	s.supervision.notifyReady()
	err := s.actors(ctx, cancel).run()
	s.hist.Close()
	// Parked replicas see the stream's end, as a cursor's Wait would.
	s.fanout.Wake()
	s.changes.releaseDir() // last: nothing writes in dir any more
	s.log.Info("replproxy stopped")
	return err
}

// actors is Run's run group: every goroutine of the server that lives as
// long as Run is one of these actors, or started and waited for by one.
// They are stopped in the order they are added here, which is the order
// the server stops in:
//
//  1. stop: waits for ctx's end (Close) or Shutdown, which drains first
//     (drain.go): listeners closed, the link ended, the replicas given up
//     to shutdown-timeout to catch up. Its stop tells the supervisor and
//     cancels ctx, which every actor but the stream log's follower and
//     the monitoring server runs under: a stop at once.
//  2. upstream link: ended first (by the drain already, on a graceful
//     stop), so that the stream's end stays put.
//  3. clients: one accept loop per listener (a replaced listener's ends
//     when it is closed) and each client's goroutine, replicas' included;
//     its stop closes the listeners and every client and waits for them.
//  4. monitor and 5. memory return (which the monitor asks for): stopped
//     before the snapshot keeper, whose work the monitor asks for too.
//  6. snapshot keeper: closed, it waits for its fetches, spills and
//     persists.
//  7. stream log, when configured: the follower, the last of the
//     stream's readers, appends what was published; the log is closed
//     once it has stopped.
//  8. monitoring server, when metrics-port is set: it answers /metrics and
//     /readyz until here, through a graceful stop.
//
// Run then closes the history, wakes the replicas parked on the fan-out
// and releases dir's lock.
func (s *Server) actors(ctx context.Context, cancel context.CancelFunc) *actorGroup {
	g := &actorGroup{log: s.log}
	// The link has a context of its own, so that a graceful stop can end
	// it first and fix the stream's end while the replicas catch up.
	linkCtx, stopLink := context.WithCancel(ctx)
	linkDone := make(chan struct{})

	g.add("stop", func() error {
		select {
		case <-ctx.Done():
		case <-s.life.drainRequested():
			s.life.drain(ctx, stopLink, linkDone)
		}
		return nil
	}, func() {
		s.supervision.notifyStopping() // the drain told it already on a graceful stop
		cancel()
	})

	g.add("upstream link", func() error {
		err := s.up.Run(linkCtx)
		close(linkDone)
		if err == nil {
			<-ctx.Done() // ended by a drain: the others stop with the stop actor
		}
		return err
	}, stopLink)

	var conns sync.WaitGroup // the accept loops and the clients' goroutines
	acceptErr := make(chan error, 1)
	g.add("clients", func() error {
		s.listeners.serveAll(func(ln net.Listener, isTLS bool) {
			conns.Go(func() {
				if err := s.acceptLoop(ctx, ln, &conns, isTLS); err != nil {
					select {
					case acceptErr <- err:
					default: // the actor is failing on the first one already
					}
				}
			})
		})
		select {
		case <-ctx.Done():
			return nil
		case err := <-acceptErr:
			return err
		}
	}, func() {
		s.listeners.close()
		s.closeClients()
		conns.Wait()
	})

	g.add("monitor", func() error { return s.cron.run(ctx) }, nil)
	g.add("memory return", func() error { return s.mem.returnMemory(ctx) }, nil)
	// Not stopped by Keeper.Close, which, were it to come before Run (a
	// stop right after the start), would have Run refuse with ErrClosed:
	// Run closes the Keeper itself when ctx ends.
	g.add("snapshot keeper", func() error { return s.snaps.Run(ctx) }, nil)

	if d := s.durable; d != nil {
		// Not under ctx: the follower stops only at its turn, after the
		// link and every other reader of the stream.
		logCtx, stopLog := context.WithCancel(context.Background())
		g.add("stream log", func() error {
			defer d.close()
			return d.follow.Run(logCtx)
		}, stopLog)
	}

	if m := s.monitoring; m != nil {
		s.log.Info("metrics server listening", "address", m.Addr().String())
		g.add("monitoring server", m.Serve, m.Shutdown)
	}
	return g
}

// An actorGroup is a run.Group whose actors stop in order: each runs on a
// goroutine of its own and, when the first one returns, every actor is
// stopped, one at a time in the order they were added, each waited for
// before the next is stopped. A failed actor's error is logged and kept.
type actorGroup struct {
	g   run.Group
	log hclog.Logger
	// errs are the failed actors' errors, in the order they failed;
	// appended by the actors' goroutines, read by run once all returned.
	errs struct {
		sync.Mutex
		list []error
	}
}

// add adds the actor name: execute runs it until it is stopped, and
// returns nil then, or its error when it fails; stop, when not nil, tells
// it to return (an actor under Run's context needs no telling: the stop
// actor has cancelled it by its turn). It is stopped once execute has
// returned.
func (g *actorGroup) add(name string, execute func() error, stop func()) {
	done := make(chan struct{})
	g.g.Add(func() error {
		defer close(done)
		err := execute()
		if err != nil {
			g.log.Error("stopping: a part of the server failed", "part", name, "error", err)
			err = fmt.Errorf("%s: %w", name, err)
			g.errs.Lock()
			g.errs.list = append(g.errs.list, err)
			g.errs.Unlock()
		}
		return err
	}, func(error) {
		if stop != nil {
			stop()
		}
		<-done
	})
}

// run runs the actors and returns once every one has stopped: nil, or the
// errors of those that failed.
func (g *actorGroup) run() error {
	g.g.Run() // returns the first actor's error alone: g.errs has them all
	g.errs.Lock()
	defer g.errs.Unlock()
	return errors.Join(g.errs.list...)
}

// Close stops the server: when Run is running, it ends it and waits until it
// has returned; on a server that never ran it closes what New opened. It may
// be called any number of times, from any goroutine; every call returns once
// the server is stopped. It returns nil.
func (s *Server) Close() error {
	s.life.close()
	return nil
}

// acceptLoop accepts connections until the listener is closed. Each client's
// goroutine joins wg; on a TLS listener (isTLS) it runs the handshake first,
// so that a slow one holds up no other client, and the connection counts
// against maxclients from accept on. Any other accept error (EMFILE when the process is out
// of descriptors, ENOBUFS, ...) is logged, at most once per logEvery, and
// retried after a back-off: a proxy that stops accepting would leave every
// replica without a way back.
func (s *Server) acceptLoop(ctx context.Context, ln net.Listener, wg *sync.WaitGroup, isTLS bool) error {
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			delay = nextAcceptDelay(delay)
			if ok, n := s.protect.acceptLog.allow(time.Now(), logEvery); ok {
				s.log.Warn("accept failed; retrying", "error", err, "retry-in-ms", delay.Milliseconds(), "suppressed", n)
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		delay = 0
		s.stats.ConnectionsReceived.Add(1) // at accept, before any TLS handshake, as Redis counts
		if isTLS {
			s.stats.TLSConnectionsReceived.Add(1)
			// The handshake holds a descriptor and a goroutine for up to its
			// timeout, so it takes a client's slot from accept on, as Redis
			// creates the client before the handshake; past maxclients the
			// connection is closed at once. Redis's error cannot go out
			// before the handshake (Redis writes nothing either): it drops.
			if !s.clients.reserve(s.config().MaxClients) {
				s.stats.RejectedConnections.Add(1)
				conn.Close()
				continue
			}
			wg.Go(func() {
				if tc, ok := s.handshakeTLS(ctx, conn); ok {
					s.admit(ctx, tc, wg, true)
				}
			})
			continue
		}
		s.admit(ctx, conn, wg, false)
	}
}

// admit serves a new connection (after its TLS handshake, on tls-port):
// protected mode and maxclients, then a goroutine that joins wg. reserved
// says the connection holds a slot of the registry already (a TLS one,
// reserved at accept): it becomes the client's, or is given back.
func (s *Server) admit(ctx context.Context, conn net.Conn, wg *sync.WaitGroup, reserved bool) {
	if deniedByProtectedMode(s.clientConf(), s.access.defaultOpen(), conn.RemoteAddr()) {
		if reserved {
			s.clients.unreserve()
		}
		s.stats.RejectedConnections.Add(1) // as Redis counts it
		wg.Go(func() { deny(conn) })
		return
	}
	c, ok := (*client)(nil), true
	if reserved {
		c = s.clients.addReserved(func(id int64) *client { return s.clientOf(id, conn) })
	} else {
		c, ok = s.register(conn)
	}
	if !ok {
		s.stats.RejectedConnections.Add(1)
		conn.Write([]byte("-ERR max number of clients reached\r\n"))
		conn.Close()
		return
	}
	if ctx.Err() != nil {
		// Run cancels ctx before closeClients lists the clients: a client
		// registered after that list (a TLS handshake that ended just then)
		// sees the cancel here and is closed, so none is left open.
		c.closeFor(downstream.CloseServerShutdown)
	}
	wg.Go(func() { s.serveClient(ctx, c) })
}

// register adds a connection to the client registry, unless maxclients is reached.
func (s *Server) register(conn net.Conn) (*client, bool) {
	return s.clients.add(s.config().MaxClients, func(id int64) *client { return s.clientOf(id, conn) })
}

// clientOf makes the client of conn, with id (newClient): handed what every
// client shares, as the default user.
func (s *Server) clientOf(id int64, conn net.Conn) *client {
	shared := clientShared{conf: &s.conf, stats: &s.stats, limitLog: &s.protect.limitLog}
	return newClient(id, conn, shared, s.log, s.access.users.Default(), s.access.defaultOpen())
}

// closeClients closes every client connection, which ends their goroutines.
func (s *Server) closeClients() {
	for _, c := range s.clients.clients() {
		c.closeFor(downstream.CloseServerShutdown)
	}
}

// Addr returns the address of the first plain listener, or of the first
// TLS one when there is no plain listener (port 0 with a tls-port): where
// replicas connect. After CONFIG SET port or bind it is the new one's.
func (s *Server) Addr() net.Addr { return s.listeners.plainAddr() }

// Port returns the TCP port of [Server.Addr].
func (s *Server) Port() int { return s.Addr().(*net.TCPAddr).Port }

// TLSAddr returns the address of the first TLS listener, nil when tls-port
// is 0. After CONFIG SET bind it is the new one's.
func (s *Server) TLSAddr() net.Addr { return s.listeners.secureAddr() }

// plainPort returns the port of the plain listeners, 0 when TLS only: the
// configuration's, which New and CONFIG SET settle when port 0 picks one,
// as INFO's tcp_port is Redis's server.port.
func (s *Server) plainPort() int { return s.config().Port }

// config returns the configuration in force. It is shared: never change it.
func (s *Server) config() *config.Config { return s.conf.config() }

// clientConf returns what clients consult of the configuration in force.
func (s *Server) clientConf() *clientConf { return s.conf.clientConf() }

// tlsNow returns the TLS material in force, nil when no TLS is configured.
func (s *Server) tlsNow() *tlsconf.Material { return s.conf.tls() }

// identity returns the replication identity the proxy presents now.
func (s *Server) identity() history.Identity { return s.hist.Identity() }

// wakeMonitor runs the monitor's next round now if it is quiet and enough
// of the stream came since (cron.wakeIfMoved): the stream's producer.
func (s *Server) wakeMonitor() { s.cron.wakeIfMoved() }

// wakeMonitorNow runs the monitor's next round now if it is quiet: a
// payload starts to grow memory.
func (s *Server) wakeMonitorNow() { s.cron.wakeNow() }

// disconnectReplicas closes every replica planned before epoch
// (registry.disconnectReplicas).
func (s *Server) disconnectReplicas(reason downstream.CloseReason, epoch uint64) {
	s.clients.disconnectReplicas(reason, epoch)
}

// memoryReport is used_memory's accounting now (memory.report).
func (s *Server) memoryReport() eviction.Report { return s.mem.report() }

// memoryWindow is how far behind the stream's end a replica may be and
// still be sent from memory while the stream log runs (durable.go).
func (s *Server) memoryWindow() int64 { return memoryWindow(s.config()) }

// logLive reports whether the stream log follows the stream now.
func (s *Server) logLive() bool { return s.durable.live() }

// Shutdown asks Run to stop gracefully and returns at once; Run returns when
// the replicas have caught up or shutdown-timeout has passed, whichever is
// first. Ending Run's context, or Close, still stops at once, during the
// wait too. Any goroutine, any number of times; on a server not running, Run
// will stop gracefully as soon as it starts.
func (s *Server) Shutdown() { s.life.shutdown() }

// Snapshot returns the newest snapshot in memory, or nil.
func (s *Server) Snapshot() *replbuf.Snapshot { return s.hist.Newest() }

// ReplIDSize is the length of a replication ID: 40 lowercase hex characters
// (Redis's CONFIG_RUN_ID_SIZE). The replid rules live in package replid.
const ReplIDSize = replid.Size

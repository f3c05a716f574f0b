package proxy

import (
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/config"
	"github.com/replproxy/replproxy/proxy/downstream"
	"github.com/replproxy/replproxy/proxy/history"
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
	dir *dataDir
	// commands is the command table and COMMAND's entries
	// (command_table.go), its handlers bound to this server. Set by New.
	commands *commandTable
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

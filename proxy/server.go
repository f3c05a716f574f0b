package proxy

import (
	"io"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/replproxy/replproxy/proxy/config"
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
// stream, and the listeners that serve replicas and admin clients. Build
// one with New (assemble.go), run it with Run (run.go); several can run in
// one process.
//
// Its fields are the owners of its state, each in a file (or a package) of
// its own, with its own lock or atomics. New makes each one and hands it
// what it needs of the others; none holds the Server. The Server's own
// methods are the parts built on all of them: serving a client
// (client_conn.go), the commands (dispatch.go, commands*.go), the report
// (report_read.go), the hosts of the link and of the replicas (primary.go,
// replica_host.go) and the monitoring port (metrics_port.go). Every field
// is set by New and never replaced.
type Server struct {
	// The replication data: the stream's blocks, the history that holds
	// the stream and the snapshots, the stream log in dir (its follower is
	// one of Run's actors), dir's lock, the snapshot work (the Keeper, an
	// actor), and the link to the primary (an actor; its Host is
	// primary.go's).
	pool    *replbuf.Pool
	hist    *history.History
	durable *durable // durable.go; nil with repl-log-size 0
	dir     *dataDir // dirlock.go
	snaps   *snapshots.Keeper
	up      *upstream.Link

	// What the replicas share (replica_share.go).
	replicas replicaShare

	// The clients: the listeners (each served by an accept loop of the
	// clients actor), the registry, the Pub/Sub channels, the ACL users,
	// what protects the proxy from strangers, and the command table.
	listeners *listenerSet              // listener_set.go
	clients   *registry                 // registry.go; never locked with hist's lock
	pubsub    *pubsub.Channels[*client] // package pubsub
	access    *access                   // auth.go
	protect   *protection               // protect.go
	commands  *commandTable             // command_table.go

	// The configuration in force, read with one atomic load, and its
	// writers, CONFIG SET, REPLICAOF and CONFIG REWRITE (settings.go).
	conf    liveConfig
	changes *configChanges

	// The background: the monitor (cron.go), an actor, and the memory it
	// watches (memory.go), whose returns to the OS another actor makes.
	cron *cron
	mem  *memory

	// The figures and who is told: the counters behind INFO and /metrics,
	// the process's identity, metrics-port's server (metrics_port.go; an
	// actor, nil when off), the supervisor (supervise.go).
	stats       report.Stats
	process     report.Process
	monitoring  *metrics.Server
	supervision *supervision

	// The server's life (drain.go): Run, Close, Shutdown's graceful stop,
	// and the closers of what New made. log is the root logger.
	life *lifecycle
	log  hclog.Logger
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
	// ClusterMap, when not nil, is what CLUSTER SHARDS and CLUSTER SLOTS
	// answer: every shard a set of servers serves under cluster-shard all
	// (package proxy/clusterset), each with the port it is served on. Nil,
	// a server following one shard shows that shard alone. Called on
	// clients' goroutines, any number at once.
	ClusterMap func() []ClusterShard
	// MetricsLabels, when set, are added to every replproxy series of
	// /metrics: under cluster-shard all, each shard's server is given its
	// shard's index, so that every figure says which shard it is of.
	MetricsLabels map[string]string
	// Supervisor, when not nil, is told when Run serves, how its readiness
	// changes and when it stops (supervise.go); the program passes one that
	// writes to systemd's notify socket under supervised systemd.
	Supervisor Supervisor
}

// The methods below are the Server's API and its reads of the
// configuration in force: each one line, answered by the owner it names.
// The parts built on the Server call the other owners directly.

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

// Shutdown asks Run to stop gracefully and returns at once; Run returns when
// the replicas have caught up or shutdown-timeout has passed, whichever is
// first. Ending Run's context, or Close, still stops at once, during the
// wait too. Any goroutine, any number of times; on a server not running, Run
// will stop gracefully as soon as it starts.
func (s *Server) Shutdown() { s.life.shutdown() }

// RunID returns the server's run ID (INFO's run_id), which CLUSTER SHARDS
// shows as its node ID.
func (s *Server) RunID() string { return s.process.RunID }

// ReplOffset returns the server's replication offset (INFO's
// master_repl_offset).
func (s *Server) ReplOffset() int64 { return s.hist.Stream().Offset() }

// Snapshot returns the newest snapshot in memory, or nil.
func (s *Server) Snapshot() *replbuf.Snapshot { return s.hist.Newest() }

// ReplIDSize is the length of a replication ID: 40 lowercase hex characters
// (Redis's CONFIG_RUN_ID_SIZE). The replid rules live in package replid.
const ReplIDSize = replid.Size

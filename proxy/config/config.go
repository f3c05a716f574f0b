package config

import (
	"math"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/replproxy/replproxy/eviction"
)

// Limits and defaults shared by the directive table and Validate.
const (
	// MinReplBacklogSize is Redis's CONFIG_REPL_BACKLOG_MIN_SIZE: a smaller
	// repl-backlog-size is raised to it.
	MinReplBacklogSize = 16 << 10
	// MaxBindAddrs is Redis's CONFIG_BINDADDR_MAX.
	MaxBindAddrs = 16

	maxSeconds      = math.MaxInt32 // repl-timeout and soft seconds are C ints in Redis
	maxClientsLimit = math.MaxUint32

	// MinQueryLimit is the least client-query-buffer-limit and
	// proto-max-bulk-len Redis accepts (1 MiB).
	MinQueryLimit = 1 << 20
	// MaxReadCoalesce is the longest repl-read-coalesce-usec: past it a
	// byte would wait longer than anyone would trade for CPU.
	MaxReadCoalesce = 100 * time.Millisecond
	// MaxLinkCoalesce is the longest repl-link-compression-coalesce-usec,
	// for the same reason.
	MaxLinkCoalesce = 100 * time.Millisecond
	// DefaultReplLogWindow is repl-log-window's default: a burst the disk
	// takes in a second or two (a few tens of MB written faster than pages
	// are allocated on an empty log) must not cost the log its history.
	DefaultReplLogWindow = 64 << 20
	// MinReplLogWindow is the least repl-log-window: a few of the batches
	// the follower writes at a time (proxy/history), below which it would
	// restart while it merely gathers.
	MinReplLogWindow = 4 << 20
	// SyncRatePiece is the largest piece of a full-sync payload a
	// downstream proxy reads whole before its read deadline is renewed:
	// one chunk of a compressed link (proxy/linkzstd: a 12-byte header and
	// at most 129 KiB of body; a test in proxy keeps the two equal). A
	// repl-link-sync-rate-limit must move it within repl-timeout.
	SyncRatePiece = 12 + 129<<10
	// DefaultLinkCompressionMaxLinks is repl-link-compression-max-links'
	// default: compressed links are to downstream proxies, one or two per
	// region, and 16 encoders of at most 1.25 MiB each (20 MiB) stay within
	// the 32 MiB by which RSS may exceed used_memory before memory is
	// returned to the OS, so that even a full set closing at once leaves
	// no more than that behind.
	DefaultLinkCompressionMaxLinks = 16
	// maxLinkCompressionMaxLinks is its largest value: maxclients' range.
	maxLinkCompressionMaxLinks = maxClientsLimit
)

// LogLevel is a Redis log level, the value of the loglevel directive.
type LogLevel string

// The Redis log levels, from most to least verbose.
const (
	LogDebug   LogLevel = "debug"
	LogVerbose LogLevel = "verbose"
	LogNotice  LogLevel = "notice"
	LogWarning LogLevel = "warning"
	LogNothing LogLevel = "nothing" // Redis 7.2+: log nothing at all
)

// LogFormat is the value of the log-format directive.
type LogFormat string

// The log formats.
const (
	LogText LogFormat = "text" // human-readable lines (hclog's default)
	LogJSON LogFormat = "json" // one JSON object per line
)

// Supervised is the value of the supervised directive: how the process tells
// its supervisor that it serves, as redis-server 7.0 does.
type Supervised string

// The supervision modes. Redis's upstart (SIGSTOP once ready) is not one:
// no supervisor in use today asks for it.
const (
	SupervisedNo      Supervised = "no"      // nothing is sent
	SupervisedSystemd Supervised = "systemd" // READY=1, STATUS=, STOPPING=1 to $NOTIFY_SOCKET
	SupervisedAuto    Supervised = "auto"    // systemd when NOTIFY_SOCKET is set, else no
)

// LogFsync is the value of repl-log-fsync: when the stream log is synced to
// disk, as appendfsync does for Redis's AOF.
type LogFsync string

// The repl-log-fsync policies.
const (
	FsyncAlways   LogFsync = "always"   // after every write of the log
	FsyncEverySec LogFsync = "everysec" // once a second
	FsyncNo       LogFsync = "no"       // when the OS writes it back
)

// LinkCompression is the value of repl-link-compression: what a proxy asks
// of an upstream that is another replproxy for the link's A→B direction.
type LinkCompression string

// The repl-link-compression values.
const (
	LinkCompressionNo   LinkCompression = "no"   // a plain link (the default)
	LinkCompressionZstd LinkCompression = "zstd" // ask for zstd (REPLCONF link-compression zstd)
)

// The accepted values of each enum directive, in the order errors list them.
// Read-only.
var (
	logLevels        = []LogLevel{LogDebug, LogVerbose, LogNotice, LogWarning, LogNothing}
	logFormats       = []LogFormat{LogText, LogJSON}
	supervisedModes  = []Supervised{SupervisedNo, SupervisedSystemd, SupervisedAuto}
	logFsyncs        = []LogFsync{FsyncAlways, FsyncEverySec, FsyncNo}
	linkCompressions = []LinkCompression{LinkCompressionZstd, LinkCompressionNo}
	evictionPolicies = []eviction.Policy{eviction.NoEviction, eviction.EvictSnapshots} // defined, with what they do, by eviction
)

// OutputBufferLimit is one class of client-output-buffer-limit: a client of
// the class is disconnected when its pending output reaches Hard bytes, or
// stays at or above Soft bytes for longer than SoftPeriod.
type OutputBufferLimit struct {
	// Hard is the hard limit in bytes; 0 means none.
	Hard int64
	// Soft is the soft limit in bytes; 0 means none.
	Soft int64
	// SoftPeriod is how long a client may stay over Soft. The directive gives
	// whole seconds; 0 means no grace period.
	SoftPeriod time.Duration
}

// OutputBufferLimits holds client-output-buffer-limit for each client class
// Redis knows. replproxy enforces Replica (measured as the bytes a replica's
// cursor pins) and Normal; PubSub is kept so that redis.conf files and
// CONFIG GET stay compatible.
type OutputBufferLimits struct {
	Normal  OutputBufferLimit // class "normal"
	Replica OutputBufferLimit // class "replica", alias "slave"
	PubSub  OutputBufferLimit // class "pubsub"
}

// Config is replproxy's configuration. It is a plain value: build it with
// [DefaultConfig] or [Parse], change it with [Config.Set] or directly, and
// check it with [Config.Validate] before use. Constructors clone what they
// are given ([Config.Clone]). A Config is not safe for concurrent mutation.
//
// Durations set from Go may have sub-second precision (tests use that); the
// directives themselves take whole seconds and [Config.Get] rounds up.
type Config struct {
	// Port is `port`, the TCP port for replicas and admin clients.
	// Default 6379, range 0..65535. 0 means the kernel picks a free port
	// (redis-server would not listen on TCP at all; replproxy has no unix
	// socket, so that meaning would be useless).
	Port int

	// Bind is `bind addr ...`, the addresses to listen on, at most
	// [MaxBindAddrs]. "*" means every IPv4 address and "::*" every IPv6
	// address; a leading "-" marks an address whose bind failure is not fatal,
	// as in Redis 7. Default ["127.0.0.1"] (redis-server's built-in default is
	// "* -::*"; its sample redis.conf uses "127.0.0.1 -::1"). Must not be empty.
	Bind []string

	// MasterHost and MasterPort are `replicaof <host> <port>` (alias
	// `slaveof`): the upstream primary. An empty MasterHost means no upstream
	// (`replicaof no one`), and then MasterPort must be 0.
	MasterHost string
	MasterPort int

	// ClusterSeeds is `replicaof-cluster <host> <port> [<host> <port> ...]`
	// (at most [MaxClusterSeeds] nodes of one Redis or Valkey Cluster):
	// when set, the proxy follows the shard ClusterShard names, and
	// MasterHost and MasterPort are the primary it found, set by the proxy,
	// not by REPLICAOF or CONFIG SET replicaof (see docs/cluster.md).
	// Empty, the default: replicaof alone names the primary. Startup only.
	// Proxy-only.
	ClusterSeeds []HostPort
	// ClusterShard is `cluster-shard <node-id | slot | all>`: the shard to
	// follow, by the ID of one of its nodes (40 characters of 0-9 and a-z)
	// or a slot it serves (0 to 16383); or [AllShards], every shard, each
	// served on a port of its own from ClusterPortBase (package
	// proxy/clusterset; a proxy.Server follows one shard). Required with
	// ClusterSeeds, and only with them. Startup only. Proxy-only.
	ClusterShard string
	// ClusterPortBase is `cluster-port-base`: with `cluster-shard all`, the
	// port of the shard of index 0; the shard of index i is served on
	// ClusterPortBase+i. Required with `cluster-shard all` (1 to 65535), 0
	// (the default) otherwise. Startup only. Proxy-only.
	ClusterPortBase int
	// ClusterRefreshInterval is `cluster-refresh-interval` in milliseconds:
	// how often the proxy reads the cluster's topology again while it
	// follows a shard (it also does when its link to the primary drops).
	// Default 2000, range 100 to 3600000. Proxy-only.
	ClusterRefreshInterval time.Duration

	// MasterAuth is `masterauth`, the password sent to the upstream with AUTH.
	// Empty means no AUTH.
	MasterAuth string
	// MasterUser is `masteruser`, the ACL user for that AUTH. Empty means the
	// one-argument AUTH <password>. Requires MasterAuth.
	MasterUser string
	// BindSourceAddr is `bind-source-addr` (Redis 7.0): the local address
	// every connection to the primary and to the snapshot-from source is
	// made from, an IP address or a host name resolved at each dial, for
	// hosts with several addresses. Empty, the default, lets the kernel
	// choose. Applies from the next connection.
	BindSourceAddr string
	// RequirePass is `requirepass`, the password downstream clients and
	// replicas must AUTH with. Empty means no authentication.
	RequirePass string
	// ProtectedMode is `protected-mode` (yes/no), Redis 7's rule: when it is
	// on and RequirePass is empty, only loopback clients are served; others
	// get -DENIED and are closed, whatever Bind says. Default true.
	ProtectedMode bool

	// ClientQueryBufferLimit is `client-query-buffer-limit` in bytes: a
	// client whose command in progress grows past it is closed. Default
	// 1 GiB; at least [MinQueryLimit].
	ClientQueryBufferLimit int64
	// ProtoMaxBulkLen is `proto-max-bulk-len` in bytes: the longest bulk a
	// client may send ("invalid bulk length" above it). Default 512 MiB; at
	// least [MinQueryLimit]. The primary's stream is not bound by it.
	ProtoMaxBulkLen int64
	// MasterQueryBufferLimit is `master-query-buffer-limit` in bytes: the
	// most of the primary's stream the upstream link holds unpublished (a
	// command cut across reads, a MULTI waiting for its EXEC); past it the
	// link is dropped and resumed by PSYNC from the last whole command.
	// Default 1 GiB, as client-query-buffer-limit's; at least
	// [MinQueryLimit]. Proxy-only: Redis exempts its primary from
	// client-query-buffer-limit.
	MasterQueryBufferLimit int64

	// ReplBacklogSize is `repl-backlog-size` in bytes: how much of the latest
	// stream is kept for partial resyncs. Default 1 MiB. The directive raises
	// values below [MinReplBacklogSize] to it, as Redis does; Validate rejects
	// them.
	ReplBacklogSize int64
	// ReplLinkCompression is `repl-link-compression`: zstd or no (the
	// default). With zstd the upstream link, main and side links, asks its
	// primary with REPLCONF link-compression zstd for the stream and the
	// payloads to come compressed; a primary that refuses (a redis-server,
	// a replproxy with repl-link-compression-allow no) leaves the link
	// plain, so it is safe to set everywhere. Applies from the next
	// connection. Proxy-only.
	ReplLinkCompression LinkCompression
	// ReplLinkCompressionAllow is `repl-link-compression-allow` (yes/no):
	// whether this proxy agrees to compress what it sends a downstream
	// proxy that asks for it. Default true; applies to the next handshake.
	// Proxy-only.
	ReplLinkCompressionAllow bool
	// ReplLinkCompressionMaxLinks is `repl-link-compression-max-links`: the
	// most links to downstream proxies this proxy compresses at once (each
	// holds an encoder of about 1 MiB, mem_link_compression). Past it a
	// REPLCONF link-compression zstd is refused, as
	// repl-link-compression-allow no refuses it, and that link stays plain.
	// Default DefaultLinkCompressionMaxLinks; 0 means no cap (as maxmemory
	// 0 means no limit: repl-link-compression-allow no is the way to
	// compress none). A lower value leaves the links already compressed as
	// they are. Proxy-only.
	ReplLinkCompressionMaxLinks int64
	// ReplTimeout is `repl-timeout`, in whole seconds in the directive: how
	// long the upstream or a downstream replica may stay silent. Default 60s;
	// must be positive.
	ReplTimeout time.Duration
	// ShutdownTimeout is `shutdown-timeout` (Redis 7's name), in whole
	// seconds in the directive: how long a graceful stop (SIGTERM, SHUTDOWN)
	// waits for the replicas to receive the stream they have not yet been
	// sent. Default 10s; 0 does not wait.
	ShutdownTimeout time.Duration

	// ReplLogSize is `repl-log-size` in bytes: how much of the stream the
	// stream log keeps in dir, for partial resyncs beyond the memory backlog
	// and across restarts. Default 1 GiB; 0 turns the log off. Proxy-only.
	ReplLogSize int64
	// ReplLogFsync is `repl-log-fsync`: always, everysec (default) or no.
	ReplLogFsync LogFsync
	// ReplLogWindow is `repl-log-window` in bytes: how far the stream log's
	// follower may fall behind the stream's end before it lets go of the
	// stream's blocks and the log restarts as a new generation, so that a
	// disk slower than the stream costs memory up to this and no more; it
	// applies as at least the memory window (repl-backlog-size, at least
	// 16 MiB), which memory holds anyway. Default DefaultReplLogWindow, at
	// least MinReplLogWindow. Proxy-only.
	ReplLogWindow int64
	// ReplSnapshotRefresh is `repl-snapshot-refresh`, in whole seconds in
	// the directive: with the stream log on, the least time between two
	// snapshots the proxy fetches from the primary in the background, with
	// no replica asking, when the stream log is about to stop covering the
	// snapshot on disk. Default 0: never; a snapshot is fetched (a fork on
	// the primary) only when a replica needs one the proxy cannot serve.
	// Proxy-only.
	ReplSnapshotRefresh time.Duration
	// ReplSnapshotMaxStreamSince is `repl-snapshot-max-stream-since` in
	// bytes: under repl-snapshot-refresh, how much stream may pass since
	// the snapshot on disk before the proxy fetches a fresh one in the
	// background. Replicas get that snapshot and the stream after it, so
	// this bounds how much stream a new replica replays after its payload.
	// Default 0: three quarters of repl-log-size, which leaves a quarter of
	// the log for the fetch to finish in. Proxy-only.
	ReplSnapshotMaxStreamSince int64
	// BackupMaxStreamSince is `backup-max-stream-since` in bytes: how much
	// stream may have passed since a held snapshot for it to be served to
	// a backup client (REPLCONF rdb-only 1, as redis-cli --rdb sends), which
	// gets the snapshot alone and nothing of the stream after it. A held
	// snapshot further behind is not served: a fresh one is fetched from
	// the primary, so that a backup through the proxy is as fresh as one
	// taken from the primary. Default 0: only a snapshot with no stream
	// since. Proxy-only.
	BackupMaxStreamSince int64
	// SnapshotFromHost and SnapshotFromPort are `snapshot-from <host>
	// <port>`: where the proxy fetches every snapshot it needs, a Redis
	// replica of the same primary or a peer replproxy, so that the primary
	// need not fork for them. An empty SnapshotFromHost (and then
	// SnapshotFromPort 0) is `snapshot-from primary`, the default: the
	// configured primary, as without the directive ([Config.SnapshotFromAddr]).
	// Proxy-only.
	SnapshotFromHost string
	SnapshotFromPort int
	// SnapshotFromFallback is `snapshot-from-fallback` (yes/no): when the
	// snapshot-from source cannot be used (down, refusing, replicating
	// another primary, or further behind than the primary's backlog), true
	// asks the primary for the snapshot as without a source (a fork on the
	// primary), and false keeps retrying the source with backoff while the
	// replicas wait, for deployments where a fork on the primary is worse
	// than a late replica. Default true. Proxy-only.
	SnapshotFromFallback bool
	// ReplLinkSyncRateLimit is `repl-link-sync-rate-limit` in bytes per
	// second: the most a full-sync payload sent to a downstream proxy (a
	// replica that said capa replproxy) may take of its link, counted in
	// bytes on the wire, each link alone. The stream after the payload,
	// and real replicas, are never paced. A change applies to payloads in
	// progress from their next write. Default 0: unlimited. Otherwise at
	// least SyncRatePiece bytes per repl-timeout (2202 at 60 s), which
	// Validate checks. Proxy-only.
	ReplLinkSyncRateLimit int64
	// ReplReadCoalesce is `repl-read-coalesce-usec`, in microseconds in the
	// directive: how long the primary's stream may gather in the proxy's
	// socket before the proxy reads it, while it comes more often than
	// that or at 64 KiB or more per that time; a slower stream is read as
	// it arrives. Each read's wake-up costs the proxy more than the bytes
	// it brings at small values, but every byte relayed may then wait this
	// long more before a replica has it: a trade of CPU for staleness an
	// operator makes. Default 0: every stream is read as it arrives, so
	// that a replica behind the proxy is no staler than behind a chained
	// redis-server. TLS links are read as they arrive. A change applies at
	// the link's next wait. Proxy-only.
	ReplReadCoalesce time.Duration
	// ReplLinkCompressionCoalesce is `repl-link-compression-coalesce-usec`,
	// in microseconds in the directive: how long a chunk of live stream
	// smaller than 16 KiB may wait for more before this proxy sends it to
	// a downstream proxy over a compressed link. Small chunks cost the
	// codec about four times the CPU per byte on both ends, and every
	// byte of a chunk that waits reaches the replicas behind the link
	// that much later. Default 0: a chunk goes as soon as the stream has
	// no more for it. A change applies from each link's next chunk.
	// Proxy-only.
	ReplLinkCompressionCoalesce time.Duration

	// AckReplicas is `ack-policy`: 0 for `ack-policy received` (the
	// default: the proxy acknowledges to its primary what it has received,
	// as any replica does), n for `ack-policy replicas <n>` (it acknowledges
	// the highest offset at least n of its own replicas have acknowledged,
	// so that WAIT and min-replicas-to-write on the primary count them).
	// At most [maxAckReplicas].
	AckReplicas int

	// ClientOutputBufferLimit is `client-output-buffer-limit <class> <hard>
	// <soft> <seconds> ...` (sizes in bytes with units, seconds as an integer).
	// Defaults: normal 0 0 0, replica 256mb 64mb 60, pubsub 32mb 8mb 60.
	ClientOutputBufferLimit OutputBufferLimits

	// MaxMemory is `maxmemory` in bytes: the limit on memory that may be
	// evicted (replica buffers never count). 0 means no limit (the default).
	MaxMemory int64
	// MaxMemoryPolicy is `maxmemory-policy`: what happens over MaxMemory.
	// Default [eviction.NoEviction].
	MaxMemoryPolicy eviction.Policy

	// MaxClients is `maxclients`: the most simultaneous client connections,
	// replicas and connections in their TLS handshake included. Default
	// 10000, range 1..4294967295.
	MaxClients int

	// Dir is `dir`, the working directory for files replproxy writes,
	// locked (replproxy.lock) while the server runs. Default "."; must not
	// be empty. Unlike redis-server, setting it does not chdir (no
	// process-wide state), and [Config.Get] returns it as written.
	Dir string

	// LogLevel is `loglevel`: debug, verbose, notice (default), warning or
	// nothing.
	LogLevel LogLevel
	// LogFile is `logfile`, the file logs are appended to. Empty (the default)
	// means standard error.
	LogFile string
	// LogFormat is `log-format`: text (default) or json. Proxy-only.
	LogFormat LogFormat
	// Supervised is `supervised`: no (default), systemd or auto, as in
	// redis-server 7.0. Startup only; the program acts on it.
	Supervised Supervised

	// MetricsPort is `metrics-port`, proxy-only: the TCP port of the HTTP
	// server for /metrics (Prometheus), /healthz and /readyz. Default 0:
	// no HTTP server. Range 0..65535.
	MetricsPort int
	// MetricsBind is `metrics-bind`, proxy-only: the one address that HTTP
	// server listens on. Default "127.0.0.1"; one address as bind takes
	// them ("*", "::*", an IP address or a host name), without the "-".
	MetricsBind string
	// MetricsTLS is `metrics-tls` (yes/no), proxy-only: the monitoring
	// server speaks HTTPS with the proxy's own material (tls-cert-file,
	// tls-key-file, and under tls-auth-clients a client certificate from
	// tls-ca-cert-file / -dir), reloaded when the proxy reloads it. Default
	// false: plain HTTP. A MetricsWebConfig file with a tls_server_config
	// takes its place. Startup only.
	MetricsTLS bool
	// MetricsWebConfig is `metrics-web-config`, proxy-only: the path of a
	// Prometheus web configuration file (exporter-toolkit's
	// web.config.file format), read at start: its basic_auth_users guard
	// every path but /healthz, and its tls_server_config, when present,
	// serves HTTPS in place of MetricsTLS. Default "": none. Startup only.
	MetricsWebConfig string

	// TLSPort is `tls-port`: the TCP port of the TLS listener, on the same
	// bind addresses as Port. Default 0: none. With a TLSPort, Port 0 means
	// no plain listener (TLS only), as in Redis.
	TLSPort int
	// TLSCertFile and TLSKeyFile are `tls-cert-file` and `tls-key-file`:
	// the PEM certificate (chain) and key the TLS listener presents, and the
	// upstream link too unless TLSClientCertFile is set. Required when TLS is
	// in use ([Config.UsesTLS]).
	TLSCertFile string
	TLSKeyFile  string
	// TLSClientCertFile and TLSClientKeyFile are `tls-client-cert-file` and
	// `tls-client-key-file`: the certificate the upstream link presents, when
	// it must differ from TLSCertFile. Both or neither.
	TLSClientCertFile string
	TLSClientKeyFile  string
	// TLSCACertFile and TLSCACertDir are `tls-ca-cert-file` and
	// `tls-ca-cert-dir`: the CAs that client certificates and the primary's
	// certificate must chain to (every PEM file in the directory is read).
	// One is required when TLSAuthClients is not no or TLSReplication is on.
	TLSCACertFile string
	TLSCACertDir  string
	// TLSAuthClients is `tls-auth-clients`: yes (the default), no or
	// optional.
	TLSAuthClients TLSAuth
	// TLSReplication is `tls-replication` (yes/no): the upstream link and
	// the snapshot fetches dial the primary (and the snapshot-from source)
	// over TLS. Default false.
	TLSReplication bool

	// Users are the `user <name> <rules...>` lines, in order, each its
	// words after `user` (package acl applies them at start, as Redis
	// does, and refuses the start on a bad rule). Not settable by CONFIG
	// SET and not shown by CONFIG GET; CONFIG REWRITE writes the users in
	// force, as Redis does when it has no aclfile.
	Users [][]string
	// ACLFile is `aclfile`: the file users are loaded from at start and by
	// ACL LOAD, and written by ACL SAVE ("": none). Redis refuses user
	// lines together with an aclfile, and so does Validate.
	ACLFile string
	// ACLLogMaxLen is `acllog-max-len`: the most entries ACL LOG keeps.
	// Default 128.
	ACLLogMaxLen int64
	// TLSProtocols is `tls-protocols`: consecutive versions among TLSv1,
	// TLSv1.1, TLSv1.2 and TLSv1.3, space-separated. "" means TLSv1.2 and
	// TLSv1.3 ([Config.TLSVersions]).
	TLSProtocols string
	// TLSCiphers is `tls-ciphers`: the TLSv1.2 (and older) suites, OpenSSL
	// names separated by ':', among those Go implements. "" means Go's
	// defaults ([Config.TLSCipherSuites]).
	TLSCiphers string
	// TLSCiphersuites is `tls-ciphersuites`: the TLSv1.3 suites. Go cannot
	// restrict them, so a value must allow all three Go offers; "" is the
	// default.
	TLSCiphersuites string
}

// DefaultConfig returns a new Config holding every default.
func DefaultConfig() *Config {
	return &Config{
		Port:                        6379,
		Bind:                        []string{"127.0.0.1"},
		ProtectedMode:               true,
		ReplBacklogSize:             1 << 20,
		ReplTimeout:                 60 * time.Second,
		ReplReadCoalesce:            0,
		ReplLinkCompressionCoalesce: 0,
		ShutdownTimeout:             10 * time.Second,
		ReplLogSize:                 1 << 30,
		ReplLogFsync:                FsyncEverySec,
		ReplLogWindow:               DefaultReplLogWindow,
		ACLLogMaxLen:                128,

		SnapshotFromFallback: true,

		ClusterRefreshInterval: DefaultClusterRefreshInterval,

		ReplLinkCompression:         LinkCompressionNo,
		ReplLinkCompressionAllow:    true,
		ReplLinkCompressionMaxLinks: DefaultLinkCompressionMaxLinks,
		ClientOutputBufferLimit: OutputBufferLimits{
			Normal:  OutputBufferLimit{},
			Replica: OutputBufferLimit{Hard: 256 << 20, Soft: 64 << 20, SoftPeriod: 60 * time.Second},
			PubSub:  OutputBufferLimit{Hard: 32 << 20, Soft: 8 << 20, SoftPeriod: 60 * time.Second},
		},
		MaxMemory:       0,
		MaxMemoryPolicy: eviction.NoEviction,
		MaxClients:      10000,
		Dir:             ".",
		LogLevel:        LogNotice,
		LogFile:         "",
		LogFormat:       LogText,
		Supervised:      SupervisedNo,
		MetricsBind:     "127.0.0.1",
		TLSAuthClients:  TLSAuthYes,

		ClientQueryBufferLimit: 1 << 30,
		ProtoMaxBulkLen:        512 << 20,
		MasterQueryBufferLimit: 1 << 30,
	}
}

// SnapshotFromAddr returns snapshot-from's source as a dial address
// ("host:port", IPv6 hosts in brackets), or "" for `snapshot-from primary`:
// the snapshots are then fetched from the configured primary.
func (c *Config) SnapshotFromAddr() string {
	if c.SnapshotFromHost == "" {
		return ""
	}
	return net.JoinHostPort(c.SnapshotFromHost, strconv.Itoa(c.SnapshotFromPort))
}

// HostPort is a host and a port, as a directive names a node.
type HostPort struct {
	Host string
	Port int
}

// String returns the address as a dial address ("host:port", IPv6 hosts in
// brackets).
func (a HostPort) String() string { return net.JoinHostPort(a.Host, strconv.Itoa(a.Port)) }

// MaxClusterSeeds is the most nodes replicaof-cluster may name.
const MaxClusterSeeds = 64

// DefaultClusterRefreshInterval is cluster-refresh-interval's default.
const DefaultClusterRefreshInterval = 2 * time.Second

// AllShards is cluster-shard's value that follows every shard of the
// cluster (proxy/clusterset).
const AllShards = "all"

// FollowsAllShards reports whether c follows every shard of a cluster
// (`cluster-shard all`), which one proxy.Server does not do.
func (c *Config) FollowsAllShards() bool { return c.ClusterShard == AllShards }

// ClusterSeedAddrs returns replicaof-cluster's nodes as dial addresses, nil
// when it is not set. The slice is the caller's.
func (c *Config) ClusterSeedAddrs() []string {
	var addrs []string
	for _, a := range c.ClusterSeeds {
		addrs = append(addrs, a.String())
	}
	return addrs
}

// Clone returns a deep copy of c, or nil when c is nil.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	n := *c
	n.Bind = slices.Clone(c.Bind)
	n.ClusterSeeds = slices.Clone(c.ClusterSeeds)
	return &n
}

// Package config is replproxy's configuration: a plain [Config] struct, read
// from a redis.conf-style file and command line exactly as redis-server 7.0
// reads its own, and a directive table that CONFIG GET and CONFIG SET reuse.
//
// # Command line
//
//	replproxy [path/to/replproxy.conf] [--directive value ...] [-]
//
// [Parse] takes os.Args[1:]. A first argument not starting with '-' is the
// config file. Every "--name" then starts a directive whose values are the
// following arguments up to the next "--" argument, so
// `--replicaof 127.0.0.1 6379` is the file line "replicaof 127.0.0.1 6379".
// An argument "-", first or last, reads configuration from standard input
// as redis-server does, applied after the file. Command-line directives
// apply after both and override them.
//
// # File syntax
//
// One directive per line: a name (case-insensitive) and its arguments.
// Lines are trimmed; blank lines and lines starting with '#' are skipped; a
// '#' after a directive is not a comment. Arguments are split on blanks;
// "double quotes" take the escapes \n \r \t \b \a \\ \" \xHH, 'single
// quotes' take only \'. A closing quote must be followed by a blank or the
// end of the line, otherwise the line has unbalanced quotes. A directive may
// appear many times; the last one wins (client-output-buffer-limit changes
// only the classes it names). include is rejected as not supported.
//
// For ack-policy, bind, client-output-buffer-limit, replicaof,
// replicaof-cluster and snapshot-from a single argument is split again, so
// `client-output-buffer-limit "replica 256mb 64mb 60"`, the command-line
// `--bind "127.0.0.1 -::1"` and CONFIG SET with one value work as in Redis.
//
// # Values
//
// Sizes are byte counts with optional case-insensitive units: k=1000,
// kb=1024, m=1000², mb=1024², g=1000³, gb=1024³, b=1 ([ParseSize]); no sign,
// and values above 2⁶³-1 are rejected. Integers are plain decimal with no
// '+' and no leading zeros. Seconds are integers. Enums are
// case-insensitive. Booleans are yes/no ([ParseBool]).
//
// # Directives
//
//	directive                    default                 runtime  Config field
//	port                         6379                    yes      Port
//	bind                         127.0.0.1               yes      Bind
//	replicaof (slaveof)          none ("no one")         yes      MasterHost, MasterPort
//	replicaof-cluster            none                    no       ClusterSeeds
//	cluster-shard                none                    no       ClusterShard
//	cluster-port-base            0 (with all: required)  no       ClusterPortBase
//	cluster-refresh-interval     2000 (ms; 100-3600000)  yes      ClusterRefreshInterval
//	masterauth                   ""                      yes      MasterAuth
//	masteruser                   ""                      yes      MasterUser
//	bind-source-addr             "" (the kernel chooses) yes      BindSourceAddr
//	requirepass                  ""                      yes      RequirePass
//	protected-mode               yes                     yes      ProtectedMode
//	repl-backlog-size            1mb (min 16384)         yes      ReplBacklogSize
//	repl-timeout                 60                      yes      ReplTimeout
//	repl-link-compression        no                      yes      ReplLinkCompression
//	repl-link-compression-allow  yes                     yes      ReplLinkCompressionAllow
//	repl-link-compression-max-links
//	                             16 (0: no cap)          yes      ReplLinkCompressionMaxLinks
//	shutdown-timeout             10                      yes      ShutdownTimeout
//	repl-snapshot-refresh        0 (never)               yes      ReplSnapshotRefresh
//	repl-snapshot-max-stream-since
//	                             0 (¾ of repl-log-size)  yes      ReplSnapshotMaxStreamSince
//	backup-max-stream-since      0 (no stream since)     yes      BackupMaxStreamSince
//	snapshot-from                primary                 yes      SnapshotFromHost, SnapshotFromPort
//	snapshot-from-fallback       yes                     yes      SnapshotFromFallback
//	repl-link-sync-rate-limit    0 (unlimited; else at   yes      ReplLinkSyncRateLimit
//	                             least SyncRatePiece
//	                             per repl-timeout)
//	repl-read-coalesce-usec      0 (never)               yes      ReplReadCoalesce
//	repl-link-compression-coalesce-usec
//	                             0 (never)               yes      ReplLinkCompressionCoalesce
//	repl-log-window              64mb (min 4mb)          yes      ReplLogWindow
//	ack-policy                   received                yes      AckReplicas
//	client-output-buffer-limit   normal 0 0 0            yes      ClientOutputBufferLimit
//	                             replica 256mb 64mb 60
//	                             pubsub 32mb 8mb 60
//	maxmemory                    0 (no limit)            yes      MaxMemory
//	maxmemory-policy             noeviction              yes      MaxMemoryPolicy
//	maxclients                   10000                   yes      MaxClients
//	client-query-buffer-limit    1gb (min 1mb)           yes      ClientQueryBufferLimit
//	proto-max-bulk-len           512mb (min 1mb)         yes      ProtoMaxBulkLen
//	master-query-buffer-limit    1gb (min 1mb)           yes      MasterQueryBufferLimit
//	dir                          .                       yes      Dir
//	loglevel                     notice                  yes      LogLevel
//	logfile                      "" (stderr)             no (1)   LogFile
//	log-format                   text                    no (1)   LogFormat
//	supervised                   no                      no (1)   Supervised
//	metrics-port                 0 (no HTTP server)      no (2)   MetricsPort
//	metrics-bind                 127.0.0.1               no (2)   MetricsBind
//	metrics-tls                  no                      no (2)   MetricsTLS
//	metrics-web-config           "" (none)               no (2)   MetricsWebConfig
//	tls-port                     0 (no TLS listener)     no (3)   TLSPort
//	tls-cert-file, tls-key-file  ""                      yes      TLSCertFile, TLSKeyFile
//	tls-client-cert-file         ""                      yes      TLSClientCertFile
//	tls-client-key-file          ""                      yes      TLSClientKeyFile
//	tls-ca-cert-file             ""                      yes      TLSCACertFile
//	tls-ca-cert-dir              ""                      yes      TLSCACertDir
//	tls-auth-clients             yes                     yes      TLSAuthClients
//	tls-replication              no                      yes      TLSReplication
//	tls-protocols                "" (TLSv1.2 TLSv1.3)    yes      TLSProtocols
//	tls-ciphers                  "" (Go's defaults)      yes      TLSCiphers
//	tls-ciphersuites             "" (Go's three)         yes      TLSCiphersuites
//
// (1) The root logger is built once, by the program, before the server;
// Redis 7.0 too has logfile immutable. (2) The monitoring server's
// listener is opened, and its web configuration read, once, by New, and
// served for the server's life (metrics-tls follows CONFIG SET tls-*
// all the same: it serves the TLS material in force).
// (3) The TLS listeners are opened by New on tls-port; CONFIG SET bind
// moves them to the new addresses, as it moves port's, but their port
// stays.
//
// testdata/replproxy.conf at the repository root documents each one.
//
// # Errors
//
// Every error is an [*Error] carrying the file and line (when from a file)
// and the directive, wrapping one of [ErrUnknownDirective], [ErrArgCount],
// [ErrUnbalancedQuotes], [ErrInvalidValue], [ErrUnsupported] or an I/O
// error. Error strings never contain a whole line, so secrets are not logged.
//
// # Runtime changes and concurrency
//
// There is no package state besides the read-only directive table. A Config
// is a value owned by whoever holds it and is not safe for concurrent
// mutation. A CONFIG SET handler clones the server's current Config, checks
// [Mutable], calls [Config.Set] for each parameter and [Config.Validate] on
// the clone, then swaps it in, so a failed CONFIG SET changes nothing.
//
// # CONFIG REWRITE
//
// [Config.Rewrite] makes a file's new text from its old one as
// redis-server 7.0's rewriteConfig does: comments, blank lines and order
// kept (lines trimmed, runs of blank lines made one), a directive's first
// line replaced in place under its canonical name (slaveof becomes
// replicaof), its further lines blanked, a directive absent from the file
// appended after "# Generated by CONFIG REWRITE" only when it differs from
// its default, a directive at its default kept where it was; lines that
// name no directive are kept as "# ??? " comments. Values are quoted so
// that Load reads them back byte for byte, secrets included.
// [Config.RewriteFile] replaces the file atomically (temporary file, fsync,
// rename, fsync of the directory), keeping its permissions (Redis sets
// 0644 less the umask; replproxy keeps a 0600 file holding passwords
// 0600) and following a symbolic link.
//
// # Example
//
//	cfg, err := config.Parse(os.Args[1:])
//	if err != nil {
//		fmt.Fprintln(os.Stderr, err) // config: replproxy.conf:3: foo: unknown directive
//		os.Exit(1)
//	}
//	v, _ := cfg.Get("client-output-buffer-limit")
//	// v == "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
//
// # Differences from redis-server 7.0
//
// Deliberate ones: unknown Redis directives are errors, not ignored; sizes
// reject "", a bare unit and overflow (Redis reads them as 0 or wraps);
// replicaof rejects port 0, host names with characters no host has, and
// accepts "" as "no one"; port 0 picks a free port instead of disabling
// TCP, unless tls-port is set (then it means TLS only, as in Redis); loglevel accepts Redis 7.2's "nothing"; logfile "" means standard
// error; dir never changes the process's working directory (a relative
// dir stays relative to the directory the program started in); replicaof
// is set at runtime through this table; CONFIG REWRITE keeps the file's
// permissions; tls-port is startup-only (Redis 7.0 lets CONFIG SET move
// it); tls-protocols must name
// consecutive versions, tls-ciphers takes only a list of cipher names Go
// implements (no OpenSSL expressions), tls-ciphersuites must allow all
// three TLS 1.3 suites Go offers, since Go cannot restrict them;
// tls-client-cert-file and tls-client-key-file go together; the other
// tls-* directives of Redis (session cache, DH params, key passwords,
// tls-cluster, tls-prefer-server-ciphers) are unknown.
package config

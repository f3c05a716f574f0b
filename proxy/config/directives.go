package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/replproxy/replproxy/eviction"
	"github.com/replproxy/replproxy/proxy/wire"
)

// directive is one row of the directive table: how a redis.conf directive
// (and CONFIG GET/SET parameter) maps onto Config.
type directive struct {
	name  string // canonical name, lower case
	alias string // old name accepted as well (slaveof), or ""
	// mutable reports whether CONFIG SET may change it while running.
	mutable bool
	// multi marks Redis's MULTI_ARG_CONFIG: a single non-empty argument is
	// split again into words, so `bind "a b"` and CONFIG SET bind "a b" work.
	multi bool
	// nargs is the exact number of arguments, or -1 when set checks it.
	nargs int
	// set parses args and stores them in c. It stores nothing on error.
	set func(c *Config, args []string) error
	// get formats the value as redis-server's CONFIG GET does.
	get func(c *Config) string
}

// directives is the table, sorted by name. Read-only. To add a directive,
// add a Config field, a row here, a Validate check, a line in
// testdata/replproxy.conf and test cases.
var directives = []directive{
	stringDirective("aclfile", false, func(c *Config) *string { return &c.ACLFile }, nil),
	{
		name: "acllog-max-len", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, 1<<63-1)
			if err != nil {
				return err
			}
			c.ACLLogMaxLen = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(c.ACLLogMaxLen, 10) },
	},
	{
		name: "ack-policy", mutable: true, multi: true, nargs: -1,
		set: setAckPolicy, get: getAckPolicy,
	},
	sizeDirective("backup-max-stream-since", func(c *Config) *int64 { return &c.BackupMaxStreamSince }, 0),
	{
		name: "bind", mutable: true, multi: true, nargs: -1,
		set: func(c *Config, args []string) error {
			if len(args) == 1 && args[0] == "" {
				args = nil // Redis: a single empty argument means no address
			}
			if err := checkBind(args); err != nil {
				return err
			}
			c.Bind = slices.Clone(args)
			return nil
		},
		get: func(c *Config) string { return strings.Join(c.Bind, " ") },
	},
	stringDirective("bind-source-addr", true, func(c *Config) *string { return &c.BindSourceAddr }, checkBindSourceAddr),
	{
		name: "client-output-buffer-limit", mutable: true, multi: true, nargs: -1,
		set: setOutputLimits, get: getOutputLimits,
	},
	// Redis's range for both is 1mb..LONG_MAX.
	sizeDirective("client-query-buffer-limit", func(c *Config) *int64 { return &c.ClientQueryBufferLimit }, MinQueryLimit),
	{
		name: "cluster-port-base", nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, 65535)
			if err != nil {
				return err
			}
			c.ClusterPortBase = int(n)
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(c.ClusterPortBase) },
	},
	{
		name: "cluster-refresh-interval", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], minClusterRefreshMillis, maxClusterRefreshMillis)
			if err != nil {
				return err
			}
			c.ClusterRefreshInterval = time.Duration(n) * time.Millisecond
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(c.ClusterRefreshInterval.Milliseconds(), 10) },
	},
	stringDirective("cluster-shard", false, func(c *Config) *string { return &c.ClusterShard }, checkClusterShard),
	stringDirective("dir", true, func(c *Config) *string { return &c.Dir }, checkDir),
	enumDirective("log-format", false, func(c *Config) *LogFormat { return &c.LogFormat }, logFormats),
	stringDirective("logfile", false, func(c *Config) *string { return &c.LogFile }, nil),
	enumDirective("loglevel", true, func(c *Config) *LogLevel { return &c.LogLevel }, logLevels),
	// As client-query-buffer-limit: 1mb..LONG_MAX.
	sizeDirective("master-query-buffer-limit", func(c *Config) *int64 { return &c.MasterQueryBufferLimit }, MinQueryLimit),
	stringDirective("masterauth", true, func(c *Config) *string { return &c.MasterAuth }, nil),
	stringDirective("masteruser", true, func(c *Config) *string { return &c.MasterUser }, nil),
	{
		name: "maxclients", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 1, maxClientsLimit)
			if err != nil {
				return err
			}
			if int64(int(n)) != n { // only on 32-bit platforms
				return badValue(args[0], "argument too large for this platform")
			}
			c.MaxClients = int(n)
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(c.MaxClients) },
	},
	sizeDirective("maxmemory", func(c *Config) *int64 { return &c.MaxMemory }, 0),
	enumDirective("maxmemory-policy", true, func(c *Config) *eviction.Policy { return &c.MaxMemoryPolicy }, evictionPolicies),
	stringDirective("metrics-bind", false, func(c *Config) *string { return &c.MetricsBind }, checkMetricsBind),
	boolDirective("metrics-tls", false, func(c *Config) *bool { return &c.MetricsTLS }),
	stringDirective("metrics-web-config", false, func(c *Config) *string { return &c.MetricsWebConfig }, checkMetricsWebConfig),
	{
		name: "metrics-port", nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, 65535)
			if err != nil {
				return err
			}
			c.MetricsPort = int(n)
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(c.MetricsPort) },
	},
	{
		name: "port", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, 65535)
			if err != nil {
				return err
			}
			c.Port = int(n)
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(c.Port) },
	},
	{
		name: "protected-mode", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			switch wire.Lower(args[0]) {
			case "yes":
				c.ProtectedMode = true
			case "no":
				c.ProtectedMode = false
			default:
				return badValue(args[0], "argument must be 'yes' or 'no'")
			}
			return nil
		},
		get: func(c *Config) string { return FormatBool(c.ProtectedMode) },
	},
	sizeDirective("proto-max-bulk-len", func(c *Config) *int64 { return &c.ProtoMaxBulkLen }, MinQueryLimit),
	func() directive {
		// Redis's range is 1..LLONG_MAX; below MinReplBacklogSize it raises
		// the value (resizeReplicationBacklog), and CONFIG GET shows 16384.
		d := sizeDirective("repl-backlog-size", func(c *Config) *int64 { return &c.ReplBacklogSize }, 1)
		set := d.set
		d.set = func(c *Config, args []string) error {
			if err := set(c, args); err != nil {
				return err
			}
			c.ReplBacklogSize = max(c.ReplBacklogSize, MinReplBacklogSize)
			return nil
		}
		return d
	}(),
	enumDirective("repl-link-compression", true, func(c *Config) *LinkCompression { return &c.ReplLinkCompression }, linkCompressions),
	boolDirective("repl-link-compression-allow", true, func(c *Config) *bool { return &c.ReplLinkCompressionAllow }),
	{
		name: "repl-link-compression-max-links", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, maxLinkCompressionMaxLinks)
			if err != nil {
				return err
			}
			c.ReplLinkCompressionMaxLinks = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(c.ReplLinkCompressionMaxLinks, 10) },
	},
	sizeDirective("repl-link-sync-rate-limit", func(c *Config) *int64 { return &c.ReplLinkSyncRateLimit }, 0),
	enumDirective("repl-log-fsync", true, func(c *Config) *LogFsync { return &c.ReplLogFsync }, logFsyncs),
	sizeDirective("repl-log-window", func(c *Config) *int64 { return &c.ReplLogWindow }, MinReplLogWindow),
	func() directive {
		// Startup-only: the log is opened (or not) and recovered at start.
		d := sizeDirective("repl-log-size", func(c *Config) *int64 { return &c.ReplLogSize }, 0)
		d.mutable = false
		return d
	}(),
	{
		name: "repl-link-compression-coalesce-usec", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, int64(MaxLinkCoalesce/time.Microsecond))
			if err != nil {
				return err
			}
			c.ReplLinkCompressionCoalesce = time.Duration(n) * time.Microsecond
			return nil
		},
		get: func(c *Config) string {
			return strconv.FormatInt(int64(c.ReplLinkCompressionCoalesce/time.Microsecond), 10)
		},
	},
	{
		name: "repl-read-coalesce-usec", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, int64(MaxReadCoalesce/time.Microsecond))
			if err != nil {
				return err
			}
			c.ReplReadCoalesce = time.Duration(n) * time.Microsecond
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(int64(c.ReplReadCoalesce/time.Microsecond), 10) },
	},
	{
		name: "repl-timeout", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 1, maxSeconds)
			if err != nil {
				return err
			}
			c.ReplTimeout = time.Duration(n) * time.Second
			return nil
		},
		get: func(c *Config) string { return formatSeconds(c.ReplTimeout) },
	},
	sizeDirective("repl-snapshot-max-stream-since", func(c *Config) *int64 { return &c.ReplSnapshotMaxStreamSince }, 0),
	{
		name: "repl-snapshot-refresh", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, maxSeconds)
			if err != nil {
				return err
			}
			c.ReplSnapshotRefresh = time.Duration(n) * time.Second
			return nil
		},
		get: func(c *Config) string { return formatSeconds(c.ReplSnapshotRefresh) },
	},
	{
		name: "shutdown-timeout", mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseIntRange(args[0], 0, maxSeconds)
			if err != nil {
				return err
			}
			c.ShutdownTimeout = time.Duration(n) * time.Second
			return nil
		},
		get: func(c *Config) string { return formatSeconds(c.ShutdownTimeout) },
	},
	{
		name: "replicaof", alias: "slaveof", mutable: true, multi: true, nargs: -1,
		set: setReplicaOf,
		get: func(c *Config) string {
			if c.MasterHost == "" {
				return ""
			}
			return c.MasterHost + " " + strconv.Itoa(c.MasterPort)
		},
	},
	{
		name: "replicaof-cluster", multi: true, nargs: -1,
		set: setReplicaOfCluster,
		get: func(c *Config) string {
			words := make([]string, 0, 2*len(c.ClusterSeeds))
			for _, a := range c.ClusterSeeds {
				words = append(words, a.Host, strconv.Itoa(a.Port))
			}
			return strings.Join(words, " ")
		},
	},
	stringDirective("requirepass", true, func(c *Config) *string { return &c.RequirePass }, nil),
	{
		name: "snapshot-from", mutable: true, multi: true, nargs: -1,
		set: setSnapshotFrom,
		get: func(c *Config) string {
			if c.SnapshotFromHost == "" {
				return "primary"
			}
			return c.SnapshotFromHost + " " + strconv.Itoa(c.SnapshotFromPort)
		},
	},
	boolDirective("snapshot-from-fallback", true, func(c *Config) *bool { return &c.SnapshotFromFallback }),
	enumDirective("supervised", false, func(c *Config) *Supervised { return &c.Supervised }, supervisedModes),
	enumDirective("tls-auth-clients", true, func(c *Config) *TLSAuth { return &c.TLSAuthClients }, tlsAuthValues),
	tlsFileDirective("tls-ca-cert-dir", func(c *Config) *string { return &c.TLSCACertDir }),
	tlsFileDirective("tls-ca-cert-file", func(c *Config) *string { return &c.TLSCACertFile }),
	tlsFileDirective("tls-cert-file", func(c *Config) *string { return &c.TLSCertFile }),
	stringDirective("tls-ciphers", true, func(c *Config) *string { return &c.TLSCiphers }, func(s string) error { _, err := parseTLSCiphers(s); return err }),
	stringDirective("tls-ciphersuites", true, func(c *Config) *string { return &c.TLSCiphersuites }, checkTLSCiphersuites),
	tlsFileDirective("tls-client-cert-file", func(c *Config) *string { return &c.TLSClientCertFile }),
	tlsFileDirective("tls-client-key-file", func(c *Config) *string { return &c.TLSClientKeyFile }),
	tlsFileDirective("tls-key-file", func(c *Config) *string { return &c.TLSKeyFile }),
	tlsPortDirective,
	stringDirective("tls-protocols", true, func(c *Config) *string { return &c.TLSProtocols }, func(s string) error { _, _, err := parseTLSProtocols(s); return err }),
	boolDirective("tls-replication", true, func(c *Config) *bool { return &c.TLSReplication }),
}

// byName maps every name and alias to its row. Read-only.
var byName = func() map[string]*directive {
	m := make(map[string]*directive, 2*len(directives))
	for i := range directives {
		d := &directives[i]
		m[d.name] = d
		if d.alias != "" {
			m[d.alias] = d
		}
	}
	return m
}()

// Names returns the canonical directive names, sorted. Aliases (slaveof) are
// not listed, as CONFIG GET * does not list them; [Config.Set],
// [Config.Get] and [Mutable] accept them. The slice is the caller's.
func Names() []string {
	names := make([]string, len(directives))
	for i := range directives {
		names[i] = directives[i].name
	}
	slices.Sort(names)
	return names
}

// Canonical returns the name of the directive name names (any case, alias
// or not), and whether there is one: CONFIG SET's two names for one
// directive are one directive.
func Canonical(name string) (string, bool) {
	d := byName[wire.Lower(name)]
	if d == nil {
		return "", false
	}
	return d.name, true
}

// Mutable reports whether the named directive (any case, alias or not) may
// be changed at runtime with CONFIG SET. Unknown names report false.
// Startup-only directives are logfile and log-format (the root logger
// is built once, before the server), supervised (read by the program at
// start, as in Redis), metrics-port, metrics-bind, metrics-tls and
// metrics-web-config (the monitoring server's listener is opened, and its
// web configuration read, once, by New), repl-log-size
// (the stream log is opened and recovered at start), and replicaof-cluster
// and cluster-shard (the cluster's follower is started, or not, by Run).
func Mutable(name string) bool {
	d := byName[wire.Lower(name)]
	return d != nil && d.mutable
}

// Set parses args as the arguments of the named directive (any case, alias
// or not) with the same rules as a config file line, and stores the result
// in c. On error c is unchanged and the error is an [*Error] naming the
// directive. Set does not consult [Mutable]: a CONFIG SET handler must, and
// then run [Config.Validate] on the result for cross-field rules.
//
// For ack-policy, bind, client-output-buffer-limit, replicaof,
// replicaof-cluster and snapshot-from, a single non-empty argument is split into words first
// (redis-server's MULTI_ARG_CONFIG), so Set(name, v) accepts what
// Get(name) returned.
func (c *Config) Set(name string, args ...string) error {
	name = wire.Lower(name)
	if err := c.set(name, args); err != nil {
		return &Error{Directive: name, Err: err}
	}
	return nil
}

// set is Set on a lower-cased name, returning the bare error.
func (c *Config) set(name string, args []string) error {
	if name == "include" {
		return fmt.Errorf("include is %w: pass one config file, then --directive value arguments", ErrUnsupported)
	}
	if name == userDirective {
		return c.addUser(args)
	}
	d := byName[name]
	if d == nil {
		return ErrUnknownDirective
	}
	if d.multi && len(args) == 1 && args[0] != "" {
		words, err := splitArgs(args[0])
		if err != nil {
			return err
		}
		args = words
	}
	if d.nargs >= 0 && len(args) != d.nargs {
		return fmt.Errorf("%w: got %d, want %d", ErrArgCount, len(args), d.nargs)
	}
	return d.set(c, args)
}

// Get returns the named directive's value (any case, alias or not) as
// redis-server's CONFIG GET formats it: sizes as plain byte counts, seconds
// as integers (rounded up), replicaof as "host port" or "", snapshot-from
// as "host port" or "primary", bind as space-separated addresses,
// client-output-buffer-limit as
// "normal H S SEC slave H S SEC pubsub H S SEC". ok is false for an unknown
// name.
func (c *Config) Get(name string) (value string, ok bool) {
	d := byName[wire.Lower(name)]
	if d == nil {
		return "", false
	}
	return d.get(c), true
}

func stringDirective(name string, mutable bool, field func(*Config) *string, check func(string) error) directive {
	return directive{
		name: name, mutable: mutable, nargs: 1,
		set: func(c *Config, args []string) error {
			if check != nil {
				if err := check(args[0]); err != nil {
					return err
				}
			}
			*field(c) = args[0]
			return nil
		},
		get: func(c *Config) string { return *field(c) },
	}
}

// enumDirective matches its argument case-insensitively, as Redis does, and
// stores the canonical spelling.
func enumDirective[T ~string](name string, mutable bool, field func(*Config) *T, accepted []T) directive {
	return directive{
		name: name, mutable: mutable, nargs: 1,
		set: func(c *Config, args []string) error {
			v := T(wire.Lower(args[0]))
			if !slices.Contains(accepted, v) {
				return badValue(args[0], enumReason(accepted))
			}
			*field(c) = v
			return nil
		},
		get: func(c *Config) string { return string(*field(c)) },
	}
}

// sizeDirective is a mutable byte count with Redis's units, at least lo.
func sizeDirective(name string, field func(*Config) *int64, lo int64) directive {
	return directive{
		name: name, mutable: true, nargs: 1,
		set: func(c *Config, args []string) error {
			n, err := parseSize(args[0])
			if err != nil {
				return err
			}
			if n < lo {
				return badValue(args[0], fmt.Sprintf("argument must be between %d and %d inclusive", lo, int64(1<<63-1)))
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
	}
}

// userDirective is `user <name> <rules...>`, kept out of the directive
// table as Redis keeps it out of its config table: any number of lines,
// each adding a user, none of them a value CONFIG GET or CONFIG SET knows.
// Load and the command line take it; CONFIG REWRITE writes the users in
// force (rewriteUsers).
const userDirective = "user"

// addUser records one user line; package acl checks its rules at start.
func (c *Config) addUser(args []string) error {
	if len(args) == 0 || args[0] == "" {
		return fmt.Errorf("%w: got %d, want a user name and its rules", ErrArgCount, len(args))
	}
	c.Users = append(slices.Clone(c.Users), slices.Clone(args))
	return nil
}

// setReplicaOf implements `replicaof <host> <port>` and `replicaof no one`
// (setConfigReplicaOfOption). A single empty argument, what Get returns when
// there is no upstream, also means no one.
func setReplicaOf(c *Config, args []string) error {
	if len(args) == 1 && args[0] == "" {
		c.MasterHost, c.MasterPort = "", 0
		return nil
	}
	if len(args) != 2 {
		return fmt.Errorf("%w: got %d, want 2 (<host> <port> or no one)", ErrArgCount, len(args))
	}
	if wire.Lower(args[0]) == "no" && wire.Lower(args[1]) == "one" {
		c.MasterHost, c.MasterPort = "", 0
		return nil
	}
	if err := checkHost(args[0]); err != nil {
		return err
	}
	port, err := parseIntRange(args[1], 1, 65535)
	if err != nil {
		return fmt.Errorf("invalid master port: %w", err)
	}
	c.MasterHost, c.MasterPort = args[0], int(port)
	return nil
}

// setReplicaOfCluster implements `replicaof-cluster <host> <port> [<host>
// <port> ...]`: the seed nodes of the cluster whose shard the proxy
// follows, at most MaxClusterSeeds. A single empty argument, what Get
// returns when there is none, clears it.
func setReplicaOfCluster(c *Config, args []string) error {
	if len(args) == 1 && args[0] == "" {
		c.ClusterSeeds = nil
		return nil
	}
	if len(args) == 0 || len(args)%2 != 0 {
		return fmt.Errorf("%w: got %d, want <host> <port> pairs", ErrArgCount, len(args))
	}
	if len(args)/2 > MaxClusterSeeds {
		return badValue(strings.Join(args[:2], " ")+" ...", fmt.Sprintf("at most %d nodes", MaxClusterSeeds))
	}
	seeds := make([]HostPort, 0, len(args)/2)
	for i := 0; i < len(args); i += 2 {
		if err := checkHost(args[i]); err != nil {
			return err
		}
		port, err := parseIntRange(args[i+1], 1, 65535)
		if err != nil {
			return fmt.Errorf("invalid node port: %w", err)
		}
		seeds = append(seeds, HostPort{Host: args[i], Port: int(port)})
	}
	c.ClusterSeeds = seeds
	return nil
}

// setSnapshotFrom implements `snapshot-from <host> <port>` and
// `snapshot-from primary` (any case), as setReplicaOf reads replicaof. A
// single empty argument also means primary, as it means no one for
// replicaof, so that CONFIG SET snapshot-from "" resets both alike. A host
// named "primary" (a Kubernetes service may be) stays usable: with its
// port it is two arguments, so it is read as a host.
func setSnapshotFrom(c *Config, args []string) error {
	if len(args) == 1 && (args[0] == "" || wire.Lower(args[0]) == "primary") {
		c.SnapshotFromHost, c.SnapshotFromPort = "", 0
		return nil
	}
	if len(args) != 2 {
		return fmt.Errorf("%w: got %d, want 2 (<host> <port>) or 1 (primary)", ErrArgCount, len(args))
	}
	if err := checkHost(args[0]); err != nil {
		return err
	}
	port, err := parseIntRange(args[1], 1, 65535)
	if err != nil {
		return fmt.Errorf("invalid snapshot-from port: %w", err)
	}
	c.SnapshotFromHost, c.SnapshotFromPort = args[0], int(port)
	return nil
}

// setAckPolicy implements `ack-policy received` and `ack-policy replicas <n>`
// (n at least 1): what the proxy acknowledges to its primary.
func setAckPolicy(c *Config, args []string) error {
	switch {
	case len(args) == 1 && wire.Lower(args[0]) == "received":
		c.AckReplicas = 0
		return nil
	case len(args) == 2 && wire.Lower(args[0]) == "replicas":
		n, err := parseIntRange(args[1], 1, maxAckReplicas)
		if err != nil {
			return err
		}
		c.AckReplicas = int(n)
		return nil
	case len(args) == 0 || len(args) > 2:
		return fmt.Errorf("%w: got %d, want 1 or 2 (received, or replicas <n>)", ErrArgCount, len(args))
	}
	return badValue(strings.Join(args, " "), "argument must be 'received' or 'replicas <n>'")
}

// getAckPolicy formats ack-policy as setAckPolicy reads it back.
func getAckPolicy(c *Config) string {
	if c.AckReplicas == 0 {
		return "received"
	}
	return "replicas " + strconv.Itoa(c.AckReplicas)
}

// outputClass maps a client-output-buffer-limit class name (lower case) to
// its limit; Redis's getClientTypeByName, without "master".
func outputClass(l *OutputBufferLimits, name string) *OutputBufferLimit {
	switch name {
	case "normal":
		return &l.Normal
	case "replica", "slave":
		return &l.Replica
	case "pubsub":
		return &l.PubSub
	}
	return nil
}

// setOutputLimits implements client-output-buffer-limit as Redis's
// updateClientOutputBufferLimit: groups of four, all checked before any is
// stored, classes not named left as they were. No arguments at all is a
// no-op, as in Redis.
func setOutputLimits(c *Config, args []string) error {
	if len(args)%4 != 0 {
		return fmt.Errorf("%w: got %d, want groups of <class> <hard> <soft> <seconds>", ErrArgCount, len(args))
	}
	limits := c.ClientOutputBufferLimit
	for i := 0; i < len(args); i += 4 {
		class := outputClass(&limits, wire.Lower(args[i]))
		if class == nil {
			return badValue(args[i], "invalid client class: must be normal, replica (slave) or pubsub")
		}
		hard, err := parseSize(args[i+1])
		if err != nil {
			return fmt.Errorf("hard limit: %w", err)
		}
		soft, err := parseSize(args[i+2])
		if err != nil {
			return fmt.Errorf("soft limit: %w", err)
		}
		seconds, err := parseIntRange(args[i+3], 0, maxSeconds)
		if err != nil {
			return fmt.Errorf("soft seconds: %w", err)
		}
		*class = OutputBufferLimit{Hard: hard, Soft: soft, SoftPeriod: time.Duration(seconds) * time.Second}
	}
	c.ClientOutputBufferLimit = limits
	return nil
}

func getOutputLimits(c *Config) string {
	l := &c.ClientOutputBufferLimit
	var b []byte
	for _, class := range []struct {
		name  string
		limit *OutputBufferLimit
	}{{"normal", &l.Normal}, {"slave", &l.Replica}, {"pubsub", &l.PubSub}} {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, class.name...)
		b = append(b, ' ')
		b = strconv.AppendInt(b, class.limit.Hard, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, class.limit.Soft, 10)
		b = append(b, ' ')
		b = append(b, formatSeconds(class.limit.SoftPeriod)...)
	}
	return string(b)
}

// formatSeconds formats d as whole seconds, rounding a fraction up so that a
// positive duration never prints as 0.
func formatSeconds(d time.Duration) string {
	s := d / time.Second
	if d%time.Second > 0 {
		s++
	}
	return strconv.FormatInt(int64(s), 10)
}
